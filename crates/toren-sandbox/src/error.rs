//! The crate's one error type. Each variant says whether the model caused it (a bad path,
//! a missing file: the tool reports it back to the model) or the host did (bubblewrap
//! missing, the workspace unreadable: the run fails and an operator has to act).

use std::io;

/// Everything that can go wrong in a workspace or a sandbox.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "bubblewrap (`bwrap`) is not installed (looked for {searched}); install it with \
         `apt-get install bubblewrap`, or choose another sandbox backend"
    )]
    BwrapMissing { searched: String },

    #[error(
        "bubblewrap is installed but cannot create a sandbox on this host: {stderr}\n\
         hint: bwrap needs unprivileged user namespaces (`sysctl kernel.unprivileged_userns_clone=1`; \
         on Ubuntu 24.04 also `kernel.apparmor_restrict_unprivileged_userns=0`; inside a \
         container it needs CAP_SYS_ADMIN), or choose another sandbox backend"
    )]
    BwrapUnusable { stderr: String },

    #[error(
        "the sandbox helper `{path}` cannot serve commands: {why}\nhint: build it with \
         `scripts/build-exec-helper` (or point TOREN_EXEC_HELPER at a current build)"
    )]
    HelperFailed { path: String, why: String },

    #[error("path `{path}` leads outside the workspace; paths are relative to the workspace root")]
    PathEscape { path: String },

    #[error("invalid path `{path}`: {why}")]
    InvalidPath { path: String, why: String },

    #[error("`{path}` does not exist in the workspace")]
    NotFound { path: String },

    #[error("`{path}` is {size} bytes, more than the limit of {limit} bytes")]
    TooLarge { path: String, size: u64, limit: u64 },

    #[error("`{path}` is a directory, not a file")]
    IsDirectory { path: String },

    #[error(
        "cannot write `{path}`: the workspace's disk is full (or over its quota); delete \
         files you no longer need, then try again"
    )]
    WorkspaceFull { path: String },

    #[error(
        "`{path}` {} a {kind}, not a regular file; read_file, write_file and edit_file work \
         only on regular files (use bash to work with it, e.g. `ls -l {path}`)",
        if *.via_link { "is a symbolic link to" } else { "is" }
    )]
    NotAFile {
        path: String,
        kind: &'static str,
        /// `path` is a symlink to it.
        via_link: bool,
    },

    #[error(
        "cannot write `{path}`: it is a program that is running (text file busy); write to \
         another path, or stop the program first"
    )]
    Busy { path: String },

    /// An operation on a path inside the workspace failed for another reason.
    #[error("cannot {op} `{path}`: {source}")]
    Fs {
        op: &'static str,
        path: String,
        #[source]
        source: io::Error,
    },

    #[error(
        "the workspace `{path}` is owned by uid {owner}, but Toren runs as uid {uid}, so the \
         sandbox could not write to it; fix: `chown -R {uid} {path}`"
    )]
    ForeignWorkspace { path: String, owner: u32, uid: u32 },

    #[error(
        "the agent's network lists hosts, which the local backend serves only with the sandbox \
         helper (toren-exec) relaying to the egress proxy; build it with \
         `scripts/build-exec-helper` (or point TOREN_EXEC_HELPER at it)"
    )]
    EgressNeedsHelper,

    #[error("{why}")]
    InvalidCommand { why: String },

    #[error("cannot pass variable `{name}` to the sandbox: {why}")]
    InvalidEnv { name: String, why: &'static str },

    #[error(
        "`{name}` is not a valid workspace name: it must be one path component without `/`, NUL or dots only"
    )]
    InvalidWorkspaceName { name: String },

    #[error(
        "the workspace `{path}` does not exist (Toren never deletes workspaces: was it moved or \
         deleted by hand?)"
    )]
    WorkspaceMissing { path: String },

    /// The sandbox service turned the run away for now (a rate limit, no capacity, the
    /// network down) after the backend's own retries: nothing is wrong with the run, which
    /// waits for the service rather than fail.
    #[error("the {backend} sandbox service is unavailable for now: {why}")]
    Unavailable { backend: &'static str, why: String },

    /// A host-side operation (the workspace root, spawning bubblewrap, a pipe) failed.
    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether the model can fix this by calling the tool differently. `false` means a
    /// host fault: the operator has to act and the run should fail.
    pub fn is_model_fixable(&self) -> bool {
        match self {
            Self::PathEscape { .. }
            | Self::InvalidPath { .. }
            | Self::NotFound { .. }
            | Self::TooLarge { .. }
            | Self::IsDirectory { .. }
            | Self::WorkspaceFull { .. }
            | Self::InvalidCommand { .. }
            | Self::NotAFile { .. }
            | Self::Busy { .. } => true,
            Self::Fs { source, .. } => is_caused_by_path(source),
            Self::BwrapMissing { .. }
            | Self::BwrapUnusable { .. }
            | Self::HelperFailed { .. }
            | Self::EgressNeedsHelper
            | Self::ForeignWorkspace { .. }
            | Self::InvalidEnv { .. }
            | Self::InvalidWorkspaceName { .. }
            | Self::WorkspaceMissing { .. }
            | Self::Unavailable { .. }
            | Self::Io { .. } => false,
        }
    }

    /// Whether the run should wait and try again later rather than fail: the service that
    /// runs sandboxes is unavailable for now.
    pub fn is_transient(&self) -> bool {
        match self {
            Self::Unavailable { .. } => true,
            Self::BwrapMissing { .. }
            | Self::BwrapUnusable { .. }
            | Self::HelperFailed { .. }
            | Self::PathEscape { .. }
            | Self::InvalidPath { .. }
            | Self::NotFound { .. }
            | Self::TooLarge { .. }
            | Self::IsDirectory { .. }
            | Self::WorkspaceFull { .. }
            | Self::NotAFile { .. }
            | Self::Busy { .. }
            | Self::Fs { .. }
            | Self::ForeignWorkspace { .. }
            | Self::EgressNeedsHelper
            | Self::InvalidCommand { .. }
            | Self::InvalidEnv { .. }
            | Self::InvalidWorkspaceName { .. }
            | Self::WorkspaceMissing { .. }
            | Self::Io { .. } => false,
        }
    }

    pub(crate) fn io(context: impl Into<String>, source: io::Error) -> Self {
        Self::Io {
            context: context.into(),
            source,
        }
    }
}

/// Errors that follow from what is at the path (permissions the agent set, a file where a
/// directory is expected, an entry it made that the call cannot use), as opposed to the
/// host failing (an I/O error, no memory, no descriptors). The `errno`s the agent can
/// cause are listed by name; other errors go by their kind.
fn is_caused_by_path(err: &io::Error) -> bool {
    use io::ErrorKind as K;
    use nix::errno::Errno as E;
    if let Some(errno) = err.raw_os_error().map(E::from_raw) {
        return matches!(
            errno,
            // `chmod` by the agent, or a file it made read-only.
            E::EACCES | E::EPERM
                // Entries where others were expected.
                | E::EEXIST | E::ENOTDIR | E::EISDIR | E::ENOTEMPTY | E::ENOENT
                // Symlinks that loop, names too long or deep, too many links to a directory.
                | E::ELOOP | E::ENAMETOOLONG | E::EMLINK
                // Named pipes and sockets (`mkfifo`, `bind`), running programs.
                | E::ENXIO | E::EAGAIN | E::ETXTBSY | E::ESPIPE
                // Bad arguments through the path, sizes past the file system's limits.
                | E::EINVAL | E::EILSEQ | E::EFBIG | E::EOVERFLOW
                // A full disk or quota: the agent's files filled it.
                | E::ENOSPC | E::EDQUOT
        );
    }
    matches!(
        err.kind(),
        K::PermissionDenied
            | K::AlreadyExists
            | K::NotADirectory
            | K::IsADirectory
            | K::DirectoryNotEmpty
            | K::InvalidInput
            | K::InvalidFilename
            | K::InvalidData
            | K::FileTooLarge
            | K::NotFound
            | K::WouldBlock
    )
}
