//! The sandbox toolkit: `bash`, `read_file`, `write_file`, `edit_file`, `send_to_channel`.
//!
//! [`Toolkit`] offers the tools to the model ([`Toolkit::specs`]) and executes a
//! [`ToolCall`](toren_protocol::ToolCall) against a
//! [`Sandbox`](toren_sandbox::Sandbox). Every mistake the model can correct (bad
//! arguments, a path outside the workspace, a missing match, a failing command) comes back
//! as a [`ToolOutcome`] with `is_error: true`; only host faults are a [`ToolError`]. The
//! crate knows nothing of approval policies or the event log.

mod bash;
mod error;
mod files;
mod matching;
mod outcome;
mod read;
mod restore;
mod send;
mod specs;
mod toolkit;
mod write;

pub use error::{Result, ToolError};
pub use outcome::ToolOutcome;
pub use restore::plan_restore;
pub use toolkit::{Executed, RunChannel, TOOL_NAMES, ToolSettings, Toolkit};
