//! What changed between two checkpoints: a unified diff for text, one line for binary.

use std::collections::BTreeMap;
use std::fmt::Write as _;

use crate::{Entry, EntryKind, Result, Store};

/// How one path changed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Change {
    Added,
    Removed,
    Modified,
    /// Only the permission bits.
    Mode {
        from: u32,
        to: u32,
    },
    /// A file became a directory, a symlink a file, …
    Kind,
}

/// One changed path, rendered.
#[derive(Clone, Debug)]
pub struct FileDiff {
    pub path: String,
    pub change: Change,
    /// A unified diff (text), or one line (binary, directories, symlinks, modes).
    pub text: String,
}

impl Store {
    /// The changes from checkpoint `from` to checkpoint `to`, by path.
    pub fn diff(&self, from: &str, to: &str) -> Result<Vec<FileDiff>> {
        let a = self.manifest(from)?;
        let b = self.manifest(to)?;
        let mut paths: BTreeMap<&str, (Option<&Entry>, Option<&Entry>)> = BTreeMap::new();
        for e in &a.entries {
            paths.entry(&e.path).or_default().0 = Some(e);
        }
        for e in &b.entries {
            paths.entry(&e.path).or_default().1 = Some(e);
        }
        let mut out = Vec::new();
        for (path, pair) in paths {
            let diff = match pair {
                (None, None) => None,
                (None, Some(new)) => Some((Change::Added, self.render(path, None, Some(new))?)),
                (Some(old), None) => Some((Change::Removed, self.render(path, Some(old), None)?)),
                (Some(old), Some(new)) => self.compare(path, old, new)?,
            };
            if let Some((change, text)) = diff {
                out.push(FileDiff {
                    path: path.to_owned(),
                    change,
                    text,
                });
            }
        }
        Ok(out)
    }

    fn compare(&self, path: &str, old: &Entry, new: &Entry) -> Result<Option<(Change, String)>> {
        Ok(match (&old.kind, &new.kind) {
            (EntryKind::Dir, EntryKind::Dir) => mode_change(path, old, new),
            (EntryKind::Symlink { target: t1 }, EntryKind::Symlink { target: t2 }) => {
                if t1 == t2 {
                    mode_change(path, old, new)
                } else {
                    Some((
                        Change::Modified,
                        format!("symlink {path}: -> {t1} became -> {t2}\n"),
                    ))
                }
            }
            (EntryKind::File { hash: h1, .. }, EntryKind::File { hash: h2, .. }) => {
                if h1 == h2 {
                    mode_change(path, old, new)
                } else {
                    Some((Change::Modified, self.render(path, Some(old), Some(new))?))
                }
            }
            _ => Some((
                Change::Kind,
                format!(
                    "{path}: {} became {}\n",
                    kind_name(&old.kind),
                    kind_name(&new.kind)
                ),
            )),
        })
    }

    /// A unified diff when both sides are text (or absent), else one line.
    fn render(&self, path: &str, old: Option<&Entry>, new: Option<&Entry>) -> Result<String> {
        let content = |e: Option<&Entry>| -> Result<Option<Vec<u8>>> {
            match e.map(|e| &e.kind) {
                Some(EntryKind::File { hash, .. }) => self.blob(hash).map(Some),
                _ => Ok(None),
            }
        };
        let (a, b) = (content(old)?, content(new)?);
        for e in [old, new].into_iter().flatten() {
            if !matches!(e.kind, EntryKind::File { .. }) {
                let verb = if old.is_some() { "removed" } else { "added" };
                return Ok(match &e.kind {
                    EntryKind::Symlink { target } => format!("symlink {path} -> {target} {verb}\n"),
                    _ => format!("directory {path}/ {verb}\n"),
                });
            }
        }
        let text = |bytes: &Option<Vec<u8>>| match bytes {
            None => Some(String::new()),
            Some(b) if !b.contains(&0) => String::from_utf8(b.clone()).ok(),
            Some(_) => None,
        };
        let (Some(ta), Some(tb)) = (text(&a), text(&b)) else {
            let size = |b: &Option<Vec<u8>>| b.as_ref().map_or(0, Vec::len);
            return Ok(format!(
                "Binary file {path} differs ({} -> {} bytes)\n",
                size(&a),
                size(&b)
            ));
        };
        let from = if old.is_some() {
            format!("a/{path}")
        } else {
            "/dev/null".to_owned()
        };
        let to = if new.is_some() {
            format!("b/{path}")
        } else {
            "/dev/null".to_owned()
        };
        let diff = similar::TextDiff::from_lines(&ta, &tb);
        let mut out = String::new();
        let _ = write!(
            out,
            "{}",
            diff.unified_diff().context_radius(3).header(&from, &to)
        );
        Ok(out)
    }
}

fn mode_change(path: &str, old: &Entry, new: &Entry) -> Option<(Change, String)> {
    (old.mode != new.mode).then(|| {
        (
            Change::Mode {
                from: old.mode,
                to: new.mode,
            },
            format!("mode {path}: {:o} -> {:o}\n", old.mode, new.mode),
        )
    })
}

fn kind_name(kind: &EntryKind) -> &'static str {
    match kind {
        EntryKind::Dir => "a directory",
        EntryKind::File { .. } => "a file",
        EntryKind::Symlink { .. } => "a symlink",
    }
}
