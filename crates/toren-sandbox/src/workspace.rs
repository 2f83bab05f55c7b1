//! Host-side access to a run's workspace through a capability handle.
//!
//! A [`Workspace`] holds the workspace directory open as a `cap_std::fs::Dir`; every path
//! the tools pass is resolved beneath it by the kernel (`openat2` with `RESOLVE_BENEATH`),
//! so `..`, absolute paths and symlinks that lead outside — including ones the agent made
//! with bash — are refused, with no string checks to race against. The sandbox backends
//! (`local`) bind the same directory into their sandboxes; the tools crate reads and
//! writes files through this type. Nothing here ever deletes a workspace (I-1).

use std::fs::DirBuilder;
use std::io::{self, Read, Write};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Component, Path, PathBuf};
use std::sync::Arc;

use cap_std::fs::{Dir, FileType, Metadata, OpenOptions, OpenOptionsExt};
use nix::errno::Errno;
use nix::fcntl::OFlag;

use crate::error::{Error, Result};

const NOT_A_DIR: &str = "a component of the path is a file, not a directory";

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
    /// Creates `root/name` (and `root`, mode 0700, if missing) unless it exists, then opens
    /// it. The directory is created by, and so owned by, the user running Toren.
    pub fn create(root: &Path, name: &str) -> Result<Self> {
        check_name(name)?;
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root)
            .map_err(|e| {
                Error::io(
                    format!("cannot create the sandbox root `{}`", root.display()),
                    e,
                )
            })?;
        let path = root.join(name);
        match DirBuilder::new().mode(0o700).create(&path) {
            Ok(()) => {}
            Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
            Err(e) => {
                return Err(Error::io(
                    format!("cannot create the workspace `{}`", path.display()),
                    e,
                ));
            }
        }
        Self::open_at(path)
    }

    /// Opens the existing workspace `root/name`.
    pub fn open(root: &Path, name: &str) -> Result<Self> {
        check_name(name)?;
        Self::open_at(root.join(name))
    }

    fn open_at(path: PathBuf) -> Result<Self> {
        // The one use of ambient authority in Toren's file access: turning the host path of
        // the workspace, which the runtime chose, into the capability every later access
        // goes through.
        let dir = Dir::open_ambient_dir(&path, cap_std::ambient_authority())
            .map_err(|e| Error::io(format!("cannot open the workspace `{}`", path.display()), e))?;
        Ok(Self {
            path,
            dir: Arc::new(dir),
        })
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
        let mut options = OpenOptions::new();
        // O_NONBLOCK: opening a FIFO the agent made must not hang the runtime.
        options.read(true).custom_flags(nonblocking_flags());
        let file = self
            .dir
            .open_with(rel, &options)
            .map_err(|e| classify("read", path, e))?;
        let meta = file.metadata().map_err(|e| classify("read", path, e))?;
        require_file(path, &meta)?;
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
        require_file(path, &meta)?;
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
}

fn nonblocking_flags() -> i32 {
    (OFlag::O_NONBLOCK | OFlag::O_NOCTTY).bits()
}

fn require_file(path: &str, meta: &Metadata) -> Result<()> {
    if meta.is_file() {
        Ok(())
    } else if meta.is_dir() {
        Err(Error::IsDirectory {
            path: path.to_owned(),
        })
    } else {
        Err(Error::NotAFile {
            path: path.to_owned(),
            kind: describe(meta.file_type()),
        })
    }
}

fn describe(kind: FileType) -> &'static str {
    use cap_std::fs::FileTypeExt;
    if kind.is_fifo() {
        "named pipe"
    } else if kind.is_socket() {
        "socket"
    } else if kind.is_block_device() || kind.is_char_device() {
        "device"
    } else {
        "special file"
    }
}

/// A workspace name is a single plain path component (a run or session id).
fn check_name(name: &str) -> Result<()> {
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
fn check_path(path: &str) -> Result<&Path> {
    let invalid = |why: &str| Error::InvalidPath {
        path: path.to_owned(),
        why: why.to_owned(),
    };
    if path.is_empty() {
        return Err(invalid(
            "the path is empty; give a path relative to the workspace root, e.g. `notes.txt`",
        ));
    }
    if path.contains('\0') {
        return Err(invalid("the path contains a NUL byte"));
    }
    if let Some(inside) = path
        .strip_prefix(SANDBOX_WORKDIR)
        .and_then(|p| p.strip_prefix('/'))
        && !inside.is_empty()
    {
        return Err(invalid(&format!(
            "paths are relative to the workspace root, which bash sees as `{SANDBOX_WORKDIR}`; \
             write `{inside}` instead"
        )));
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
    if path.starts_with('/') || climbs_out {
        return Err(Error::PathEscape {
            path: path.to_owned(),
        });
    }
    Ok(Path::new(path))
}

/// Turns an error from a cap-std call on `path` into the error the caller should see.
fn classify(op: &'static str, path: &str, err: io::Error) -> Error {
    let path = path.to_owned();
    // cap-std reports a resolution that would leave the directory (EXDEV from openat2, or
    // its own resolver's verdict) as a synthesized PermissionDenied without an errno; a real
    // EACCES always carries one.
    if err.kind() == io::ErrorKind::PermissionDenied && err.raw_os_error().is_none() {
        return Error::PathEscape { path };
    }
    let why = match err.raw_os_error().map(Errno::from_raw) {
        Some(Errno::ELOOP) => Some("too many levels of symbolic links"),
        Some(Errno::ENOTDIR) => Some(NOT_A_DIR),
        Some(Errno::ENAMETOOLONG) => Some("the path is too long"),
        _ => None,
    };
    if let Some(why) = why {
        return Error::InvalidPath {
            path,
            why: why.to_owned(),
        };
    }
    match err.kind() {
        io::ErrorKind::NotFound => Error::NotFound { path },
        io::ErrorKind::IsADirectory => Error::IsDirectory { path },
        io::ErrorKind::StorageFull | io::ErrorKind::QuotaExceeded => Error::WorkspaceFull { path },
        _ => Error::Fs {
            op,
            path,
            source: err,
        },
    }
}
