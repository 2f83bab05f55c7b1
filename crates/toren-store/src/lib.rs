//! The event log: Toren's source of truth.
//!
//! [`EventLog`] is the storage contract every backend implements, leases and fencing
//! included; the conformance suite in [`conformance`] checks it, and every backend's tests
//! run the whole suite. The SQLite backend ([`SqliteStore`]) is the embedded default;
//! the Postgres backend (crate `toren-store-postgres`) passes the same suite. The store
//! knows runs, events and leases, not agents: it never interprets an event beyond
//! [`EventKind::status_after`] and [`Waiting`] (to keep the `status` column in step) and
//! the approval rules of [`EventLog::decide_approval`]. It takes the time from a [`Clock`].
//!
//! Sessions (a conversation of many turns, each a run) are a second contract,
//! [`SessionStore`], and the registry of live workers a third, [`WorkerRegistry`]; the
//! SQLite backend implements both.
//!
//! [`EventKind::status_after`]: toren_protocol::EventKind::status_after
//! [`Waiting`]: toren_protocol::Waiting

mod chats;
mod clock;
mod error;
mod lease;
mod log;
mod query;
mod sessions;
mod sqlite;
mod workers;

pub mod backend;
pub mod conformance;

pub use chats::{ChatButton, ChatStore};
pub use clock::{Clock, SystemClock, TestClock};
pub use error::{Error, Result};
pub use lease::{Lease, LeaseInfo};
pub use log::{EventLog, RunCounts, RunSummary};
pub use query::{ClaimLeases, ClaimQuery, ClaimRequest, RunCursor, RunPage, RunQuery};
pub use sessions::{QueuedTurn, Session, SessionStore, SessionTurnRow};
pub use sqlite::{SqliteStore, WriteStats};
pub use workers::{PassedOver, WorkerBeat, WorkerInfo, WorkerRegistry};
