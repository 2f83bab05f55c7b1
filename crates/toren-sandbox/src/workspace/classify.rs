//! Turning what the kernel said about a path into the error the model should see: which
//! kind of entry it met (a named pipe, a socket, a device — each refused by name before
//! anything opens it), and which `errno` the agent's own doing explains. The errors the
//! agent can cause are exactly those that follow from what it can make in its workspace:
//! files, directories, symlinks (looping, dangling, leading out), named pipes and sockets
//! (`mkfifo`, `bind`), modes (`chmod 000`), deep or long names, running programs, a full
//! disk. Host faults (I/O errors, no memory, no descriptors) stay host faults.

use std::io;

use cap_std::fs::{FileType, FileTypeExt, Metadata};
use nix::errno::Errno;

use crate::error::Error;

pub(super) const NOT_A_DIR: &str = "a component of the path is a file, not a directory";

/// Refuses anything at `path` but a regular file. `via_link`: `path` itself is a symlink
/// (to what `meta` describes).
pub(super) fn require_file(path: &str, meta: &Metadata, via_link: bool) -> Result<(), Error> {
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
            via_link,
        })
    }
}

/// What a non-regular, non-directory entry is, for a message.
fn describe(kind: FileType) -> &'static str {
    if kind.is_fifo() {
        "named pipe (FIFO)"
    } else if kind.is_socket() {
        "unix socket"
    } else if kind.is_char_device() {
        "character device"
    } else if kind.is_block_device() {
        "block device"
    } else {
        "special file"
    }
}

/// Turns an error from a cap-std call on `path` into the error the caller should see.
pub(super) fn classify(op: &'static str, path: &str, err: io::Error) -> Error {
    let path = path.to_owned();
    // cap-std reports a resolution that would leave the directory (EXDEV from openat2, or
    // its own resolver's verdict) as a synthesized PermissionDenied without an errno; a real
    // EACCES always carries one.
    if err.kind() == io::ErrorKind::PermissionDenied && err.raw_os_error().is_none() {
        return Error::PathEscape { path };
    }
    let errno = err.raw_os_error().map(Errno::from_raw);
    let why = match errno {
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
    match errno {
        // Opening a socket, or a named pipe for writing with no reader, with O_NONBLOCK.
        // The entry is checked before it is opened, so this is one swapped in meanwhile.
        Some(Errno::ENXIO) => {
            return Error::NotAFile {
                path,
                kind: "socket or named pipe",
                via_link: false,
            };
        }
        Some(Errno::ETXTBSY) => return Error::Busy { path },
        _ => {}
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
