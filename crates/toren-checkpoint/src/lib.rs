//! Workspace checkpoints: incremental, content-addressed, deduplicated snapshots of a
//! run's workspace, kept in Toren's own directory outside it (the sandbox can neither see
//! nor alter them), restored and compared on request.
//!
//! A [`Store`] is a directory:
//!
//! ```text
//! <store>/objects/ab/cdef…    one blob per distinct file content, named by its SHA-256
//! <store>/manifests/<id>.v2   one per checkpoint, binary: every path → kind, mode, size,
//!                             hash or target, or (mostly) a delta against its parent
//!                             (`format`); `<id>.json` is version 1, still read
//! <store>/tmp/                blobs and manifests being written (renamed into place)
//! <store>/restored.v2         the stat of the files the last restore wrote, so the next
//!                             checkpoint does not read them again (`hints`)
//! ```
//!
//! A checkpoint walks the workspace without following a symlink (each is recorded with its
//! target), skips the excluded paths ([`Exclude`]), and reuses the previous checkpoint's
//! hash for a file whose size, mtime, ctime and inode are unchanged, so an unchanged file
//! costs one `lstat`; the previous checkpoint is kept in memory, so nothing is read back.
//! What changed is written as a small delta against it (a full manifest every 64, or when
//! much changed). Blobs are renamed into place and flushed before the manifest that names
//! them, and the manifest is flushed before it is renamed into place, so a process killed
//! mid-checkpoint leaves the store as it was plus unreferenced temporaries, and a power
//! loss at most the checkpoint being taken. `keep` prunes the oldest manifests (a kept
//! delta whose parent goes is first written whole) and the blobs no kept manifest
//! references. The workspace is never deleted, only read (checkpoint) or made equal to a
//! checkpoint (restore).
//!
//! Files are read beneath a handle on the workspace (`openat2` with `RESOLVE_BENEATH |
//! RESOLVE_NO_SYMLINKS`), so a process still running inside the sandbox that swaps a
//! directory for a symlink after the walk saw it cannot make a checkpoint hold a file from
//! outside. A restore changes the workspace beneath that handle too (`beneath`: every
//! directory on the way opened with the same flags, each change made relative to its
//! parent's descriptor), so such a swap makes it fail, never reach outside. The walk
//! opens each directory it lists the same way, so such a swap cannot put even the names of
//! a directory outside into a manifest.

mod beneath;
mod blobs;
mod diff;
mod exclude;
mod format;
mod hints;
mod manifest;
mod prune;
mod restore;
mod seed;
mod store;
mod walk;

pub use diff::{Change, FileDiff};
pub use exclude::Exclude;
pub use manifest::{Entry, EntryKind, Manifest};
pub use seed::{SeedLimits, Seeded};
pub use store::{Checkpoint, Stats, Store};

/// What can go wrong reading or writing checkpoints.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("{action} {path}: {source}")]
    Io {
        action: &'static str,
        path: String,
        #[source]
        source: std::io::Error,
    },
    #[error("checkpoint {id} not found in {store}")]
    NotFound { id: String, store: String },
    #[error("checkpoint manifest {path} does not parse: {source}")]
    Manifest {
        path: String,
        #[source]
        source: serde_json::Error,
    },
    #[error("checkpoint manifest {path} does not decode: {reason}")]
    Format { path: String, reason: &'static str },
    #[error("blob {hash} is missing from the store (referenced by checkpoint {id})")]
    MissingBlob { hash: String, id: String },
    #[error("bad exclude pattern `{pattern}`: {reason}")]
    Pattern {
        pattern: String,
        reason: &'static str,
    },
    #[error("the restore of checkpoint {id} was stopped before it finished")]
    Stopped { id: String },
    #[error("path `{path}` in checkpoint {id} leaves the workspace")]
    BadPath { path: String, id: String },
    #[error(
        "{source_dir} is too large to copy into a workspace: {files} files and directories, \
         {bytes} bytes (at most {max_files} and {max_bytes}); copy a smaller directory (leave \
         out build output and dependencies, e.g. target/ or node_modules/)"
    )]
    SeedTooLarge {
        source_dir: String,
        files: u64,
        bytes: u64,
        max_files: u64,
        max_bytes: u64,
    },
    #[error(
        "{source_dir}: the symlink `{path}` points outside it (to `{target}`), which a workspace \
         cannot hold (the file tools refuse paths that lead out); remove or replace the link, \
         or copy the directory it points into"
    )]
    SeedLinkOutside {
        source_dir: String,
        path: String,
        target: String,
    },
}

pub type Result<T, E = Error> = std::result::Result<T, E>;

pub(crate) fn io(
    action: &'static str,
    path: &std::path::Path,
) -> impl FnOnce(std::io::Error) -> Error {
    let path = path.display().to_string();
    move |source| Error::Io {
        action,
        path,
        source,
    }
}

/// What a driver checkpoints and how many it keeps: the agent file's `sandbox.checkpoints`.
#[derive(Clone, Debug)]
pub struct Policy {
    pub exclude: Exclude,
    /// Checkpoints kept per workspace; older ones are pruned once a quarter more exist.
    pub keep: usize,
}

impl Default for Policy {
    fn default() -> Self {
        Self {
            exclude: Exclude::default(),
            keep: 100,
        }
    }
}

impl Policy {
    /// The store beside a workspace (`<run dir>/checkpoints` for `<run dir>/workspace`):
    /// outside what the sandbox mounts.
    pub fn store_for(workspace: &std::path::Path) -> Option<std::path::PathBuf> {
        workspace.parent().map(|dir| dir.join("checkpoints"))
    }

    /// Takes a checkpoint of `workspace` and prunes when more than `keep` plus a quarter
    /// exist (so the mark-and-sweep over manifests is paid once per `keep / 4` checkpoints).
    pub fn checkpoint(&self, workspace: &std::path::Path) -> Result<Checkpoint> {
        let root = Self::store_for(workspace).ok_or_else(|| Error::BadPath {
            path: workspace.display().to_string(),
            id: String::new(),
        })?;
        let store = Store::open(root)?;
        let taken = store.checkpoint(workspace, &self.exclude)?;
        if store.list()?.len() > self.keep + self.keep.div_ceil(4).max(1) {
            store.prune(self.keep.max(1))?;
        }
        Ok(taken)
    }
}
