//! The agent loop as a pure state machine.
//!
//! [`RunState`] is a fold over a run's events; [`RunState::next_action`] says what must
//! happen next (call the model, ask for an approval, run a tool, finish). The worker
//! executes the action and appends its result as events, which fold back into the state.
//! Because the state is rebuilt from the log alone, a run can stop at any point and
//! continue later: model answers in the log are never requested again (I-2) and completed
//! tool calls are never run again (I-3). This crate performs no I/O: no store, no HTTP,
//! no processes.

mod action;
mod admit;
mod budget;
mod compact;
mod context;
mod decide;
mod hosts;
mod prompt;
mod rewind;
mod state;
mod usage;

pub use action::{Action, INTERRUPTED_NOTE, MAX_TOOL_ATTEMPTS};
pub use context::{
    COMPACT_TO_PERCENT, Compaction, OUTPUT_RESERVE_MAX, TOOLS_RESERVE, estimate_tokens,
    message_tokens,
};
pub use hosts::{HostApproval, is_side_event};
pub use prompt::{default_instructions, system_prompt};
pub use state::{Error, RunState};
pub use usage::{total_usage, usage_of};

/// Tools whose calls wait for a human under `approval: always`.
pub const APPROVAL_TOOLS: &[&str] = &["bash"];
