//! The [`Sandbox`] trait: what every backend offers the tools — a workspace and a way to
//! run one shell command confined to it — and the backend-neutral types of a command's
//! request and result ([`ExecRequest`], [`ExecOutput`], [`LimitHit`]) and of what a command
//! sees ([`SANDBOX_PATH`], [`SHM_SIZE`]). Backends (`local`,
//! docker, later E2B) implement it; the tools crate uses it without knowing which backend
//! runs underneath.

use std::fmt;
use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;

use crate::error::{Error, Result};
use crate::files::Files;
use crate::workspace::Workspace;

/// `PATH` inside every sandbox, whichever backend runs it.
pub const SANDBOX_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

/// The most a sandbox's `/dev/shm` may hold, as docker's default (and never more than the
/// memory limit).
pub const SHM_SIZE: u64 = 64 * 1024 * 1024;

/// The longest command a sandbox accepts, in bytes: the command travels as one argument,
/// and Linux refuses arguments over 128 KiB.
pub const MAX_COMMAND_BYTES: usize = 100_000;

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
    /// Resource limits the command ran into (empty if none, or if the backend cannot tell).
    pub limits_hit: Vec<LimitHit>,
}

/// A resource limit a command ran into, for the model to read. Any backend that can tell
/// reports it (the local backend from its cgroups, docker from the container's).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum LimitHit {
    /// The memory limit was reached and the kernel killed a process of the command.
    Memory { limit: u64 },
    /// The process limit was reached: a fork failed.
    Pids { limit: u32 },
}

impl fmt::Display for LimitHit {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Self::Memory { limit } => write!(
                f,
                "the command reached its memory limit of {} MiB and the kernel killed a process",
                limit / (1024 * 1024)
            ),
            Self::Pids { limit } => write!(
                f,
                "the command reached its limit of {limit} processes: starting another failed"
            ),
        }
    }
}

/// A place where commands run confined to one workspace. `Debug` output must never show
/// the values of granted variables.
#[async_trait]
pub trait Sandbox: fmt::Debug + Send + Sync {
    /// The workspace the sandbox works on, on the host.
    fn workspace(&self) -> &Workspace;

    /// Where the file tools read and write: the host workspace itself by default, for
    /// backends whose commands see that directory; a backend whose files live elsewhere
    /// returns its own.
    fn files(&self) -> Arc<dyn Files> {
        Arc::new(self.workspace().clone())
    }

    /// The backend's name, e.g. `local`.
    fn backend(&self) -> &'static str;

    /// The backend's id for this instance, recorded in `sandbox_provisioned`.
    fn instance_id(&self) -> String;

    /// The version of the daemon inside the instance (E2B's envd), recorded in
    /// `sandbox_provisioned`; `None` for backends without one, and before it is known.
    fn envd_version(&self) -> Option<String> {
        None
    }

    /// How the current instance came to be when it is not simply new (reconnected to a
    /// dead worker's, or replacing a lost one), recorded in `sandbox_provisioned`.
    fn origin(&self) -> Option<toren_protocol::SandboxOrigin> {
        None
    }

    /// Runs one command. Errors are host faults (the sandbox could not be started), except
    /// a command no shell can take ([`check_command`]); a command that fails or times out is
    /// an `Ok` with its exit code and flags.
    async fn exec(&self, req: ExecRequest) -> Result<ExecOutput>;
}

/// Refuses a command that cannot be passed to a shell: one holding a NUL byte, or longer
/// than [`MAX_COMMAND_BYTES`]. The error says what to do instead.
pub fn check_command(command: &str) -> Result<()> {
    let why = if command.contains('\0') {
        "`command` contains a NUL byte, which no shell command can hold; write the data to a \
         file with write_file, or produce it with printf '\\0'"
            .to_owned()
    } else if command.len() > MAX_COMMAND_BYTES {
        format!(
            "`command` is {} bytes, over the limit of {MAX_COMMAND_BYTES} bytes; write a long \
             script to a file with write_file and run that file",
            command.len()
        )
    } else {
        return Ok(());
    };
    Err(Error::InvalidCommand { why })
}
