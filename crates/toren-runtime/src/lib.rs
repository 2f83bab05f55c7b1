//! The run service: the one layer every front door (the CLI's commands, and the chat, HTTP
//! API and Telegram front doors to come) calls to create runs, decide approvals, cancel, and
//! read or follow a run's events. Nothing above it touches the store; workers
//! (`toren-worker`) drive the runs it creates.
//!
//! [`RunService::create`] resolves the agent's sandbox policy against the operator's choice
//! of backend, makes the run's workspace and pins both in `run_created` (I-4);
//! [`RunService::decide`] and [`RunService::cancel`] are single atomic store operations that
//! need no lease, so any process may answer or stop any run; [`RunService::follow`] streams a
//! run's events as they are appended, woken by the in-process [`Notifier`] (which a worker
//! in the same process reports to) and, across processes, by a short poll.

mod approvals;
mod budget;
mod error;
mod follow;
mod policy;
pub mod pool;
mod queries;
mod rewind;
mod secrets;
mod service;
mod session_line;
mod session_rewind;
mod sessions;
mod workers;

pub use approvals::{Approval, ApprovalState, Decided, approvals_of};
pub use budget::BudgetRaise;
pub use error::{Error, Result};
pub use follow::{Follow, Followed, Moves, Notifier};
pub use policy::{PolicySettings, resolve_policy};
pub use rewind::{Fork, WentBack};
pub use secrets::EnvValues;
pub use service::{Actor, Created, RunService, RunView, ServiceSettings};
pub use session_line::LineTurn;
pub use session_rewind::{SessionRewound, SessionStep};
pub use sessions::{CHANNEL_SESSION_PREFIXES, SESSION_ID_PREFIX, Sent, SessionView};
pub use workers::PassedOverBy;
