//! The [`Sandbox`] trait: what every backend offers the tools — a workspace and a way to
//! run one shell command confined to it. Backends (`local`, later docker and E2B) implement
//! it; the tools crate uses it without knowing which backend runs underneath.

use std::fmt;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::Result;
use crate::workspace::Workspace;

/// One command to run in a sandbox.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecRequest {
    /// Run as `bash -c <command>` with the workspace as working directory.
    pub command: String,
    /// After this long the command and everything it started are killed.
    pub timeout: Duration,
    /// At most this many bytes of output are kept (head and tail).
    pub output_limit: usize,
}

/// What a command produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecOutput {
    /// bash's exit code; `None` if the command was killed (timeout, signal).
    pub exit_code: Option<i32>,
    /// stdout and stderr interleaved in arrival order, decoded lossily as UTF-8. When the
    /// output exceeded the limit, its head and tail are kept with a line in the middle
    /// stating how many bytes were cut.
    pub output: String,
    pub truncated: bool,
    pub timed_out: bool,
}

/// A place where commands run confined to one workspace. `Debug` output must never show
/// the values of granted variables.
#[async_trait]
pub trait Sandbox: fmt::Debug + Send + Sync {
    /// The workspace the sandbox works on; the file tools use it directly.
    fn workspace(&self) -> &Workspace;

    /// The backend's name, e.g. `local`.
    fn backend(&self) -> &'static str;

    /// The backend's id for this instance, recorded in `sandbox_provisioned`.
    fn instance_id(&self) -> String;

    /// Runs one command. Errors are host faults (the sandbox could not be started); a
    /// command that fails or times out is an `Ok` with its exit code and flags.
    async fn exec(&self, req: ExecRequest) -> Result<ExecOutput>;
}
