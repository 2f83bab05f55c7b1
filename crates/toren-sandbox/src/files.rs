//! [`Files`]: how the file tools reach a sandbox's files. A backend whose commands see the
//! host's workspace directory (local, docker) serves them from the [`Workspace`] handle
//! itself; a backend whose files live elsewhere (an E2B microVM) implements `Files` with
//! the same checks and errors, made where the files are. The methods are synchronous: the
//! tools call them on the blocking pool.

use crate::error::Result;
use crate::workspace::{EntryInfo, Workspace};

/// The file operations the tools use, on workspace-relative paths. Errors are
/// [`crate::Error`]s of the same kinds as [`Workspace`]'s (escapes, missing files, too
/// large, not a regular file), so the tools tell the model the same things on every
/// backend.
pub trait Files: Send + Sync {
    /// The regular file at `path`, refused when larger than `limit` bytes.
    fn read(&self, path: &str, limit: u64) -> Result<Vec<u8>>;
    /// Writes `contents` to the regular file at `path`, creating it and its parents.
    fn write(&self, path: &str, contents: &[u8]) -> Result<()>;
    /// What is at `path`, following symlinks that stay inside.
    fn metadata(&self, path: &str) -> Result<EntryInfo>;
}

impl Files for Workspace {
    fn read(&self, path: &str, limit: u64) -> Result<Vec<u8>> {
        Workspace::read(self, path, limit)
    }

    fn write(&self, path: &str, contents: &[u8]) -> Result<()> {
        Workspace::write(self, path, contents)
    }

    fn metadata(&self, path: &str) -> Result<EntryInfo> {
        Workspace::metadata(self, path)
    }
}
