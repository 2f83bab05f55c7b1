//! Sandboxes and workspaces.
//!
//! A [`Workspace`] is a run's directory, opened as a capability handle (`cap-std`): every
//! path is resolved beneath it and escapes (`..`, absolute paths, symlinks leading out) are
//! refused by the kernel, not by string checks. A [`Sandbox`] runs commands confined to one
//! workspace. Backends: [`LocalBackend`] (bubblewrap). The crate knows nothing of approvals
//! or the event log.

mod error;
mod local;
mod pinned;
mod sandbox;
mod workspace;

pub use error::{Error, Result};
pub use local::{
    BwrapSpec, Enforcement, HostLayout, LimitEnforcement, LimitHit, LocalBackend, LocalSettings,
    RootEntry, SANDBOX_PATH, SHELL, SHM_SIZE, bwrap_argv, sandbox_env,
};
pub use pinned::pinned_workspace;
pub use sandbox::{ExecOutput, ExecRequest, MAX_COMMAND_BYTES, Sandbox, check_command};
pub use workspace::{
    EntryInfo, EntryKind, SANDBOX_WORKDIR, WORKSPACE_DIR, Workspace, workspace_path,
};
