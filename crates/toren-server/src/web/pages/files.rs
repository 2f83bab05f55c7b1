//! A workspace's pages: a directory's listing and a file's viewer, for a run's workspace
//! or a session's, read through the workspace's handle as the file tools read.

use super::*;

/// Which workspace a file page is of.
enum Owner {
    Run(String),
    Session(String),
}

impl Owner {
    fn ui(&self) -> String {
        match self {
            Self::Run(id) => format!("/ui/runs/{}", url(id)),
            Self::Session(id) => format!("/ui/sessions/{}", url(id)),
        }
    }
    fn api(&self) -> String {
        format!("/ui/api{}", &self.ui()[3..])
    }
    fn label(&self) -> String {
        match self {
            Self::Run(id) => format!("run {id}"),
            Self::Session(id) => format!("session {id}"),
        }
    }
}

pub(crate) async fn run_files_root(
    state: State<AppState>,
    signed: Extension<Signed>,
    Path(id): Path<String>,
) -> Result<Response, Problem> {
    files(state, signed, Owner::Run(id), String::new()).await
}

pub(crate) async fn run_files(
    state: State<AppState>,
    signed: Extension<Signed>,
    Path((id, path)): Path<(String, String)>,
) -> Result<Response, Problem> {
    files(state, signed, Owner::Run(id), path).await
}

pub(crate) async fn session_files_root(
    state: State<AppState>,
    signed: Extension<Signed>,
    Path(key): Path<String>,
) -> Result<Response, Problem> {
    files(state, signed, Owner::Session(key), String::new()).await
}

pub(crate) async fn session_files(
    state: State<AppState>,
    signed: Extension<Signed>,
    Path((key, path)): Path<(String, String)>,
) -> Result<Response, Problem> {
    files(state, signed, Owner::Session(key), path).await
}

/// What a workspace path is.
pub(super) enum Found {
    Directory(Vec<(String, EntryKind, u64)>),
    File(Vec<u8>),
}

pub(super) fn look(root: &str, path: &str) -> Result<Found, Problem> {
    let workspace = Workspace::open_path(std::path::Path::new(root))
        .map_err(|_| Problem::not_found("the workspace is gone"))?;
    let is_dir = path.is_empty()
        || workspace
            .metadata(path)
            .map_err(|e| crate::files::problem(path, e))?
            .kind
            == EntryKind::Directory;
    if is_dir {
        let mut entries: Vec<_> = workspace
            .list(path)
            .map_err(|e| crate::files::problem(path, e))?
            .into_iter()
            .map(|(name, info)| (name, info.kind, info.len))
            .collect();
        entries.sort_by(|a, b| {
            (a.1 != EntryKind::Directory, &a.0).cmp(&(b.1 != EntryKind::Directory, &b.0))
        });
        return Ok(Found::Directory(entries));
    }
    let bytes = workspace
        .read(path, crate::FILE_LIMIT)
        .map_err(|e| crate::files::problem(path, e))?;
    Ok(Found::File(bytes))
}

fn human_size(bytes: u64) -> String {
    match bytes {
        b if b < 1024 => format!("{b} B"),
        b if b < 1024 * 1024 => format!("{:.1} KiB", b as f64 / 1024.0),
        b => format!("{:.1} MiB", b as f64 / (1024.0 * 1024.0)),
    }
}

/// A directory's entries as a table of links (directories first), sizes beside them.
pub(super) fn listing(
    body: &mut String,
    owner_ui: &str,
    path: &str,
    entries: Vec<(String, EntryKind, u64)>,
) {
    body.push_str("<table class=\"files\" id=\"files\"><thead><tr><th>Name</th><th>Size</th></tr></thead><tbody>");
    if entries.is_empty() {
        body.push_str("<tr><td colspan=\"2\" class=\"muted\">empty</td></tr>");
    }
    for (name, kind, size) in entries {
        let full = if path.is_empty() {
            name.clone()
        } else {
            format!("{path}/{name}")
        };
        let (shown, size) = match kind {
            EntryKind::Directory => (format!("{}/", visible(&name)), String::from("—")),
            _ => (visible(&name).into_owned(), human_size(size)),
        };
        let cell = match kind {
            EntryKind::Other => esc(&shown),
            _ => format!(
                "<a href=\"{owner_ui}/files/{}\">{}</a>",
                url_path(&full),
                esc(&shown)
            ),
        };
        let _ = write!(
            body,
            "<tr data-name=\"{}\"><td>{cell}</td><td class=\"size\">{size}</td></tr>",
            esc(&visible(&name))
        );
    }
    body.push_str("</tbody></table>");
}

async fn files(
    State(state): State<AppState>,
    Extension(signed): Extension<Signed>,
    owner: Owner,
    path: String,
) -> Result<Response, Problem> {
    let root = match &owner {
        Owner::Run(id) => crate::files::run_workspace(&state, id).await?,
        Owner::Session(key) => crate::files::session_workspace(&state, key).await?,
    };
    let path = path.trim_end_matches('/').to_owned();
    let found = {
        let (root, path) = (root.clone(), path.clone());
        tokio::task::spawn_blocking(move || look(&root, &path))
            .await
            .map_err(|_| {
                Problem::new(
                    StatusCode::INTERNAL_SERVER_ERROR,
                    "the workspace could not be read",
                )
            })??
    };
    let pending = pending_count(&state).await?;
    let mut body = String::new();
    // Breadcrumbs: the owner, then each directory of the path.
    let _ = write!(
        body,
        "<h1>Workspace</h1><p class=\"crumbs\"><a href=\"{}\">{}</a> / <a href=\"{}/files/\">workspace</a>",
        owner.ui(),
        esc(&visible(&owner.label())),
        owner.ui()
    );
    let mut so_far = String::new();
    for part in path.split('/').filter(|p| !p.is_empty()) {
        if !so_far.is_empty() {
            so_far.push('/');
        }
        so_far.push_str(part);
        let _ = write!(
            body,
            " / <a href=\"{}/files/{}\">{}</a>",
            owner.ui(),
            url_path(&so_far),
            esc(&visible(part))
        );
    }
    body.push_str("</p>");
    match found {
        Found::Directory(entries) => listing(&mut body, &owner.ui(), &path, entries),
        Found::File(bytes) => {
            let raw = format!("{}/files/{}", owner.api(), url_path(&path));
            // The name as shown, also the name a download is saved under.
            let name = visible(path.rsplit('/').next().unwrap_or_default());
            let _ = write!(
                body,
                "<p class=\"actions\">{} · <a href=\"{}\" download=\"{}\" id=\"download\">Download</a></p>",
                human_size(bytes.len() as u64),
                esc(&raw),
                esc(&name)
            );
            let mime = mime_guess::from_path(&path).first_or_octet_stream();
            if mime.type_() == "image" && mime.subtype() != "svg" {
                let _ = write!(
                    body,
                    "<p><img id=\"preview\" class=\"preview\" src=\"{}\" alt=\"{}\"></p>",
                    esc(&raw),
                    esc(&name)
                );
            } else if bytes.len() <= VIEW_LIMIT
                && let Ok(text) = std::str::from_utf8(&bytes)
            {
                // A CR ending a line (CRLF) is its line ending; any other is marked.
                body.push_str("<ol class=\"code\" id=\"viewer\">");
                for line in text.lines() {
                    let _ = write!(body, "<li>{}</li>", esc(&visible_lines(line)));
                }
                body.push_str("</ol>");
            } else {
                body.push_str("<p class=\"muted\" id=\"binary\">Not shown (binary or too large); download it.</p>");
            }
        }
    }
    Ok(layout(
        &title_with(pending, "Workspace"),
        Some(&signed),
        "files",
        &body,
    ))
}
