//! The checks a path the model gave passes before the kernel resolves it beneath the
//! workspace, and their messages: empty and NUL paths, `..` that climbs out, and absolute
//! paths — including the sandbox's own view of the workspace, `/workspace/...`, which gets
//! the relative path to write instead. A suggested path is built lexically from the
//! sandbox's view, so it never holds `..` and never leads out. Workspace names (run ids)
//! are checked here too. The kernel (`RESOLVE_BENEATH`, in `workspace.rs`) stays the
//! boundary; these checks only give clearer messages first.

use std::ffi::OsStr;
use std::path::{Component, Path};

use crate::error::{Error, Result};

use super::SANDBOX_WORKDIR;

/// A workspace name is a single plain path component (a run or session id).
pub(super) fn check_name(name: &str) -> Result<()> {
    let ok = !name.is_empty() && !name.contains(['/', '\0']) && !name.bytes().all(|b| b == b'.');
    if ok {
        Ok(())
    } else {
        Err(Error::InvalidWorkspaceName {
            name: name.to_owned(),
        })
    }
}

/// Rejects what cap-std would reject with a less helpful message, and what it would not
/// reject but should (NUL bytes end a C string).
pub(super) fn check_path(path: &str) -> Result<&Path> {
    let invalid = |why: String| Error::InvalidPath {
        path: path.to_owned(),
        why,
    };
    if path.is_empty() {
        return Err(invalid(
            "the path is empty; give a path relative to the workspace root, e.g. `notes.txt`"
                .to_owned(),
        ));
    }
    if path.contains('\0') {
        return Err(invalid("the path contains a NUL byte".to_owned()));
    }
    let escape = || Error::PathEscape {
        path: path.to_owned(),
    };
    if path.starts_with('/') {
        return Err(match in_sandbox_workdir(path) {
            None => escape(),
            Some(inside) if inside.is_empty() => invalid(format!(
                "`{SANDBOX_WORKDIR}` is the workspace root itself, a directory; paths are \
                 relative to it: `notes.txt` is `{SANDBOX_WORKDIR}/notes.txt`"
            )),
            Some(inside) => invalid(format!(
                "paths are relative to the workspace root, which bash sees as \
                 `{SANDBOX_WORKDIR}`; write `{inside}` instead"
            )),
        });
    }
    // The kernel enforces the boundary; this only gives `..` that climbs out a clear error
    // even where a missing directory on the way would stop resolution first.
    let mut depth = 0usize;
    let climbs_out = Path::new(path).components().any(|c| match c {
        Component::Normal(_) => {
            depth += 1;
            false
        }
        Component::ParentDir => match depth.checked_sub(1) {
            Some(up) => {
                depth = up;
                false
            }
            None => true,
        },
        Component::CurDir | Component::RootDir | Component::Prefix(_) => false,
    });
    if climbs_out {
        return Err(escape());
    }
    Ok(Path::new(path))
}

/// For an absolute path as the sandbox sees it, the path relative to [`SANDBOX_WORKDIR`]
/// it names (`""` for the workspace root), or `None` if it names something outside. `..`
/// is resolved lexically, as the sandbox's root would (`/..` is `/`), so the result never
/// holds `..`, `.` or empty components.
fn in_sandbox_workdir(path: &str) -> Option<String> {
    let mut names: Vec<&OsStr> = Vec::new();
    for component in Path::new(path).components() {
        match component {
            Component::Normal(name) => names.push(name),
            Component::ParentDir => {
                names.pop();
            }
            Component::CurDir | Component::RootDir | Component::Prefix(_) => {}
        }
    }
    let workdir = SANDBOX_WORKDIR.trim_start_matches('/');
    let (first, rest) = names.split_first()?;
    if *first != OsStr::new(workdir) {
        return None;
    }
    let rest: Vec<&str> = rest.iter().filter_map(|name| name.to_str()).collect();
    Some(rest.join("/"))
}

#[cfg(test)]
mod tests {
    use super::in_sandbox_workdir;

    #[test]
    fn sandbox_paths_resolve_lexically() {
        let cases = [
            ("/workspace", Some("")),
            ("/workspace/", Some("")),
            ("//workspace//.", Some("")),
            ("/workspace/src/main.rs", Some("src/main.rs")),
            ("/workspace/./a//b/", Some("a/b")),
            ("/workspace/a/../b", Some("b")),
            ("/workspace/../workspace/x", Some("x")),
            ("/../workspace/x", Some("x")),
            ("/workspace/..", None),
            ("/workspace/../etc/passwd", None),
            ("/workspace/a/../../etc", None),
            ("/workspacefoo/x", None),
            ("/etc/passwd", None),
            ("/", None),
        ];
        for (path, want) in cases {
            assert_eq!(in_sandbox_workdir(path).as_deref(), want, "{path}");
        }
    }
}
