//! The [`Toolkit`]: the tools offered to a sandbox agent and the dispatch of one
//! [`ToolCall`] to its implementation (`bash`, `read`, `write`, `send`), with the run's
//! channel for `send_to_channel`. Which calls need a human's approval is the state
//! machine's (`toren_agent::APPROVAL_TOOLS`), not the toolkit's.

use std::sync::Arc;
use std::time::Duration;

use toren_channel::Channel;
use toren_protocol::{MessageDelivered, RunId, ToolCall, ToolSpec};
use toren_sandbox::Sandbox;

use crate::error::Result;
use crate::outcome::ToolOutcome;
use crate::{bash, read, send, specs, write};

/// The channel a run is bound to, where `send_to_channel` delivers.
#[derive(Clone, Debug)]
pub struct RunChannel {
    pub run_id: RunId,
    pub channel: Arc<dyn Channel>,
}

/// What a call produced: its outcome, and the file it handed to the person, if it did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Executed {
    pub outcome: ToolOutcome,
    /// To journal with the call's result (`message_delivered`).
    pub delivered: Option<MessageDelivered>,
}

impl From<ToolOutcome> for Executed {
    fn from(outcome: ToolOutcome) -> Self {
        Self {
            outcome,
            delivered: None,
        }
    }
}

/// Limits of the tools, resolved by the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolSettings {
    /// A bash call without `timeout_secs` is killed after this long.
    pub bash_default_timeout: Duration,
    /// The largest `timeout_secs` accepted; larger values are refused.
    pub bash_max_timeout: Duration,
    /// Bytes of bash output kept (head and tail).
    pub output_limit: usize,
    /// Lines `read_file` returns when the call gives no `limit`.
    pub read_max_lines: usize,
    /// Bytes of text `read_file` returns at most.
    pub read_max_bytes: usize,
    /// Files larger than this are refused by `read_file` and `edit_file`, and neither
    /// `write_file` nor `edit_file` makes a file larger.
    pub file_size_limit: u64,
}

impl Default for ToolSettings {
    fn default() -> Self {
        Self {
            bash_default_timeout: Duration::from_secs(120),
            bash_max_timeout: Duration::from_secs(600),
            output_limit: 30_000,
            read_max_lines: 2000,
            read_max_bytes: 256 * 1024,
            file_size_limit: 10 * 1024 * 1024,
        }
    }
}

/// The sandbox toolkit.
#[derive(Clone, Debug, Default)]
pub struct Toolkit {
    settings: ToolSettings,
}

/// The names of the tools, in the order [`Toolkit::specs`] lists them.
pub const TOOL_NAMES: [&str; 5] = [
    bash::NAME,
    read::NAME,
    write::WRITE,
    write::EDIT,
    send::NAME,
];

impl Toolkit {
    pub fn new(settings: ToolSettings) -> Self {
        Self { settings }
    }

    pub fn settings(&self) -> &ToolSettings {
        &self.settings
    }

    /// The tools as offered to the model.
    pub fn specs(&self) -> Vec<ToolSpec> {
        specs::specs(&self.settings)
    }

    /// Runs one call of a run bound to no channel. Everything the model can fix comes back
    /// as `Ok` with `is_error: true`; `Err` means a host fault.
    pub async fn execute(&self, sandbox: &dyn Sandbox, call: &ToolCall) -> Result<ToolOutcome> {
        Ok(self.execute_with(sandbox, call, None).await?.outcome)
    }

    /// Runs one call of a run bound to `channel` (if any), where `send_to_channel`
    /// delivers. As [`Toolkit::execute`], plus what was delivered.
    pub async fn execute_with(
        &self,
        sandbox: &dyn Sandbox,
        call: &ToolCall,
        channel: Option<&RunChannel>,
    ) -> Result<Executed> {
        let args = &call.arguments;
        let outcome = match call.name.as_str() {
            bash::NAME => bash::run(&self.settings, sandbox, args).await,
            read::NAME => read::run(&self.settings, &sandbox.files(), args).await,
            write::WRITE => write::write_file(&self.settings, &sandbox.files(), args).await,
            write::EDIT => write::edit_file(&self.settings, &sandbox.files(), args).await,
            send::NAME => {
                return send::run(&self.settings, &sandbox.files(), call, channel).await;
            }
            other => Ok(ToolOutcome::error(format!(
                "unknown tool `{other}`; the available tools are {}",
                TOOL_NAMES.map(|n| format!("`{n}`")).join(", ")
            ))),
        };
        outcome.map(Executed::from)
    }
}
