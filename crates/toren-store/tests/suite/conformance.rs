//! The conformance suite against real SQLite files: each check on a fresh file, the whole
//! suite on one shared file, and the whole suite through two separate stores (two pools,
//! as two processes would have) on one file. Every store reads a shared `TestClock`.

use std::sync::Arc;

use toren_store::conformance::Alternating;
use toren_store::{SqliteStore, TestClock, conformance};

use super::common::{temp_store_with_clock, url_in};

macro_rules! check_on_fresh_file {
    ($($check:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $check() {
            let (_dir, store, _clock) = temp_store_with_clock().await;
            conformance::$check(&store).await;
        }
    )*};
}

macro_rules! check_with_clock_on_fresh_file {
    ($($check:ident),* $(,)?) => {$(
        #[tokio::test(flavor = "multi_thread", worker_threads = 4)]
        async fn $check() {
            let (_dir, store, clock) = temp_store_with_clock().await;
            conformance::$check(&store, &clock).await;
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

check_with_clock_on_fresh_file!(
    leases_are_renewed_and_released,
    a_live_lease_keeps_other_holders_out,
    an_expired_lease_can_be_taken_over,
    a_dead_holders_lease_can_be_taken_over,
    tokens_strictly_increase,
    ended_runs_cannot_be_leased,
    approvals_need_no_lease,
    a_decision_leaves_the_run_waiting_while_another_request_is_open,
    a_request_of_an_earlier_wait_holds_nothing,
    a_queued_run_is_claimable_at_once,
    runs_are_filtered_by_status_and_agent,
    pages_neither_skip_nor_repeat_while_runs_are_created,
    claimable_runs_are_free_unfinished_and_oldest_first,
    runs_are_counted_by_status_and_claimability,
    claims_take_the_oldest_run_and_expired_leases,
    claims_pass_over_ended_runs_and_runs_awaiting_approval,
    claims_follow_volumes_backends_and_channels,
    claims_keep_the_per_agent_limit_and_skip,
);

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_claimers_never_share_a_run() {
    let (_dir, store, _clock) = temp_store_with_clock().await;
    conformance::racing_claimers_never_share_a_run(&(Arc::new(store) as _)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_claimers_through_two_stores_never_share_a_run() {
    let (_dir, store, _clock) = two_stores_on_one_file().await;
    conformance::racing_claimers_never_share_a_run(&(Arc::new(store) as _)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn worker_registry() {
    let (_dir, store, clock) = temp_store_with_clock().await;
    conformance::run_all_workers(&store, &clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn chat_store() {
    let (_dir, store, _clock) = temp_store_with_clock().await;
    conformance::run_all_chats(Arc::new(store)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_appenders_get_one_winner_per_seq() {
    let (_dir, store, _clock) = temp_store_with_clock().await;
    conformance::concurrent_appenders_get_one_winner_per_seq(&(Arc::new(store) as _)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn concurrent_decisions_get_one_winner() {
    let (_dir, store, _clock) = temp_store_with_clock().await;
    conformance::concurrent_decisions_get_one_winner(&(Arc::new(store) as _)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn racing_acquirers_through_two_stores_get_one_lease() {
    let (_dir, store, clock) = two_stores_on_one_file().await;
    conformance::racing_acquirers_get_one_lease(&(Arc::new(store) as _), &clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn fenced_appenders_through_two_stores_race_across_takeovers() {
    let (_dir, store, clock) = two_stores_on_one_file().await;
    conformance::fenced_appenders_race_across_takeovers(&(Arc::new(store) as _), &clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn whole_suite_on_one_file() {
    let (_dir, store, clock) = temp_store_with_clock().await;
    conformance::run_all(Arc::new(store), &clock).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn whole_suite_through_two_stores_on_one_file() {
    let (_dir, store, clock) = two_stores_on_one_file().await;
    conformance::run_all(Arc::new(store), &clock).await;
}

/// Two stores opened separately on one new file, both reading one clock.
async fn two_stores_on_one_file() -> (tempfile::TempDir, Alternating, Arc<TestClock>) {
    let dir = tempfile::tempdir().unwrap();
    let clock = Arc::new(TestClock::new());
    let open = || async {
        SqliteStore::open(&url_in(&dir))
            .await
            .unwrap()
            .with_clock(clock.clone())
    };
    let alternating = Alternating::new(Arc::new(open().await), Arc::new(open().await));
    (dir, alternating, clock)
}
