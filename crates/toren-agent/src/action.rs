//! The actions the state machine asks the worker to carry out. Each carries the complete
//! event(s) to append or the complete input of the side effect, so that the worker decides
//! nothing: it performs the I/O and appends.

use toren_protocol::{
    ApprovalRequested, EventKind, Message, MessageDelivered, RunCompleted, RunFailed, RunStatus,
    ToolCall, ToolCompleted, ToolStarted,
};

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
    /// Ask the model for the next turn.
    CallModel {
        system: String,
        messages: Vec<Message>,
        /// Whether the sandbox tools are offered (only to agents with a sandbox).
        offer_tools: bool,
        /// The most output tokens the context window leaves room for: the worker asks for
        /// the lesser of this and its configured `max_tokens`.
        max_output_tokens: u32,
    },
    /// The conversation would not fit the model's context window: append `event`
    /// (`context_compacted`); the model call that follows sends the compacted conversation.
    Compact {
        event: toren_protocol::ContextCompacted,
    },
    /// Append `request` (`approval_requested`), then wait for a decision.
    RequestApproval {
        call: ToolCall,
        request: ApprovalRequested,
    },
    /// `request` is recorded and no decision is yet: wait for one.
    AwaitApproval {
        call: ToolCall,
        request: ApprovalRequested,
    },
    /// The human denied the call: append `result` (an error the model sees) without
    /// running anything.
    RecordDenial {
        call: ToolCall,
        result: ToolCompleted,
    },
    /// Append `result` (an error the model sees) without running anything: the agent has
    /// no tools, the call's arguments do not decode (nothing a human could approve), or it
    /// was started [`MAX_TOOL_ATTEMPTS`] times without completing.
    Refuse {
        call: ToolCall,
        result: ToolCompleted,
    },
    /// Append `started`, run the tool, and append its result, with `note` (if any) put
    /// before the tool's output. `attempt > 1` means an earlier attempt was interrupted.
    RunTool {
        call: ToolCall,
        attempt: u32,
        started: ToolStarted,
        note: Option<&'static str>,
    },
    /// A limit of the run's budget is reached before a model call: append `event`
    /// (`budget_reached`); the run then waits for a raise.
    ReachBudget {
        event: toren_protocol::BudgetReached,
    },
    /// `reached` is recorded and nobody has raised the budget yet: wait for a
    /// `budget_raised` (or let go of the run, for a worker that parks waiting runs).
    AwaitBudget {
        reached: toren_protocol::BudgetReached,
    },
    /// The model gave its final answer: append `run_completed`.
    Complete { event: RunCompleted },
    /// The run cannot go on: append `run_failed`.
    Fail { event: RunFailed },
    /// The run has ended; nothing more to do.
    Finished { status: RunStatus },
}

impl Action {
    /// The events that record a finished tool call: the delivery of the file it sent to
    /// the person, if it sent one, then its result, in one batch. The delivery comes first:
    /// it folds only while its call is open, and the result closes the call.
    pub fn finished(result: ToolCompleted, delivered: Option<MessageDelivered>) -> Vec<EventKind> {
        delivered
            .map(EventKind::MessageDelivered)
            .into_iter()
            .chain([EventKind::ToolCompleted(result)])
            .collect()
    }

    /// The tool result to record for `call_id`, with `note` before the tool's output.
    pub fn completed(
        call_id: &str,
        note: Option<&str>,
        output: String,
        is_error: bool,
        exit_code: Option<i32>,
        truncated: bool,
    ) -> ToolCompleted {
        ToolCompleted {
            call_id: call_id.to_owned(),
            output: match note {
                Some(note) => format!("{note}\n{output}"),
                None => output,
            },
            is_error,
            exit_code,
            truncated,
        }
    }
}
