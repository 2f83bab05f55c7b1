//! Changing the workspace beneath a handle on it: every directory on the way to a path is
//! opened relative to the one before with `openat2(RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS)`
//! and the change itself (`unlinkat`, `mkdirat`, `symlinkat`, `openat(O_CREAT | O_EXCL |
//! O_NOFOLLOW)`, `fchmod`) is made relative to the parent's descriptor. So a process still
//! running in the sandbox that swaps a directory for a symlink cannot make a restore (run
//! by Toren, often as root) remove, write or chmod anything outside the workspace: the
//! kernel refuses the symlink on the way and the restore fails instead.

use std::ffi::OsStr;
use std::fs::File;
use std::os::fd::OwnedFd;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

use nix::errno::Errno;
use nix::fcntl::{OFlag, OpenHow, ResolveFlag, openat, openat2};
use nix::sys::stat::{Mode, fchmod, mkdirat};
use nix::unistd::{UnlinkatFlags, symlinkat, unlinkat};

use crate::{Result, io};

fn err(action: &'static str, path: &str) -> impl FnOnce(Errno) -> crate::Error {
    let path = path.to_owned();
    move |e| io(action, Path::new(&path))(std::io::Error::from(e))
}

/// The workspace's directory, the handle everything else is resolved beneath.
pub(crate) fn open_root(workspace: &Path) -> Result<File> {
    let how = OpenHow::new().flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_CLOEXEC);
    let fd = openat2(nix::fcntl::AT_FDCWD, workspace, how)
        .map_err(|e| io("open", workspace)(std::io::Error::from(e)))?;
    Ok(File::from(fd))
}

/// The directory `rel` (`""`: the root itself) beneath `root`, no symlink on the way.
pub(crate) fn open_dir(root: &File, rel: &str) -> Result<File> {
    if rel.is_empty() {
        return root.try_clone().map_err(io("open", Path::new(".")));
    }
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    let fd: OwnedFd = openat2(root, rel, how).map_err(err("open directory", rel))?;
    Ok(File::from(fd))
}

/// `path`'s parent directory (opened beneath `root`) and its last name.
pub(crate) fn parent<'p>(root: &File, path: &'p str) -> Result<(File, &'p str)> {
    let (dir, name) = path.rsplit_once('/').unwrap_or(("", path));
    Ok((open_dir(root, dir)?, name))
}

/// Removes `path` whatever it is (a directory with everything in it), never through a
/// symlink; gone already is fine.
pub(crate) fn remove(root: &File, path: &str) -> Result<()> {
    let (dir, name) = parent(root, path)?;
    remove_at(&dir, name, path)
}

fn remove_at(dir: &File, name: &str, shown: &str) -> Result<()> {
    match unlinkat(dir, name, UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => return Ok(()),
        Err(Errno::EISDIR | Errno::EPERM) => {}
        Err(e) => return Err(err("remove", shown)(e)),
    }
    // A directory: empty it beneath its own descriptor, then remove it.
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    let child = File::from(openat2(dir, name, how).map_err(err("open directory", shown))?);
    let names: Vec<Vec<u8>> = {
        let listing = child.try_clone().map_err(io("open", Path::new(shown)))?;
        let mut listing =
            nix::dir::Dir::from_fd(OwnedFd::from(listing)).map_err(err("read directory", shown))?;
        listing
            .iter()
            .filter_map(std::result::Result::ok)
            .map(|e| e.file_name().to_bytes().to_vec())
            .filter(|n| n != b"." && n != b"..")
            .collect()
    };
    for n in names {
        let n = OsStr::from_bytes(&n);
        let sub = format!("{shown}/{}", n.to_string_lossy());
        match n.to_str() {
            Some(text) => remove_at(&child, text, &sub)?,
            // Not UTF-8 (never recorded): removed by its bytes all the same.
            None => remove_raw(&child, n, &sub)?,
        }
    }
    match unlinkat(dir, name, UnlinkatFlags::RemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(e) => Err(err("remove", shown)(e)),
    }
}

fn remove_raw(dir: &File, name: &OsStr, shown: &str) -> Result<()> {
    match unlinkat(dir, name, UnlinkatFlags::NoRemoveDir) {
        Ok(()) | Err(Errno::ENOENT) => Ok(()),
        Err(Errno::EISDIR | Errno::EPERM) => {
            // A directory whose name is not UTF-8: its children are named by bytes too.
            let how = OpenHow::new()
                .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
                .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
            let child = File::from(openat2(dir, name, how).map_err(err("open directory", shown))?);
            let listing = child.try_clone().map_err(io("open", Path::new(shown)))?;
            let mut listing = nix::dir::Dir::from_fd(OwnedFd::from(listing))
                .map_err(err("read directory", shown))?;
            let names: Vec<Vec<u8>> = listing
                .iter()
                .filter_map(std::result::Result::ok)
                .map(|e| e.file_name().to_bytes().to_vec())
                .filter(|n| n != b"." && n != b"..")
                .collect();
            for n in names {
                remove_raw(&child, OsStr::from_bytes(&n), shown)?;
            }
            unlinkat(dir, name, UnlinkatFlags::RemoveDir).map_err(err("remove", shown))
        }
        Err(e) => Err(err("remove", shown)(e)),
    }
}

/// Makes the directory `path` (mode 0700 while its children are written) unless one is
/// there.
pub(crate) fn make_dir(root: &File, path: &str) -> Result<()> {
    let (dir, name) = parent(root, path)?;
    match mkdirat(&dir, name, Mode::from_bits_truncate(0o700)) {
        Ok(()) | Err(Errno::EEXIST) => Ok(()),
        Err(e) => Err(err("create directory", path)(e)),
    }
}

/// Makes the symlink `path` → `target` (the target is never resolved).
pub(crate) fn make_symlink(root: &File, path: &str, target: &str) -> Result<()> {
    let (dir, name) = parent(root, path)?;
    symlinkat(target, &dir, name).map_err(err("symlink", path))
}

/// A new regular file at `path` for writing: whatever was there is removed first (so a
/// hard link's other names are never written through), and a symlink put in between is
/// refused (`O_EXCL | O_NOFOLLOW`).
pub(crate) fn create_file(root: &File, path: &str) -> Result<File> {
    let (dir, name) = parent(root, path)?;
    remove_at(&dir, name, path)?;
    let fd = openat(
        &dir,
        name,
        OFlag::O_WRONLY | OFlag::O_CREAT | OFlag::O_EXCL | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC,
        Mode::from_bits_truncate(0o600),
    )
    .map_err(err("create", path))?;
    Ok(File::from(fd))
}

/// Sets the permission bits of the directory `path` through its own descriptor.
pub(crate) fn chmod_dir(root: &File, path: &str, mode: u32) -> Result<()> {
    let dir = open_dir(root, path)?;
    fchmod(&dir, Mode::from_bits_truncate(mode)).map_err(err("chmod", path))
}

/// Sets the permission bits of the regular file `path`, opened beneath `root` without
/// following a symlink (`O_PATH` is not enough for `fchmod`, so it is opened for reading).
pub(crate) fn chmod_file(root: &File, path: &str, mode: u32) -> Result<()> {
    let (file, _) = crate::walk::open_beneath(root, Path::new(path))?;
    fchmod(&file, Mode::from_bits_truncate(mode)).map_err(err("chmod", path))
}

#[cfg(test)]
mod tests {
    use super::*;

    /// What a restore meets if a process in the sandbox swaps a directory for a symlink
    /// after the walk saw it: every change through it is refused, nothing outside moves.
    #[test]
    fn no_change_goes_through_a_symlink() {
        let dir = tempfile::tempdir().expect("temp dir");
        let ws = dir.path().join("workspace");
        let outside = dir.path().join("outside");
        std::fs::create_dir_all(&ws).expect("mkdir");
        std::fs::create_dir_all(outside.join("sub")).expect("mkdir");
        std::fs::write(outside.join("f"), "victim").expect("write");
        std::os::unix::fs::symlink(&outside, ws.join("d")).expect("symlink");
        let root = open_root(&ws).expect("root");
        assert!(create_file(&root, "d/f").is_err(), "write through d");
        assert!(create_file(&root, "d/new").is_err(), "create through d");
        assert!(remove(&root, "d/f").is_err(), "remove through d");
        assert!(
            remove(&root, "d/sub").is_err(),
            "remove a directory through d"
        );
        assert!(make_dir(&root, "d/x").is_err(), "mkdir through d");
        assert!(
            make_symlink(&root, "d/l", "/").is_err(),
            "symlink through d"
        );
        assert!(chmod_dir(&root, "d", 0o777).is_err(), "chmod d's target");
        assert!(chmod_file(&root, "d/f", 0o777).is_err(), "chmod through d");
        assert!(create_file(&root, "../escape").is_err(), "`..`");
        assert_eq!(
            std::fs::read_to_string(outside.join("f")).expect("read"),
            "victim"
        );
        assert!(outside.join("sub").is_dir());
        assert!(!outside.join("new").exists() && !outside.join("x").exists());
        // The symlink itself is removed as itself, its target untouched.
        remove(&root, "d").expect("remove the link");
        assert!(std::fs::symlink_metadata(ws.join("d")).is_err());
        assert_eq!(
            std::fs::read_to_string(outside.join("f")).expect("read"),
            "victim"
        );
    }
}
