//! The [`Worker`]: drives any run of any agent to its end, many at once — replays each run's
//! event log through the agent state machine (`toren-agent`), carries out each action (a
//! model call, an approval, a tool call in the sandbox, a delivery) and appends what
//! happened to the log before going on. Each run's model provider comes from a
//! [`ModelFactory`] by its pinned spec, its sandbox backend by its pinned policy.
//!
//! Ordering is the durability contract: `tool_started` is committed before a tool's side
//! effect starts and `tool_completed` after it ends; a model answer is committed before any
//! of its tool calls runs. The worker holds no state the log does not have, so a run can be
//! stopped at any point and driven again from its log. Front doors (through the run service) watch a
//! run through an [`Observer`] and may answer approvals interactively through an
//! [`Approver`].

mod approval;
mod budget;
mod checkpoints;
mod diff;
mod driver;
mod egress;
mod error;
mod heartbeat;
mod hooks;
mod redaction;
pub use redaction::{policy_redactor, redact_log};
mod restore;
mod rewind;
mod seed;
mod step;
mod unreplayable;

pub mod holder;

pub use checkpoints::{checkpoint_policy, checkpoint_restorable, checkpoint_workspace};
pub use diff::{host_workspace, workspace_diff};
pub use driver::{Outcome, Worker, WorkerConfig};
pub use egress::{FLUSH_EVERY, HOST_APPROVAL_WAIT, RunEgress};
pub use error::Error;
pub use hooks::{Approver, Decision, HistorySource, ModelFactory, Observer, Observers};
pub use rewind::{
    Backends, NoBackends, RewindOutcome, complete_rewind_turn, fill_fork_workspace,
    plan as plan_rewind, plan_fork, restore_blocked, restore_if_due, rewind,
};
pub use seed::{CLONE_TIMEOUT, SeedSource, seed_workspace};
pub use toren_checkpoint::SeedLimits;
pub use unreplayable::fail_if_unreplayable;
