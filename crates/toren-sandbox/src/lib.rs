//! Sandboxes and workspaces.
//!
//! A [`Workspace`] is a run's directory, opened as a capability handle (`cap-std`): every
//! path is resolved beneath it and escapes (`..`, absolute paths, symlinks leading out) are
//! refused by the kernel, not by string checks. A [`Sandbox`] runs commands confined to one
//! workspace; a [`SandboxBackend`] opens the sandbox of a run and lets go of it when the run
//! ends. Backends implement it on their own type: [`LocalBackend`] (bubblewrap) here, the
//! docker backend in `toren-sandbox-docker`. The crate knows nothing of approvals or the
//! event log.

mod backend;
pub mod egress;
mod error;
mod files;
mod local;
mod pinned;
mod restore;
mod sandbox;
mod workspace;

pub use backend::SandboxBackend;
pub use egress::EgressHooks;
pub use error::{Error, Result};
pub use files::Files;
pub use local::{
    BwrapSpec, Enforcement, HELPER_PATH, HostLayout, Inside, LimitEnforcement, LocalBackend,
    LocalSettings, RootEntry, SHELL, bwrap_argv, sandbox_env, seccomp_filter,
};
pub use pinned::pinned_workspace;
pub use restore::{RestorePlan, RestoreSource, SharedRestoreSource};
pub use sandbox::{
    ExecOutput, ExecRequest, LimitHit, MAX_COMMAND_BYTES, SANDBOX_PATH, SHM_SIZE, Sandbox,
    check_command,
};
pub use workspace::{
    EntryInfo, EntryKind, SANDBOX_WORKDIR, WORKSPACE_DIR, Workspace, check_tool_path,
    workspace_path,
};
