//! Walking a workspace without following symlinks, and opening its files without following
//! one either.

use std::fs::{File, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::Path;

use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat2};

use crate::{Exclude, Result, io};

/// One thing found in the workspace, with what `lstat` said.
pub(crate) struct Found {
    pub(crate) path: String,
    pub(crate) meta: Metadata,
}

/// What a walk found: every entry (parents before children) and the names it skipped.
pub(crate) struct Walked {
    pub(crate) found: Vec<Found>,
    /// Names that are not UTF-8 (not recorded) and special files (sockets, fifos, devices).
    pub(crate) skipped: Vec<String>,
}

/// Every entry below `root` that is not excluded, sorted by path, parents first.
pub(crate) fn walk(root: &Path, exclude: &Exclude) -> Result<Walked> {
    let mut walked = Walked {
        found: Vec::new(),
        skipped: Vec::new(),
    };
    visit(root, "", exclude, &mut walked)?;
    walked.found.sort_by(|a, b| a.path.cmp(&b.path));
    Ok(walked)
}

fn visit(root: &Path, rel: &str, exclude: &Exclude, walked: &mut Walked) -> Result<()> {
    let dir = if rel.is_empty() {
        root.to_path_buf()
    } else {
        root.join(rel)
    };
    let entries = std::fs::read_dir(&dir).map_err(io("read directory", &dir))?;
    for entry in entries {
        let entry = entry.map_err(io("read directory", &dir))?;
        let name = entry.file_name();
        let Some(name) = name.to_str() else {
            walked
                .skipped
                .push(format!("{rel}/{}", name.to_string_lossy()));
            continue;
        };
        let path = if rel.is_empty() {
            name.to_owned()
        } else {
            format!("{rel}/{name}")
        };
        // lstat relative to the directory read (`fstatat`, no symlink followed): a
        // symlink is itself, never what it points at.
        let meta = match entry.metadata() {
            Ok(meta) => meta,
            // Gone since the directory was read.
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => continue,
            Err(e) => return Err(io("stat", &root.join(&path))(e)),
        };
        let ft = meta.file_type();
        if exclude.excludes(&path, ft.is_dir()) {
            continue;
        }
        if !(ft.is_dir() || ft.is_file() || ft.is_symlink()) {
            walked.skipped.push(path);
            continue;
        }
        let is_dir = ft.is_dir();
        walked.found.push(Found {
            path: path.clone(),
            meta,
        });
        if is_dir {
            visit(root, &path, exclude, walked)?;
        }
    }
    Ok(())
}

/// Opens the file `rel` beneath the directory `root` for reading. The kernel resolves every
/// component beneath `root` and refuses a symlink anywhere on the way (`openat2` with
/// `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), so a process in the sandbox that swaps a
/// directory for a symlink after the walk saw it cannot make Toren read a file outside the
/// workspace into a checkpoint.
pub(crate) fn open_beneath(root: &File, rel: &Path) -> Result<(File, Metadata)> {
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    let file =
        File::from(openat2(root, rel, how).map_err(|e| io("open", rel)(std::io::Error::from(e)))?);
    let meta = file.metadata().map_err(io("stat", rel))?;
    Ok((file, meta))
}

/// Nanoseconds since the epoch of the modification and change times.
pub(crate) fn times(meta: &Metadata) -> (i64, i64) {
    (
        meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
        meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_file_is_read_only_beneath_the_workspace() {
        let dir = tempfile::tempdir().expect("temp dir");
        let workspace = dir.path().join("workspace");
        std::fs::create_dir_all(workspace.join("real")).expect("mkdir");
        std::fs::write(workspace.join("real/f"), "inside").expect("write");
        std::fs::write(dir.path().join("secret"), "outside").expect("write");
        // What a process in the sandbox leaves after the walk: a directory swapped for a
        // symlink leading out, and a symlink to a file outside.
        std::os::unix::fs::symlink(dir.path(), workspace.join("swapped")).expect("symlink");
        std::os::unix::fs::symlink(dir.path().join("secret"), workspace.join("link"))
            .expect("symlink");
        let root = File::open(&workspace).expect("open workspace");
        let (mut file, _) = open_beneath(&root, Path::new("real/f")).expect("inside is read");
        let mut text = String::new();
        std::io::Read::read_to_string(&mut file, &mut text).expect("read");
        assert_eq!(text, "inside");
        for rel in ["swapped/secret", "link", "../secret", "real/../../secret"] {
            assert!(
                open_beneath(&root, Path::new(rel)).is_err(),
                "{rel} must not be opened: it leads out of the workspace"
            );
        }
    }
}
