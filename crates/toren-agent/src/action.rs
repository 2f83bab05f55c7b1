//! The actions the state machine asks the worker to carry out.

use toren_protocol::{RunStatus, ToolCall};

/// Told to the model when a call was interrupted (recorded as started, never completed)
/// and has been run again.
pub const INTERRUPTED_NOTE: &str = "[note: this tool call was interrupted by a restart before it completed and has been run again; any side effects of the first attempt may have happened twice]";

/// How many times a tool call may be started without completing (the process running it
/// died each time) before it is answered with an error instead of being run again, so that a
/// call that kills its worker cannot make a run crash-loop on resume.
pub const MAX_TOOL_ATTEMPTS: u32 = 3;

/// What must happen next in a run.
#[derive(Clone, Debug, PartialEq)]
pub enum Action {
    /// Ask the model for the next turn, with the conversation so far.
    CallModel,
    /// Record `approval_requested` for this call, then wait for a decision.
    RequestApproval { call: ToolCall, command: String },
    /// An approval was requested and no decision is recorded yet: wait for one.
    AwaitApproval { call: ToolCall, command: String },
    /// The human denied the call: record its result (an error the model sees) without
    /// running anything.
    RecordDenial {
        call: ToolCall,
        reason: Option<String>,
    },
    /// Record `output` as the call's result (an error the model sees) without running
    /// anything: its arguments do not decode, so there is nothing a human could approve, or
    /// it was started [`MAX_TOOL_ATTEMPTS`] times without completing.
    Refuse { call: ToolCall, output: String },
    /// Record `tool_started` (attempt number given), run the tool, record `tool_completed`.
    /// `attempt > 1` means an earlier attempt was interrupted.
    RunTool { call: ToolCall, attempt: u32 },
    /// The model gave its final answer: record `run_completed`.
    Complete { output: String },
    /// The run cannot go on: record `run_failed`.
    Fail { error: String },
    /// The run has ended; nothing more to do.
    Finished { status: RunStatus },
}
