//! Host-side access to a run's workspace through a capability handle.
//!
//! A [`Workspace`] holds the workspace directory open as a `cap_std::fs::Dir`; every path
//! the tools pass is resolved beneath it by the kernel (`openat2` with `RESOLVE_BENEATH`),
//! so `..`, absolute paths and symlinks that lead outside — including ones the agent made
//! with bash — are refused, with no string checks to race against. Only regular files are
//! read or written: what is at a path is checked before it is opened (following symlinks
//! inside the workspace), and again on the open descriptor, so a named pipe, a socket or a
//! device the agent made is refused by name and never opened. The sandbox backends bind the
//! same directory into their sandboxes; the tools crate reads and writes files through
//! this type. Where workspaces live and how they are kept private is `layout`; path checks
//! and their messages are `path`; errors are sorted in `classify`. Nothing here ever
//! deletes a workspace (I-1).

mod classify;
mod layout;
mod path;

use std::io::{self, Read, Write};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cap_std::fs::{Dir, Metadata, OpenOptions, OpenOptionsExt};
use nix::fcntl::OFlag;

use self::classify::{NOT_A_DIR, classify, require_file};
use self::layout::{Missing, locate, open_exact};
use self::path::{check_name, check_path};
use crate::error::{Error, Result};

pub use self::layout::{WORKSPACE_DIR, workspace_path};

/// The checks every path a file tool gets passes before it is resolved (empty, NUL, `..`
/// climbing out, absolute paths — with a hint for `/workspace/...`), with the messages
/// the tools give on every backend. They only give clearer messages first: the boundary
/// is the resolution beneath the workspace, where the files are.
pub fn check_tool_path(path: &str) -> Result<()> {
    check_path(path).map(drop)
}

/// Where backends mount the workspace inside their sandboxes; bash starts there.
pub const SANDBOX_WORKDIR: &str = "/workspace";

/// A run's workspace directory, opened as a capability. Cheap to clone.
#[derive(Clone, Debug)]
pub struct Workspace {
    path: PathBuf,
    dir: Arc<Dir>,
}

/// What [`Workspace::metadata`] reports about a path.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EntryInfo {
    pub kind: EntryKind,
    /// Size in bytes (for files).
    pub len: u64,
}

/// The kind of a workspace entry, after following in-workspace symlinks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum EntryKind {
    File,
    Directory,
    /// A FIFO, socket or device.
    Other,
}

impl Workspace {
    /// Creates the workspace `name` under the sandbox root `root` unless it exists, then
    /// opens it: `root` (mode 0700) if missing, the private directory `root/name` (0700)
    /// and in it the workspace directory, at [`workspace_path`]. The directories are created
    /// by, and so owned by, the user running Toren; see `layout` for why.
    pub fn create(root: &Path, name: &str) -> Result<Self> {
        check_name(name)?;
        let (path, dir) = locate(root, name, Missing::Create)?;
        Ok(Self::new(path, dir))
    }

    /// Opens the existing workspace `name` under the sandbox root `root`.
    pub fn open(root: &Path, name: &str) -> Result<Self> {
        check_name(name)?;
        let (path, dir) = locate(root, name, Missing::Fail)?;
        Ok(Self::new(path, dir))
    }

    /// Opens the existing workspace at exactly `path` on the host (a path recorded when it
    /// was made, of this layout or an earlier one); a missing one is an error naming it.
    pub fn open_path(path: &Path) -> Result<Self> {
        let dir = open_exact(path)?;
        Ok(Self::new(path.to_owned(), dir))
    }

    fn new(path: PathBuf, dir: Dir) -> Self {
        Self {
            path,
            dir: Arc::new(dir),
        }
    }

    /// The workspace directory on the host.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// The owner uid of the workspace directory itself.
    pub fn owner_uid(&self) -> Result<u32> {
        use cap_std::fs::MetadataExt;
        let meta = self.dir.dir_metadata().map_err(|e| {
            Error::io(
                format!("cannot inspect the workspace `{}`", self.path.display()),
                e,
            )
        })?;
        Ok(meta.uid())
    }

    /// Reads the regular file at `path`, refusing files larger than `limit` bytes.
    pub fn read(&self, path: &str, limit: u64) -> Result<Vec<u8>> {
        let rel = check_path(path)?;
        self.check_regular("read", rel, path)?;
        let mut options = OpenOptions::new();
        // O_NONBLOCK: should a FIFO be swapped in after the check, opening it must not hang
        // the runtime (and the descriptor's own check below refuses it).
        options.read(true).custom_flags(nonblocking_flags());
        let file = self
            .dir
            .open_with(rel, &options)
            .map_err(|e| classify("read", path, e))?;
        let meta = file.metadata().map_err(|e| classify("read", path, e))?;
        require_file(path, &meta, false)?;
        if meta.len() > limit {
            return Err(Error::TooLarge {
                path: path.to_owned(),
                size: meta.len(),
                limit,
            });
        }
        let mut bytes = Vec::new();
        file.take(limit.saturating_add(1))
            .read_to_end(&mut bytes)
            .map_err(|e| classify("read", path, e))?;
        let read = u64::try_from(bytes.len()).unwrap_or(u64::MAX);
        if read > limit {
            // The file grew while being read.
            return Err(Error::TooLarge {
                path: path.to_owned(),
                size: read,
                limit,
            });
        }
        Ok(bytes)
    }

    /// Writes `contents` to `path`, replacing the file if it exists and creating missing
    /// parent directories, all beneath the workspace.
    pub fn write(&self, path: &str, contents: &[u8]) -> Result<()> {
        let rel = check_path(path)?;
        if let Some(parent) = rel.parent().filter(|p| !p.as_os_str().is_empty()) {
            self.dir.create_dir_all(parent).map_err(|e| {
                if e.kind() != io::ErrorKind::AlreadyExists {
                    return classify("create the parent directories of", path, e);
                }
                // Something that is not a directory is in the way: a file, or a symlink
                // that cannot be followed. Resolving the parent says which.
                match self.dir.metadata(parent) {
                    Err(e) => classify("create the parent directories of", path, e),
                    Ok(_) => Error::InvalidPath {
                        path: path.to_owned(),
                        why: NOT_A_DIR.to_owned(),
                    },
                }
            })?;
        }
        // Only a regular file is replaced (or none made): opening a named pipe or socket for
        // writing would fail (ENXIO) or block, and a device must not be opened at all.
        match self.check_regular("write", rel, path) {
            Ok(()) | Err(Error::NotFound { .. }) => {}
            Err(err) => return Err(err),
        }
        // Opened without truncating: this resolves the path beneath the workspace (escapes
        // are refused here) and checks what is there, before anything changes.
        let mut options = OpenOptions::new();
        options
            .write(true)
            .create(true)
            .truncate(false)
            .custom_flags(nonblocking_flags());
        let mut file = self
            .dir
            .open_with(rel, &options)
            .map_err(|e| classify("write", path, e))?;
        let meta = file.metadata().map_err(|e| classify("write", path, e))?;
        require_file(path, &meta, false)?;
        let is_link = self
            .dir
            .symlink_metadata(rel)
            .is_ok_and(|m| m.file_type().is_symlink());
        if is_link {
            // An in-tree symlink: write through it, as before (a rename would replace the
            // link itself).
            file.set_len(0).map_err(|e| classify("write", path, e))?;
            file.write_all(contents)
                .map_err(|e| classify("write", path, e))?;
            return file.flush().map_err(|e| classify("write", path, e));
        }
        drop(file);
        self.replace(rel, path, contents, &meta)
    }

    /// Replaces the file at `rel` atomically: the new contents go to a temporary file beside
    /// it, which is renamed over it, so a process killed mid-write leaves the old file or the
    /// new one, never a truncated one. The file keeps its permissions.
    fn replace(&self, rel: &Path, path: &str, contents: &[u8], old: &Metadata) -> Result<()> {
        let name = rel
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.subsec_nanos())
            .unwrap_or_default();
        let tmp = rel.with_file_name(format!(".{name}.toren-{}-{nanos}.tmp", std::process::id()));
        let mut options = OpenOptions::new();
        options.write(true).create_new(true);
        let written = self
            .dir
            .open_with(&tmp, &options)
            .and_then(|mut file| {
                file.set_permissions(old.permissions())?;
                file.write_all(contents)?;
                file.sync_data()
            })
            .and_then(|()| self.dir.rename(&tmp, &self.dir, rel));
        written.map_err(|e| {
            let _ = self.dir.remove_file(&tmp);
            classify("write", path, e)
        })
    }

    /// Refuses `rel` unless it is a regular file (symlinks inside the workspace are
    /// followed), without opening it.
    fn check_regular(&self, op: &'static str, rel: &Path, path: &str) -> Result<()> {
        let meta = self.dir.metadata(rel).map_err(|e| classify(op, path, e))?;
        let via_link = || {
            self.dir
                .symlink_metadata(rel)
                .is_ok_and(|m| m.file_type().is_symlink())
        };
        require_file(path, &meta, !meta.is_file() && via_link())
    }

    /// What is at `path` (symlinks inside the workspace are followed).
    pub fn metadata(&self, path: &str) -> Result<EntryInfo> {
        let rel = check_path(path)?;
        let meta = self
            .dir
            .metadata(rel)
            .map_err(|e| classify("inspect", path, e))?;
        let kind = if meta.is_file() {
            EntryKind::File
        } else if meta.is_dir() {
            EntryKind::Directory
        } else {
            EntryKind::Other
        };
        Ok(EntryInfo {
            kind,
            len: meta.len(),
        })
    }
    /// The entries of the directory at `path` (`""` or `"."`: the workspace root), sorted
    /// by name, each with what it is after following in-workspace symlinks; an entry whose
    /// symlink leads out of the workspace (or nowhere) is [`EntryKind::Other`] of size 0.
    pub fn list(&self, path: &str) -> Result<Vec<(String, EntryInfo)>> {
        let sub;
        let dir: &Dir = if path.is_empty() || path == "." {
            &self.dir
        } else {
            let rel = check_path(path)?;
            sub = self
                .dir
                .open_dir(rel)
                .map_err(|e| classify("list", path, e))?;
            &sub
        };
        let entries = dir.entries().map_err(|e| classify("list", path, e))?;
        let mut listed = Vec::new();
        for entry in entries {
            let entry = entry.map_err(|e| classify("list", path, e))?;
            let name = entry.file_name().to_string_lossy().into_owned();
            let info = match dir.metadata(&name) {
                Ok(meta) if meta.is_file() => EntryInfo {
                    kind: EntryKind::File,
                    len: meta.len(),
                },
                Ok(meta) if meta.is_dir() => EntryInfo {
                    kind: EntryKind::Directory,
                    len: 0,
                },
                _ => EntryInfo {
                    kind: EntryKind::Other,
                    len: 0,
                },
            };
            listed.push((name, info));
        }
        listed.sort_by(|a, b| a.0.cmp(&b.0));
        Ok(listed)
    }
}

fn nonblocking_flags() -> i32 {
    (OFlag::O_NONBLOCK | OFlag::O_NOCTTY).bits()
}
