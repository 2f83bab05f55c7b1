//! The event log: Toren's source of truth.
//!
//! [`EventLog`] is the storage contract every backend implements; the conformance suite in
//! [`conformance`] checks it, and every backend's tests run the whole suite. The SQLite
//! backend ([`SqliteStore`]) is the embedded default; Postgres comes later and must pass the
//! same suite. The store knows runs and events, not agents: it never interprets an event
//! beyond [`EventKind::status_after`] (to keep the `status` column in step) and the approval
//! rules of [`EventLog::decide_approval`].
//!
//! [`EventKind::status_after`]: toren_protocol::EventKind::status_after

mod error;
mod sqlite;

pub mod conformance;

use async_trait::async_trait;
use jiff::Timestamp;
use toren_protocol::{ApprovalDecided, Event, EventKind, RunCreated, RunId, RunStatus};

pub use error::{Error, Result};
pub use sqlite::SqliteStore;

/// One row of `toren runs list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSummary {
    pub id: RunId,
    pub agent: String,
    pub status: RunStatus,
    /// The `at` of the run's `run_created` event.
    pub created_at: Timestamp,
    /// The `at` of the run's last event.
    pub updated_at: Timestamp,
    /// The seq of the last event.
    pub last_seq: u64,
}

/// The append-only, per-run ordered event log.
///
/// Ordering: events of one run have seq 1, 2, 3, … without gaps, in commit order.
/// Durability: a method returns only after the store committed what it wrote.
#[async_trait]
pub trait EventLog: Send + Sync {
    /// Creates the run and appends its `run_created` event (seq 1). Fails with
    /// [`Error::RunExists`] if the id is taken.
    async fn create_run(&self, run_id: &RunId, created: RunCreated) -> Result<Event>;

    /// Appends `kinds` as one atomic batch after `after_seq` (the seq of the last event the
    /// caller has seen). If the log has moved on past `after_seq`, nothing is written and
    /// [`Error::Conflict`] is returned: the caller must re-read and decide again. Appending
    /// to a run that has ended ([`RunStatus::is_terminal`]) fails with [`Error::RunEnded`]
    /// (checked before the conflict: an ended run takes nothing, whatever the caller saw), and
    /// so does a batch that goes on after its own terminal event (nothing of it is written).
    /// An empty batch writes nothing and returns no events, after the same checks. An unknown
    /// run is [`Error::RunNotFound`].
    async fn append(
        &self,
        run_id: &RunId,
        after_seq: u64,
        kinds: Vec<EventKind>,
    ) -> Result<Vec<Event>>;

    /// Events of the run with `seq > after_seq`, in order. An unknown run is
    /// [`Error::RunNotFound`].
    async fn read(&self, run_id: &RunId, after_seq: u64) -> Result<Vec<Event>>;

    /// The run's summary, or [`Error::RunNotFound`].
    async fn run(&self, run_id: &RunId) -> Result<RunSummary>;

    /// Runs, newest first (by creation time, then id), at most `limit`.
    async fn list_runs(&self, limit: u32) -> Result<Vec<RunSummary>>;

    /// Records a human's decision on a pending approval, atomically: the run must have an
    /// `approval_requested` for `decision.call_id` and no `approval_decided` for it yet.
    /// Otherwise nothing is written and the error says why ([`Error::NoPendingApproval`],
    /// [`Error::AlreadyDecided`], which carries the recorded decision). A call of a run that
    /// has ended cannot be decided ([`Error::RunEnded`]). Works whoever holds the run and
    /// whatever seq the caller last saw: it is how another terminal answers a waiting run.
    async fn decide_approval(&self, run_id: &RunId, decision: ApprovalDecided) -> Result<Event>;
}
