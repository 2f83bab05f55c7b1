//! Drives one run to its end: replays the run's event log through the agent state
//! machine (`toren-agent`), carries out each action — a model call, an approval, a tool
//! call in the sandbox — and appends what happened to the log before going on.
//!
//! Ordering is the durability contract: `tool_started` is committed before a tool's side
//! effect starts and `tool_completed` after it ends; a model answer is committed before any
//! of its tool calls runs. The worker holds no state the log does not have, so a run can be
//! stopped at any point and driven again from its log. Front doors (the CLI today) watch a
//! run through an [`Observer`] and may answer approvals interactively through an
//! [`Approver`].

mod approval;
mod driver;
mod error;
mod heartbeat;
mod hooks;
mod step;
mod unreplayable;

pub mod holder;

pub use driver::{Outcome, Worker, WorkerConfig};
pub use error::Error;
pub use hooks::{Approver, Decision, HistorySource, ModelFactory, Observer, Observers};
pub use unreplayable::fail_if_unreplayable;
