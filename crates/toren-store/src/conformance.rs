//! The conformance suite every [`EventLog`] backend must pass.
//!
//! Each check is a `pub async fn` that creates its own runs (fresh ids), so checks can share
//! one store; [`run_all`] runs them one after another. A failed check panics with a message
//! naming the broken rule, so a backend's test is short: build the store reading a shared
//! [`TestClock`] and call `toren_store::conformance::run_all(Arc::new(store), &clock).await`.
//! Checks that involve lease expiry take that clock and move it forward instead of sleeping;
//! every lease they take lasts a minute, far longer than a check runs. The suite is compiled
//! into the library (not `cfg(test)`) so other backends' crates can call it, and it uses
//! nothing but `assert!`. The basic log rules live here; approvals, cancellation, leases,
//! the queries over many runs, claims and concurrent writers have their own modules.
//! [`run_all_workers`] checks a [`WorkerRegistry`](crate::WorkerRegistry) the same way.
//! [`Alternating`] runs the suite through two stores on one database.

mod alternating;
mod approvals;
mod budget;
mod cancel;
mod chats;
mod claims;
mod concurrency;
mod counts;
mod fixtures;
mod leases;
mod queries;
mod sessions;
mod waiting;
mod workers;

use std::sync::Arc;
use std::time::Duration;

use toren_protocol::{EVENT_FORMAT_VERSION, EventKind, RunId, RunStatus};

use crate::clock::after;
use crate::{Error, EventLog, Lease, RunSummary, TestClock};
use fixtures::{
    AGENT, HOLDER, TTL, approval_requested, decision, model_wants_bash, new_run, ok, run_cancelled,
    run_completed, run_created, run_failed, tool_completed, tool_started,
};

pub use alternating::Alternating;
pub use approvals::{
    a_host_approval_is_decided_once_by_its_id, a_host_request_whose_call_ended_is_not_decided,
    a_request_left_behind_by_a_rewind_is_not_decided,
    a_reused_call_id_is_decided_by_its_latest_request, decision_on_ended_run_is_refused,
    decision_without_request_is_refused, first_decision_wins,
    pending_calls_are_decided_independently,
};
pub use budget::a_paused_run_is_raised_once_without_its_lease;
pub use cancel::{
    a_held_run_is_cancelled_without_its_lease, ended_and_unknown_runs_are_not_cancelled,
};
pub use chats::{
    ChatBackend, a_key_taken_without_a_turn_clears_the_reason, a_message_key_makes_one_turn,
    chat_bindings_replace, chat_buttons_resolve_to_the_first_target,
    chat_offsets_only_move_forward, chat_reasons_are_set_and_cleared,
    racing_handlers_of_one_message_make_one_turn, strangers_are_refused_once_and_deliveries_kept,
};
pub use claims::{
    claims_follow_volumes_backends_and_channels, claims_keep_the_per_agent_limit_and_skip,
    claims_pass_over_ended_runs_and_runs_awaiting_approval,
    claims_take_the_oldest_run_and_expired_leases, racing_claimers_never_share_a_run,
};
pub use concurrency::{
    concurrent_appenders_get_one_winner_per_seq, concurrent_decisions_get_one_winner,
    fenced_appenders_race_across_takeovers, racing_acquirers_get_one_lease,
};
pub use counts::runs_are_counted_by_status_and_claimability;
pub use leases::{
    a_dead_holders_lease_can_be_taken_over, a_live_lease_keeps_other_holders_out,
    a_queued_run_is_claimable_at_once, an_expired_lease_can_be_taken_over, approvals_need_no_lease,
    ended_runs_cannot_be_leased, leases_are_renewed_and_released, tokens_strictly_increase,
};
pub use queries::{
    claimable_runs_are_free_unfinished_and_oldest_first,
    pages_neither_skip_nor_repeat_while_runs_are_created, runs_are_filtered_by_status_and_agent,
};
pub use sessions::{
    LogAndSessions, a_queued_message_becomes_exactly_one_turn,
    racing_starts_of_a_queued_message_make_one_turn, racing_turns_get_one_winner,
    removing_a_session_keeps_its_runs, session_names_are_unique_and_sessions_round_trip,
    the_conversation_is_recorded_once_per_turn_and_read_in_order, the_queue_is_first_in_first_out,
    turns_never_interleave_and_are_numbered_in_order,
};
pub use waiting::{
    a_decision_leaves_the_run_waiting_while_another_request_is_open,
    a_request_of_an_earlier_wait_holds_nothing,
};
pub use workers::workers_register_heartbeat_and_expire;

/// Runs every check against `store`, one after another. The store must read `clock` (the
/// lease checks move it forward past expiries). `list_runs_newest_first` expects no other
/// writer to create runs while it runs.
pub async fn run_all(store: Arc<dyn EventLog>, clock: &TestClock) {
    let s = &*store;
    create_and_read_round_trip(s).await;
    duplicate_create_is_refused(s).await;
    seqs_are_gap_free_across_batches(s).await;
    stale_append_conflicts_and_writes_nothing(s).await;
    status_follows_the_events(s).await;
    ended_runs_take_no_events(s).await;
    read_returns_events_after_seq(s).await;
    unknown_run_is_not_found(s).await;
    list_runs_newest_first(s).await;
    first_decision_wins(s).await;
    decision_without_request_is_refused(s).await;
    decision_on_ended_run_is_refused(s).await;
    pending_calls_are_decided_independently(s).await;
    a_reused_call_id_is_decided_by_its_latest_request(s).await;
    a_host_approval_is_decided_once_by_its_id(s).await;
    a_request_left_behind_by_a_rewind_is_not_decided(s).await;
    a_host_request_whose_call_ended_is_not_decided(s).await;
    a_held_run_is_cancelled_without_its_lease(s).await;
    ended_and_unknown_runs_are_not_cancelled(s).await;
    a_paused_run_is_raised_once_without_its_lease(s, clock).await;
    a_decision_leaves_the_run_waiting_while_another_request_is_open(s, clock).await;
    a_request_of_an_earlier_wait_holds_nothing(s, clock).await;
    leases_are_renewed_and_released(s, clock).await;
    a_live_lease_keeps_other_holders_out(s, clock).await;
    an_expired_lease_can_be_taken_over(s, clock).await;
    a_dead_holders_lease_can_be_taken_over(s, clock).await;
    tokens_strictly_increase(s, clock).await;
    ended_runs_cannot_be_leased(s, clock).await;
    approvals_need_no_lease(s, clock).await;
    a_queued_run_is_claimable_at_once(s, clock).await;
    runs_are_filtered_by_status_and_agent(s, clock).await;
    pages_neither_skip_nor_repeat_while_runs_are_created(s, clock).await;
    claimable_runs_are_free_unfinished_and_oldest_first(s, clock).await;
    runs_are_counted_by_status_and_claimability(s, clock).await;
    concurrent_appenders_get_one_winner_per_seq(&store).await;
    concurrent_decisions_get_one_winner(&store).await;
    racing_acquirers_get_one_lease(&store, clock).await;
    fenced_appenders_race_across_takeovers(&store, clock).await;
    claims_take_the_oldest_run_and_expired_leases(s, clock).await;
    claims_pass_over_ended_runs_and_runs_awaiting_approval(s, clock).await;
    claims_follow_volumes_backends_and_channels(s, clock).await;
    claims_keep_the_per_agent_limit_and_skip(s, clock).await;
    racing_claimers_never_share_a_run(&store).await;
}

/// Runs every check of the [`WorkerRegistry`](crate::WorkerRegistry) contract against
/// `registry`, which must read `clock`.
pub async fn run_all_workers(registry: &dyn crate::WorkerRegistry, clock: &TestClock) {
    workers_register_heartbeat_and_expire(registry, clock).await;
}

/// Runs every [`ChatStore`](crate::ChatStore) check against `store` (with the message
/// keys of its [`SessionStore`](crate::SessionStore)); they use fresh names, so other
/// checks may share the store.
pub async fn run_all_chats(store: Arc<dyn ChatBackend>) {
    let s = &*store;
    chats::chat_offsets_only_move_forward(s).await;
    chats::chat_bindings_replace(s).await;
    chats::chat_buttons_resolve_to_the_first_target(s).await;
    chats::chat_reasons_are_set_and_cleared(s).await;
    chats::a_message_key_makes_one_turn(s).await;
    chats::a_key_taken_without_a_turn_clears_the_reason(s).await;
    chats::strangers_are_refused_once_and_deliveries_kept(s).await;
    chats::a_queued_key_stays_with_its_turn(s).await;
    chats::racing_handlers_of_one_message_make_one_turn(store).await;
}

/// Runs every [`SessionStore`](crate::SessionStore) check against `store`, one after
/// another; they make sessions with fresh names, so other checks may share the store.
pub async fn run_all_sessions(store: Arc<dyn LogAndSessions>) {
    let s = &*store;
    session_names_are_unique_and_sessions_round_trip(s).await;
    turns_never_interleave_and_are_numbered_in_order(s).await;
    the_conversation_is_recorded_once_per_turn_and_read_in_order(s).await;
    the_queue_is_first_in_first_out(s).await;
    removing_a_session_keeps_its_runs(s).await;
    racing_turns_get_one_winner(&store).await;
    a_queued_message_becomes_exactly_one_turn(s).await;
    racing_starts_of_a_queued_message_make_one_turn(&store).await;
}

/// What `create_run` and `append` return is exactly what `read` gives back, and the
/// summary agrees with the log.
pub async fn create_and_read_round_trip(store: &dyn EventLog) {
    let run_id = RunId::new();
    let (created, lease) = ok(
        store
            .create_run(&run_id, run_created("list the files"), HOLDER, TTL)
            .await,
        "create",
    );
    assert_eq!(
        lease,
        Lease {
            run_id: run_id.clone(),
            token: 1,
            holder: HOLDER.to_owned(),
            expires_at: after(created.at, TTL),
        },
        "the creator gets the run's first lease, expiring ttl after run_created"
    );
    assert_eq!(created.run_id, run_id, "run_created must carry the run id");
    assert_eq!(created.seq, 1, "run_created must be event #1");
    assert_eq!(
        created.v, EVENT_FORMAT_VERSION,
        "new events carry the current format version"
    );
    assert_eq!(
        created.kind,
        EventKind::RunCreated(run_created("list the files"))
    );

    let batch = vec![
        model_wants_bash("toolu_01", "ls -la"),
        approval_requested("toolu_01"),
    ];
    let appended = ok(store.append(&lease, 1, batch.clone()).await, "append");
    let kinds: Vec<EventKind> = appended.iter().map(|e| e.kind.clone()).collect();
    assert_eq!(
        kinds, batch,
        "append must return the events it was given, in order"
    );

    let mut expected = vec![created.clone()];
    expected.extend(appended.iter().cloned());
    let read = ok(store.read(&run_id, 0).await, "read");
    assert_eq!(
        read, expected,
        "read must return exactly the events create/append returned"
    );

    let summary = ok(store.run(&run_id).await, "run");
    assert_eq!(
        summary,
        RunSummary {
            id: run_id,
            agent: AGENT.to_owned(),
            status: RunStatus::AwaitingApproval,
            created_at: created.at,
            updated_at: appended[1].at,
            last_seq: 3,
            lease: Some(lease.info()),
        },
        "the summary must follow the log"
    );
}

pub async fn duplicate_create_is_refused(store: &dyn EventLog) {
    let (run_id, created, lease) = new_run(store, "first").await;
    let again = store
        .create_run(&run_id, run_created("second"), "intruder:2", TTL)
        .await;
    assert!(
        matches!(&again, Err(Error::RunExists(id)) if *id == run_id),
        "creating an existing run must fail with RunExists, got {again:?}"
    );
    let read = ok(store.read(&run_id, 0).await, "read");
    assert_eq!(
        read,
        vec![created],
        "a refused create must leave the first run untouched"
    );
    assert_eq!(
        ok(store.run(&run_id).await, "run").lease,
        Some(lease.info()),
        "and its lease"
    );
}

pub async fn seqs_are_gap_free_across_batches(store: &dyn EventLog) {
    let (run_id, _, lease) = new_run(store, "count").await;
    let mut last = 1;
    for size in [1_usize, 3, 2] {
        let batch: Vec<EventKind> = (0..size)
            .map(|i| tool_started(&format!("toolu_{last}_{i}")))
            .collect();
        let events = ok(store.append(&lease, last, batch).await, "append batch");
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        let want: Vec<u64> = (last + 1..=last + size as u64).collect();
        assert_eq!(seqs, want, "a batch must take the next consecutive seqs");
        last += size as u64;
    }
    let empty = ok(
        store.append(&lease, last, Vec::new()).await,
        "append empty batch",
    );
    assert!(empty.is_empty(), "an empty batch appends nothing");

    let seqs: Vec<u64> = ok(store.read(&run_id, 0).await, "read")
        .iter()
        .map(|e| e.seq)
        .collect();
    assert_eq!(
        seqs,
        (1..=7).collect::<Vec<u64>>(),
        "the log must be 1..=7 without gaps"
    );
    assert_eq!(
        ok(store.run(&run_id).await, "run").last_seq,
        7,
        "last_seq must follow the log"
    );
}

pub async fn stale_append_conflicts_and_writes_nothing(store: &dyn EventLog) {
    let (run_id, _, lease) = new_run(store, "race").await;
    ok(
        store
            .append(&lease, 1, vec![tool_started("a"), tool_completed("a")])
            .await,
        "append",
    );
    let before = ok(store.read(&run_id, 0).await, "read");
    let summary_before = ok(store.run(&run_id).await, "run");

    for stale in [0, 1, 2, 4, 9] {
        let result = store
            .append(&lease, stale, vec![tool_started("late")])
            .await;
        assert!(
            matches!(&result, Err(Error::Conflict { run_id: id, expected, actual: 3 })
                if *id == run_id && *expected == stale),
            "append after #{stale} when the log is at #3 must be a Conflict, got {result:?}"
        );
    }
    assert_eq!(
        ok(store.read(&run_id, 0).await, "read"),
        before,
        "a conflict writes nothing"
    );
    assert_eq!(
        ok(store.run(&run_id).await, "run"),
        summary_before,
        "nor touches the run"
    );
}

pub async fn status_follows_the_events(store: &dyn EventLog) {
    let (run_id, _, lease) = new_run(store, "status").await;
    let status = |s: RunSummary| s.status;
    // Created and nothing done yet: it waits for a worker.
    assert_eq!(
        status(ok(store.run(&run_id).await, "run")),
        RunStatus::Queued
    );

    let steps: Vec<(EventKind, RunStatus)> = vec![
        (model_wants_bash("toolu_s", "ls"), RunStatus::Running),
        (approval_requested("toolu_s"), RunStatus::AwaitingApproval),
    ];
    let mut last = 1;
    for (kind, want) in steps {
        let name = kind.name();
        ok(store.append(&lease, last, vec![kind]).await, name);
        last += 1;
        assert_eq!(
            status(ok(store.run(&run_id).await, "run")),
            want,
            "status after {name}"
        );
    }
    ok(
        store
            .decide_approval(&run_id, decision("toolu_s", true, "ana"))
            .await,
        "decide",
    );
    last += 1;
    assert_eq!(
        status(ok(store.run(&run_id).await, "run")),
        RunStatus::Running,
        "after decision"
    );
    ok(
        store
            .append(
                &lease,
                last,
                vec![tool_started("toolu_s"), tool_completed("toolu_s")],
            )
            .await,
        "tool",
    );
    last += 2;
    assert_eq!(
        status(ok(store.run(&run_id).await, "run")),
        RunStatus::Running,
        "after the tool"
    );
    ok(
        store.append(&lease, last, vec![run_completed()]).await,
        "complete",
    );
    assert_eq!(
        status(ok(store.run(&run_id).await, "run")),
        RunStatus::Completed
    );

    for (end, want) in [
        (run_failed(), RunStatus::Failed),
        (run_cancelled(), RunStatus::Cancelled),
    ] {
        let (run_id, _, lease) = new_run(store, "ending").await;
        ok(store.append(&lease, 1, vec![end]).await, "end");
        assert_eq!(status(ok(store.run(&run_id).await, "run")), want);
    }
}

pub async fn ended_runs_take_no_events(store: &dyn EventLog) {
    let (run_id, _, lease) = new_run(store, "finish").await;
    ok(
        store.append(&lease, 1, vec![run_completed()]).await,
        "complete",
    );
    let after = store.append(&lease, 2, vec![tool_started("late")]).await;
    assert!(
        matches!(
            &after,
            Err(Error::RunEnded {
                status: RunStatus::Completed,
                ..
            })
        ),
        "appending to a completed run must fail with RunEnded, got {after:?}"
    );
    assert_eq!(
        ok(store.run(&run_id).await, "run").last_seq,
        2,
        "nothing written after the end"
    );

    // A batch that ends the run and goes on is refused whole.
    let (run_id, created, lease) = new_run(store, "overrun").await;
    let batch = vec![tool_started("x"), run_failed(), tool_completed("x")];
    let overrun = store.append(&lease, 1, batch).await;
    assert!(
        matches!(
            &overrun,
            Err(Error::RunEnded {
                status: RunStatus::Failed,
                ..
            })
        ),
        "a batch with events after its terminal event must fail with RunEnded, got {overrun:?}"
    );
    assert_eq!(
        ok(store.read(&run_id, 0).await, "read"),
        vec![created],
        "a refused batch is atomic"
    );
    assert_eq!(
        ok(store.run(&run_id).await, "run").status,
        RunStatus::Queued
    );
}

pub async fn read_returns_events_after_seq(store: &dyn EventLog) {
    let (run_id, _, lease) = new_run(store, "page").await;
    let batch = vec![tool_started("p"), tool_completed("p"), run_completed()];
    ok(store.append(&lease, 1, batch).await, "append");
    let all = ok(store.read(&run_id, 0).await, "read all");
    assert_eq!(all.len(), 4);
    for after in 0..=4_u64 {
        let page = ok(store.read(&run_id, after).await, "read after");
        assert_eq!(page, all[after as usize..].to_vec(), "read after #{after}");
    }
    assert!(ok(store.read(&run_id, 40).await, "read past the end").is_empty());
}

pub async fn unknown_run_is_not_found(store: &dyn EventLog) {
    let ghost = RunId::new();
    let lease = Lease {
        run_id: ghost.clone(),
        token: 1,
        holder: HOLDER.to_owned(),
        expires_at: jiff::Timestamp::MAX,
    };
    let (approve, started) = (decision("x", true, "ana"), vec![tool_started("x")]);
    let results = [
        ("read", store.read(&ghost, 0).await.map(drop)),
        ("run", store.run(&ghost).await.map(drop)),
        ("append", store.append(&lease, 0, started).await.map(drop)),
        (
            "decide",
            store.decide_approval(&ghost, approve).await.map(drop),
        ),
        (
            "acquire",
            store.acquire_lease(&ghost, HOLDER, TTL).await.map(drop),
        ),
        ("renew", store.renew_lease(&lease, TTL).await.map(drop)),
        ("release", store.release_lease(&lease).await),
    ];
    for (call, result) in results {
        assert!(
            matches!(&result, Err(Error::RunNotFound(id)) if *id == ghost),
            "{call} on an unknown run must fail with RunNotFound, got {result:?}"
        );
    }
}

pub async fn list_runs_newest_first(store: &dyn EventLog) {
    let mut ids = Vec::new();
    for input in ["oldest", "middle", "newest"] {
        // Run ids order by millisecond; keep creation times and ids apart.
        tokio::time::sleep(Duration::from_millis(3)).await;
        ids.push(new_run(store, input).await.0);
    }
    ids.reverse();
    let listed = ok(store.list_runs(3).await, "list_runs");
    let listed_ids: Vec<RunId> = listed.iter().map(|s| s.id.clone()).collect();
    assert_eq!(listed_ids, ids, "list_runs must put the newest run first");
    for summary in &listed {
        assert_eq!(
            *summary,
            ok(store.run(&summary.id).await, "run"),
            "list and run agree"
        );
    }
    let two = ok(store.list_runs(2).await, "list_runs(2)");
    assert_eq!(two, listed[..2].to_vec(), "list_runs must honour the limit");
}
