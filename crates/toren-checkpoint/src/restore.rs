//! Restoring a checkpoint: the workspace made what it was, beneath a handle on it.

use std::collections::HashSet;
use std::fs::{self, File, FileTimes};
use std::os::unix::fs::PermissionsExt;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering as AtomicOrdering};
use std::time::{Duration, UNIX_EPOCH};

use crate::manifest::{Rec, RecKind};
use crate::walk::{self, Found, Kind, Stat};
use crate::{Error, Exclude, Result, Store, beneath, io};

impl Store {
    /// Makes the workspace what it was at checkpoint `id`: paths added since are removed,
    /// changed ones written back with their modes (and mtimes), symlinks re-made. Excluded
    /// paths are left alone. Safe to run again after an interruption (it converges on the
    /// same workspace). Every change is made beneath a handle on the workspace, never by
    /// host path (`beneath`), so a symlink a process in the sandbox put in place cannot
    /// lead the restore outside.
    pub fn restore(&self, id: &str, workspace: &Path, exclude: &Exclude) -> Result<()> {
        self.restore_unless(id, workspace, exclude, &AtomicBool::new(false))
    }

    /// Whether checkpoint `id` can be restored: its manifest reads, its paths stay inside
    /// the workspace and every file's content is in the store. Checked before a rewind
    /// records anything, so that a damaged store refuses it instead of leaving a restore
    /// that cannot finish. Reads no file's content: one stat per distinct blob.
    pub fn check_restorable(&self, id: &str) -> Result<()> {
        self.check(id, &self.snap(id)?.entries)
    }

    fn check(&self, id: &str, entries: &[Rec]) -> Result<()> {
        let mut seen = HashSet::new();
        for rec in entries {
            if !safe_path(&rec.path) {
                return Err(Error::BadPath {
                    path: rec.path.clone(),
                    id: id.to_owned(),
                });
            }
            if let RecKind::File { hash, .. } = &rec.kind
                && seen.insert(*hash)
            {
                let hash = hex::encode(hash);
                let blob = self.blob_path(&hash);
                match fs::symlink_metadata(&blob) {
                    Ok(meta) if meta.is_file() => {}
                    Ok(_) => {
                        return Err(Error::MissingBlob {
                            hash,
                            id: id.to_owned(),
                        });
                    }
                    Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                        return Err(Error::MissingBlob {
                            hash,
                            id: id.to_owned(),
                        });
                    }
                    Err(e) => return Err(io("stat", &blob)(e)),
                }
            }
        }
        Ok(())
    }

    /// [`Store::restore`], given up with [`Error::Stopped`] once `stop` is set (checked
    /// before each change): for a caller that must stop changing the workspace at once,
    /// e.g. one whose lease on the run is about to expire. What was done stays done; a
    /// later restore finishes it.
    pub fn restore_unless(
        &self,
        id: &str,
        workspace: &Path,
        exclude: &Exclude,
        stop: &AtomicBool,
    ) -> Result<()> {
        let stopped = || {
            if stop.load(AtomicOrdering::Relaxed) {
                Err(Error::Stopped { id: id.to_owned() })
            } else {
                Ok(())
            }
        };
        let snap = self.snap(id)?;
        let wanted: &[Rec] = &snap.entries;
        // All of it checked before the first change: a damaged store fails the restore
        // with the workspace untouched, not halfway.
        self.check(id, wanted)?;
        let root = beneath::open_root(workspace)?;
        let current = walk::walk(workspace, exclude)?;
        // What is there now of each wanted path, when it is kept (both lists are sorted).
        let mut there: Vec<Option<Stat>> = vec![None; wanted.len()];
        let mut removed_dirs: HashSet<&str> = HashSet::new();
        let mut at = 0;
        // Remove what should not be there, or is there as another kind of thing.
        for Found { path, stat } in &current.found {
            while wanted
                .get(at)
                .is_some_and(|w| w.path.as_str() < path.as_str())
            {
                at += 1;
            }
            let want = wanted.get(at).filter(|w| w.path == *path);
            // Inside a directory removed already.
            if !removed_dirs.is_empty()
                && path
                    .match_indices('/')
                    .any(|(i, _)| removed_dirs.contains(&path[..i]))
            {
                continue;
            }
            let keep = match want.map(|w| &w.kind) {
                Some(RecKind::Dir) => stat.kind == Kind::Dir,
                Some(RecKind::Symlink { target, .. }) => {
                    stat.kind == Kind::Symlink
                        && link_target(&root, path).as_deref() == Some(target.as_str())
                }
                Some(RecKind::File { .. }) => stat.kind == Kind::File,
                None => false,
            };
            if keep {
                there[at] = Some(*stat);
                continue;
            }
            stopped()?;
            beneath::remove(&root, path)?;
            if stat.kind == Kind::Dir {
                removed_dirs.insert(path);
            }
        }
        // Make what should be there, parents first (the entries are sorted). A directory
        // is writable while its children are written, its own mode set at the end.
        let mut modes_due = Vec::new();
        // The files written back, as they are now: hints for the next checkpoint.
        let mut written = Vec::new();
        for (rec, now) in wanted.iter().zip(&there) {
            stopped()?;
            match &rec.kind {
                RecKind::Dir => match now {
                    Some(s) if s.mode == rec.mode && rec.mode & 0o700 == 0o700 => {}
                    _ => {
                        beneath::make_dir(&root, &rec.path)?;
                        beneath::chmod_dir(&root, &rec.path, 0o700)?;
                        modes_due.push(rec);
                    }
                },
                RecKind::Symlink { target, .. } => {
                    if now.is_none() {
                        beneath::make_symlink(&root, &rec.path, target)?;
                    }
                }
                RecKind::File {
                    size,
                    hash,
                    mtime_ns,
                    ctime_ns,
                    ino,
                } => {
                    let unchanged = now.filter(|s| {
                        (s.size, s.mtime_ns, s.ctime_ns, s.ino)
                            == (*size, *mtime_ns, *ctime_ns, *ino)
                    });
                    match unchanged {
                        Some(s) if s.mode == rec.mode => {}
                        Some(_) => beneath::chmod_file(&root, &rec.path, rec.mode)?,
                        None => {
                            let stat =
                                self.write_back(id, hash, &root, &rec.path, rec.mode, *mtime_ns)?;
                            written.push(Rec {
                                path: rec.path.clone(),
                                mode: rec.mode,
                                kind: RecKind::File {
                                    size: *size,
                                    hash: *hash,
                                    mtime_ns: stat.mtime_ns,
                                    ctime_ns: stat.ctime_ns,
                                    ino: stat.ino,
                                },
                            });
                        }
                    }
                }
            }
        }
        for rec in modes_due.iter().rev() {
            beneath::chmod_dir(&root, &rec.path, rec.mode)?;
        }
        self.write_hints(id, written)
    }

    fn write_back(
        &self,
        id: &str,
        hash: &[u8; 32],
        root: &File,
        path: &str,
        mode: u32,
        mtime_ns: i64,
    ) -> Result<Stat> {
        let hash = hex::encode(hash);
        let blob = self.blob_path(&hash);
        let mut source = match File::open(&blob) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
                return Err(Error::MissingBlob {
                    hash,
                    id: id.to_owned(),
                });
            }
            Err(e) => return Err(io("open", &blob)(e)),
        };
        let full = Path::new(path);
        let mut out = beneath::create_file(root, path)?;
        std::io::copy(&mut source, &mut out).map_err(io("write", full))?;
        let secs = mtime_ns.div_euclid(1_000_000_000);
        let nanos = mtime_ns.rem_euclid(1_000_000_000);
        if let (Ok(secs), Ok(nanos)) = (u64::try_from(secs), u32::try_from(nanos)) {
            let when = UNIX_EPOCH + Duration::new(secs, nanos);
            out.set_times(FileTimes::new().set_modified(when))
                .map_err(io("set times", full))?;
        }
        out.set_permissions(fs::Permissions::from_mode(mode))
            .map_err(io("chmod", full))?;
        // What the file says now, after its last change by the restore (a short write
        // would show in the size, which the next checkpoint compares too).
        let meta = out.metadata().map_err(io("stat", full))?;
        Ok(Stat::of_meta(&meta))
    }
}

/// A relative path of plain names: no `..`, no root, no empty name.
fn safe_path(path: &str) -> bool {
    !path.is_empty()
        && path
            .split('/')
            .all(|n| !n.is_empty() && n != "." && n != "..")
}

/// The target of the symlink at `path`, read beneath `root`; `None` if it is not one.
pub(crate) fn link_target(root: &File, path: &str) -> Option<String> {
    let (dir, name) = beneath::parent(root, path).ok()?;
    nix::fcntl::readlinkat(&dir, name)
        .ok()
        .map(|t| t.to_string_lossy().into_owned())
}
