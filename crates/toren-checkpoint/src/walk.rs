//! Walking a workspace without following symlinks, and opening its files without following
//! one either.
//!
//! Each directory is opened beneath a handle on the workspace (`openat2` with
//! `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), listed through that descriptor (`getdents`)
//! and each name in it stat'ed relative to it (`fstatat`, no symlink followed): a
//! directory a process in the sandbox swapped for a symlink is not listed (its contents
//! are then missing from the walk, never read from outside). Nothing per entry is
//! allocated but its path.

use std::ffi::CStr;
use std::fs::{File, Metadata};
use std::os::fd::OwnedFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Condvar, Mutex};

use nix::errno::Errno;
use nix::fcntl::{AtFlags, OFlag, OpenHow, ResolveFlag, openat2};
use nix::sys::stat::{FileStat, SFlag, fstatat};

use crate::{Exclude, Result, io};

/// What a path is, as far as a checkpoint cares.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Dir,
    File,
    Symlink,
}

/// What `lstat` said of a path: what a checkpoint compares to tell whether it changed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Stat {
    pub(crate) kind: Kind,
    /// Permission bits (`mode & 0o7777`).
    pub(crate) mode: u32,
    pub(crate) size: u64,
    pub(crate) mtime_ns: i64,
    pub(crate) ctime_ns: i64,
    pub(crate) ino: u64,
}

impl Stat {
    /// `None` for what a checkpoint does not record (sockets, fifos, devices).
    fn of(st: &FileStat) -> Option<Self> {
        let kind = match SFlag::from_bits_truncate(st.st_mode & SFlag::S_IFMT.bits()) {
            SFlag::S_IFDIR => Kind::Dir,
            SFlag::S_IFREG => Kind::File,
            SFlag::S_IFLNK => Kind::Symlink,
            _ => return None,
        };
        Some(Self {
            kind,
            mode: st.st_mode & 0o7777,
            size: u64::try_from(st.st_size).unwrap_or(0),
            mtime_ns: st.st_mtime * 1_000_000_000 + st.st_mtime_nsec,
            ctime_ns: st.st_ctime * 1_000_000_000 + st.st_ctime_nsec,
            ino: st.st_ino,
        })
    }

    /// What an open file's `fstat` said (a file read for a checkpoint).
    pub(crate) fn of_meta(meta: &Metadata) -> Self {
        let kind = if meta.is_dir() {
            Kind::Dir
        } else if meta.file_type().is_symlink() {
            Kind::Symlink
        } else {
            Kind::File
        };
        Self {
            kind,
            mode: meta.mode() & 0o7777,
            size: meta.len(),
            mtime_ns: meta.mtime() * 1_000_000_000 + meta.mtime_nsec(),
            ctime_ns: meta.ctime() * 1_000_000_000 + meta.ctime_nsec(),
            ino: meta.ino(),
        }
    }
}

/// One thing found in the workspace, with what `lstat` said.
pub(crate) struct Found {
    pub(crate) path: String,
    pub(crate) stat: Stat,
}

/// What a walk found: every entry (parents before children) and the names it skipped.
pub(crate) struct Walked {
    pub(crate) found: Vec<Found>,
    /// Names that are not UTF-8 (not recorded) and special files (sockets, fifos, devices).
    pub(crate) skipped: Vec<String>,
}

/// Every entry below `root` that is not excluded, sorted by path, parents first.
///
/// Directories are listed by up to [`WALKERS`] threads at once (a stat per entry is most
/// of a checkpoint of an unchanged tree): each takes a directory from a shared queue,
/// stats what is in it and queues the directories it finds. The result is sorted, so
/// it does not depend on which thread saw what.
pub(crate) fn walk(root: &Path, exclude: &Exclude) -> Result<Walked> {
    let handle = crate::beneath::open_root(root)?;
    let walkers = std::thread::available_parallelism().map_or(1, |n| n.get().min(WALKERS));
    let queue = Queue {
        state: Mutex::new(QueueState {
            dirs: vec![String::new()],
            busy: 0,
            failed: None,
        }),
        ready: Condvar::new(),
    };
    let mut walked = Walked {
        found: Vec::new(),
        skipped: Vec::new(),
    };
    let mut lost = false;
    std::thread::scope(|scope| {
        let helpers: Vec<_> = (1..walkers)
            .map(|_| scope.spawn(|| queue.work(&handle, root, exclude)))
            .collect();
        let mut parts = vec![queue.work(&handle, root, exclude)];
        for helper in helpers {
            match helper.join() {
                Ok(part) => parts.push(part),
                // What it saw is lost: the walk fails rather than miss entries.
                Err(_) => lost = true,
            }
        }
        walked
            .found
            .reserve(parts.iter().map(|p| p.found.len()).sum());
        for part in parts {
            walked.found.extend(part.found);
            walked.skipped.extend(part.skipped);
        }
    });
    if lost {
        return Err(io("walk", root)(std::io::Error::other(
            "a walking thread panicked",
        )));
    }
    let failed = queue
        .state
        .into_inner()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .failed;
    if let Some(e) = failed {
        return Err(e);
    }
    walked.found.sort_unstable_by(|a, b| a.path.cmp(&b.path));
    walked.skipped.sort_unstable();
    Ok(walked)
}

/// Threads listing directories at once.
const WALKERS: usize = 4;

struct Queue {
    state: Mutex<QueueState>,
    ready: Condvar,
}

struct QueueState {
    /// Directories to list (relative paths, `""` the root).
    dirs: Vec<String>,
    /// Directories being listed now (each may queue more).
    busy: usize,
    /// The first error: every walker stops.
    failed: Option<crate::Error>,
}

impl Queue {
    fn lock(&self) -> std::sync::MutexGuard<'_, QueueState> {
        self.state
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }

    /// Lists directories until none is left to list (or one failed); what this thread saw.
    fn work(&self, handle: &File, root: &Path, exclude: &Exclude) -> Walked {
        let mut walked = Walked {
            found: Vec::new(),
            skipped: Vec::new(),
        };
        let mut subdirs = Vec::new();
        loop {
            let rel = {
                let mut state = self.lock();
                loop {
                    if state.failed.is_some() {
                        return walked;
                    }
                    if let Some(rel) = state.dirs.pop() {
                        state.busy += 1;
                        break rel;
                    }
                    if state.busy == 0 {
                        return walked;
                    }
                    state = self
                        .ready
                        .wait(state)
                        .unwrap_or_else(std::sync::PoisonError::into_inner);
                }
            };
            let listed = visit(handle, root, &rel, exclude, &mut walked, &mut subdirs);
            let mut state = self.lock();
            state.busy -= 1;
            match listed {
                Ok(()) => state.dirs.append(&mut subdirs),
                Err(e) => {
                    if state.failed.is_none() {
                        state.failed = Some(e);
                    }
                }
            }
            drop(state);
            self.ready.notify_all();
        }
    }
}

/// Lists the directory `rel`: what is in it goes to `walked`, its directories (to list
/// next) also to `subdirs`. A directory gone or swapped for something else since its
/// parent was listed is not listed.
fn visit(
    handle: &File,
    root: &Path,
    rel: &str,
    exclude: &Exclude,
    walked: &mut Walked,
    subdirs: &mut Vec<String>,
) -> Result<()> {
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_DIRECTORY | OFlag::O_NOFOLLOW | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    let dir: OwnedFd = match openat2(handle, if rel.is_empty() { "." } else { rel }, how) {
        Ok(fd) => fd,
        Err(Errno::ENOENT | Errno::ENOTDIR | Errno::ELOOP | Errno::EXDEV) if !rel.is_empty() => {
            return Ok(());
        }
        Err(e) => return Err(io("open directory", &root.join(rel))(e.into())),
    };
    let listing_fd = dir
        .try_clone()
        .map_err(io("open directory", &root.join(rel)))?;
    let mut listing = nix::dir::Dir::from_fd(listing_fd)
        .map_err(|e| io("read directory", &root.join(rel))(e.into()))?;
    for entry in listing.iter() {
        let entry = entry.map_err(|e| io("read directory", &root.join(rel))(e.into()))?;
        let cname: &CStr = entry.file_name();
        let bytes = cname.to_bytes();
        if bytes == b"." || bytes == b".." {
            continue;
        }
        let Ok(name) = std::str::from_utf8(bytes) else {
            walked
                .skipped
                .push(format!("{rel}/{}", String::from_utf8_lossy(bytes)));
            continue;
        };
        let mut path = String::with_capacity(rel.len() + 1 + name.len());
        if !rel.is_empty() {
            path.push_str(rel);
            path.push('/');
        }
        path.push_str(name);
        // lstat relative to the directory read: a symlink is itself, never what it
        // points at.
        let st = match fstatat(&dir, cname, AtFlags::AT_SYMLINK_NOFOLLOW) {
            Ok(st) => st,
            // Gone since the directory was read.
            Err(Errno::ENOENT) => continue,
            Err(e) => return Err(io("stat", &root.join(&path))(e.into())),
        };
        let Some(stat) = Stat::of(&st) else {
            if !exclude.excludes(&path, false) {
                walked.skipped.push(path);
            }
            continue;
        };
        let is_dir = stat.kind == Kind::Dir;
        if exclude.excludes(&path, is_dir) {
            continue;
        }
        if is_dir {
            subdirs.push(path.clone());
        }
        walked.found.push(Found { path, stat });
    }
    Ok(())
}

/// Opens the file `rel` beneath the directory `root` for reading. The kernel resolves every
/// component beneath `root` and refuses a symlink anywhere on the way (`openat2` with
/// `RESOLVE_BENEATH | RESOLVE_NO_SYMLINKS`), so a process in the sandbox that swaps a
/// directory for a symlink after the walk saw it cannot make Toren read a file outside the
/// workspace into a checkpoint. Only a regular file is read: it is opened `O_NONBLOCK` (no
/// effect on a regular file's reads) and refused unless its handle says it is one, so a
/// FIFO or a device swapped in after the walk can neither hang the open nor be read.
pub(crate) fn open_beneath(root: &File, rel: &Path) -> Result<(File, Metadata)> {
    let how = OpenHow::new()
        .flags(OFlag::O_RDONLY | OFlag::O_NOFOLLOW | OFlag::O_NONBLOCK | OFlag::O_CLOEXEC)
        .resolve(ResolveFlag::RESOLVE_BENEATH | ResolveFlag::RESOLVE_NO_SYMLINKS);
    let file =
        File::from(openat2(root, rel, how).map_err(|e| io("open", rel)(std::io::Error::from(e)))?);
    let meta = file.metadata().map_err(io("stat", rel))?;
    if !meta.is_file() {
        return Err(io("read", rel)(std::io::Error::new(
            std::io::ErrorKind::InvalidInput,
            "not a regular file any more (something in the sandbox replaced it while it was \
             being read)",
        )));
    }
    Ok((file, meta))
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

    /// A FIFO (or device) swapped in where the walk saw a file neither hangs the open (no
    /// writer ever comes) nor is read: it is refused at once.
    #[test]
    fn a_fifo_in_place_of_a_file_is_refused_without_waiting() {
        let dir = tempfile::tempdir().expect("temp dir");
        nix::unistd::mkfifo(&dir.path().join("fifo"), nix::sys::stat::Mode::S_IRWXU)
            .expect("mkfifo");
        let root = File::open(dir.path()).expect("open workspace");
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            let _ = tx.send(open_beneath(&root, Path::new("fifo")).map(|_| ()));
        });
        let opened = rx
            .recv_timeout(std::time::Duration::from_secs(10))
            .expect("opening a FIFO must not wait for a writer");
        let error = opened.expect_err("a FIFO is not read");
        assert!(error.to_string().contains("not a regular file"), "{error}");
    }
}
