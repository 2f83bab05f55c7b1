//! Files between the person and the workspace: an incoming photo or document is saved
//! under `uploads/` in the session's workspace through its directory handle (never
//! overwriting other bytes: a number is added; the same bytes again are the same file),
//! and the turn says where; `/files` lists the workspace tree.

use std::path::PathBuf;

use toren_display::visible;
use toren_sandbox::{EntryKind, Workspace};
use toren_store::Session;

use super::Bot;
use crate::render::escape_html;
use crate::types::Message;

/// The most entries `/files` lists.
const TREE_LIMIT: usize = 200;

fn workspace(session: &Session) -> Option<PathBuf> {
    session
        .policy
        .as_ref()
        .and_then(|p| p.workspace.as_ref())
        .map(PathBuf::from)
}

/// A file name safe in the workspace: no path separators, no leading dot.
fn safe_name(name: &str) -> String {
    let cleaned: String = name
        .chars()
        .map(|c| {
            if c.is_alphanumeric() || matches!(c, '.' | '-' | '_') {
                c
            } else {
                '_'
            }
        })
        .collect();
    let cleaned = cleaned.trim_start_matches('.').to_owned();
    if cleaned.is_empty() {
        "file".to_owned()
    } else {
        cleaned
    }
}

/// Saves the photo or document of `message` into the workspace; the note for the turn.
/// The same upload handled again (after a crash) finds its file by its bytes instead of
/// saving a second copy.
pub(super) async fn save_upload(
    bot: &Bot,
    session: &Session,
    message: &Message,
) -> Result<String, String> {
    let Some(root) = workspace(session) else {
        return Err("this agent has no workspace to put files in".to_owned());
    };
    let (file_id, name) = if let Some(document) = &message.document {
        (
            document.file_id.clone(),
            safe_name(document.file_name.as_deref().unwrap_or("document")),
        )
    } else if let Some(photo) = message.photo.as_ref().and_then(|sizes| {
        sizes
            .iter()
            .max_by_key(|p| (p.file_size.unwrap_or(0), p.width))
    }) {
        (
            photo.file_id.clone(),
            format!("photo-{}.jpg", message.message_id),
        )
    } else {
        return Err("no file in the message".to_owned());
    };
    let bytes = bot
        .api
        .download(&file_id)
        .await
        .map_err(|e| e.to_string())?;
    let size = bytes.len();
    let relative = tokio::task::spawn_blocking(move || {
        let workspace = Workspace::open_path(&root).map_err(|e| e.to_string())?;
        save_once(&workspace, &name, &bytes)
    })
    .await
    .map_err(|e| e.to_string())??;
    Ok(format!(
        "[The person sent a file; it is saved in the workspace at {relative} ({size} bytes).]"
    ))
}

/// Writes `bytes` as `uploads/name`, or `name-2`, `name-3`, … when a file of other bytes
/// has the name; a file with these bytes already is reused. Through the workspace's
/// handle, so nothing the agent left in `uploads/` (a symlink out) is followed out of it.
fn save_once(workspace: &Workspace, name: &str, bytes: &[u8]) -> Result<String, String> {
    let (stem, ext) = match name.rsplit_once('.') {
        Some((stem, ext)) if !stem.is_empty() => (stem.to_owned(), format!(".{ext}")),
        _ => (name.to_owned(), String::new()),
    };
    let limit = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
    for n in 1..1000 {
        let candidate = if n == 1 {
            format!("uploads/{name}")
        } else {
            format!("uploads/{stem}-{n}{ext}")
        };
        match workspace.metadata(&candidate) {
            Err(toren_sandbox::Error::NotFound { .. }) => {
                workspace
                    .write(&candidate, bytes)
                    .map_err(|e| e.to_string())?;
                return Ok(candidate);
            }
            Err(e) => return Err(e.to_string()),
            Ok(info) if info.kind == EntryKind::File && info.len == limit => {
                if workspace.read(&candidate, limit).is_ok_and(|b| b == bytes) {
                    return Ok(candidate);
                }
            }
            Ok(_) => {}
        }
    }
    Err("too many files of that name in uploads/".to_owned())
}

/// The workspace tree, for `/files`: listed through the workspace's directory handle
/// (cap-std), so every directory is opened beneath the workspace and a symlink swapped in
/// (or left by the agent) cannot make it list anything outside.
pub(super) async fn tree(session: &Session) -> String {
    let Some(root) = workspace(session) else {
        return "This agent has no workspace.".to_owned();
    };
    let listing = tokio::task::spawn_blocking(move || {
        let mut lines = Vec::new();
        if let Ok(workspace) = Workspace::open_path(&root) {
            walk(&workspace, "", 0, &mut lines);
        }
        lines
    })
    .await
    .unwrap_or_default();
    if listing.is_empty() {
        return "The workspace is empty.".to_owned();
    }
    let more = listing.len() > TREE_LIMIT;
    let mut text = String::from("<pre>");
    for line in listing.iter().take(TREE_LIMIT) {
        text.push_str(&escape_html(&visible(line)));
        text.push('\n');
    }
    if more {
        text.push_str("…\n");
    }
    text.push_str("</pre>");
    text
}

fn walk(workspace: &Workspace, dir: &str, depth: usize, lines: &mut Vec<String>) {
    if depth > 6 || lines.len() > TREE_LIMIT {
        return;
    }
    let Ok(entries) = workspace.list(dir) else {
        return;
    };
    for (name, info) in entries {
        if lines.len() > TREE_LIMIT {
            return;
        }
        let indent = "  ".repeat(depth);
        match info.kind {
            EntryKind::Directory => {
                lines.push(format!("{indent}{name}/"));
                let path = if dir.is_empty() {
                    name
                } else {
                    format!("{dir}/{name}")
                };
                walk(workspace, &path, depth + 1, lines);
            }
            EntryKind::File => lines.push(format!("{indent}{name} ({} B)", info.len)),
            EntryKind::Other => lines.push(format!("{indent}{name}")),
        }
    }
}
