//! Walking a workspace without following symlinks, and opening its files without following
//! one either.

use std::fs::{File, Metadata};
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::sync::{Condvar, Mutex};

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
///
/// Directories are listed by up to [`WALKERS`] threads at once (a stat per entry is most
/// of a checkpoint of an unchanged tree): each takes a directory from a shared queue,
/// stats what is in it and queues the directories it finds. The result is sorted, so
/// it does not depend on which thread saw what.
pub(crate) fn walk(root: &Path, exclude: &Exclude) -> Result<Walked> {
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
            .map(|_| scope.spawn(|| queue.work(root, exclude)))
            .collect();
        let mut parts = vec![queue.work(root, exclude)];
        for helper in helpers {
            match helper.join() {
                Ok(part) => parts.push(part),
                // What it saw is lost: the walk fails rather than miss entries.
                Err(_) => lost = true,
            }
        }
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
    fn work(&self, root: &Path, exclude: &Exclude) -> Walked {
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
            let listed = visit(root, &rel, exclude, &mut walked, &mut subdirs);
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
/// next) also to `subdirs`.
fn visit(
    root: &Path,
    rel: &str,
    exclude: &Exclude,
    walked: &mut Walked,
    subdirs: &mut Vec<String>,
) -> Result<()> {
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
        if ft.is_dir() {
            subdirs.push(path.clone());
        }
        walked.found.push(Found { path, meta });
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
