//! The conformance suite against real SQLite files: each check on a fresh file, the whole
//! suite on one shared file, and the whole suite through two separate stores (two pools,
//! as two processes would have) on one file.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};

use async_trait::async_trait;
use toren_protocol::{ApprovalDecided, Event, EventKind, RunCreated, RunId};
use toren_store::{EventLog, Result, RunSummary, SqliteStore, conformance};

use super::common::{temp_store, url_in};

macro_rules! check_on_fresh_file {
    ($($check:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $check() {
            let (_dir, store) = temp_store().await;
            conformance::$check(&store).await;
        }
    )*};
}

check_on_fresh_file!(
    create_and_read_round_trip,
    duplicate_create_is_refused,
    seqs_are_gap_free_across_batches,
    stale_append_conflicts_and_writes_nothing,
    status_follows_the_events,
    ended_runs_take_no_events,
    read_returns_events_after_seq,
    unknown_run_is_not_found,
    list_runs_newest_first,
    first_decision_wins,
    decision_without_request_is_refused,
    decision_on_ended_run_is_refused,
    pending_calls_are_decided_independently,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appenders_get_one_winner_per_seq() {
    let (_dir, store) = temp_store().await;
    conformance::concurrent_appenders_get_one_winner_per_seq(&(Arc::new(store) as _)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_decisions_get_one_winner() {
    let (_dir, store) = temp_store().await;
    conformance::concurrent_decisions_get_one_winner(&(Arc::new(store) as _)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn whole_suite_on_one_file() {
    let (_dir, store) = temp_store().await;
    conformance::run_all(Arc::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn whole_suite_through_two_stores_on_one_file() {
    let dir = tempfile::tempdir().unwrap();
    let first = SqliteStore::open(&url_in(&dir)).await.unwrap();
    let second = SqliteStore::open(&url_in(&dir)).await.unwrap();
    conformance::run_all(Arc::new(Alternating {
        stores: [first, second],
        next: 0.into(),
    }))
    .await;
}

/// Sends each call to the next of two stores in turn, so racing writers go through
/// different connection pools and only SQLite's own locking keeps them apart.
struct Alternating {
    stores: [SqliteStore; 2],
    next: AtomicUsize,
}

impl Alternating {
    fn pick(&self) -> &SqliteStore {
        &self.stores[self.next.fetch_add(1, Ordering::Relaxed) % 2]
    }
}

#[async_trait]
impl EventLog for Alternating {
    async fn create_run(&self, run_id: &RunId, created: RunCreated) -> Result<Event> {
        self.pick().create_run(run_id, created).await
    }

    async fn append(
        &self,
        run_id: &RunId,
        after_seq: u64,
        kinds: Vec<EventKind>,
    ) -> Result<Vec<Event>> {
        self.pick().append(run_id, after_seq, kinds).await
    }

    async fn read(&self, run_id: &RunId, after_seq: u64) -> Result<Vec<Event>> {
        self.pick().read(run_id, after_seq).await
    }

    async fn run(&self, run_id: &RunId) -> Result<RunSummary> {
        self.pick().run(run_id).await
    }

    async fn list_runs(&self, limit: u32) -> Result<Vec<RunSummary>> {
        self.pick().list_runs(limit).await
    }

    async fn decide_approval(&self, run_id: &RunId, decision: ApprovalDecided) -> Result<Event> {
        self.pick().decide_approval(run_id, decision).await
    }
}
