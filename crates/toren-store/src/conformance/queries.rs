//! Conformance checks for the queries over many runs: [`EventLog::query_runs`] filters by
//! status and agent and pages newest first with a keyset cursor that neither skips nor
//! repeats runs while others are created; [`EventLog::claimable_runs`] gives the runs a
//! worker may take, oldest first, and never an ended run, one awaiting approval or one
//! somebody drives. Each check makes runs of an agent of its own (the store may hold other
//! checks' runs) and moves the [`TestClock`] a millisecond between creations so creation
//! times differ.

use std::time::Duration;

use toren_protocol::{RunCancelled, RunId, RunStatus};

use super::fixtures::{
    HOLDER, PAST_TTL, approval_requested, decision, new_run_of, ok, run_completed, run_failed,
};
use crate::{
    ClaimLeases, ClaimQuery, Clock, EventLog, Lease, RunCursor, RunPage, RunQuery, RunSummary,
    TestClock,
};

/// An agent name no other check (or earlier call of this one) uses.
fn fresh_agent(check: &str) -> String {
    format!("{check}-{}", RunId::new())
}

/// A new run of `agent`, a millisecond after the previous one by `clock`.
async fn next_run(
    store: &dyn EventLog,
    clock: &TestClock,
    agent: &str,
    input: &str,
) -> (RunId, Lease) {
    clock.advance(Duration::from_millis(1));
    new_run_of(store, agent, input).await
}

fn ids(runs: &[RunSummary]) -> Vec<RunId> {
    runs.iter().map(|r| r.id.clone()).collect()
}

async fn page(store: &dyn EventLog, query: RunQuery, step: &str) -> RunPage {
    ok(store.query_runs(&query).await, step)
}

pub async fn runs_are_filtered_by_status_and_agent(store: &dyn EventLog, clock: &TestClock) {
    let (a, b) = (fresh_agent("filter-a"), fresh_agent("filter-b"));
    let (done, lease) = next_run(store, clock, &a, "one").await;
    ok(store.append(&lease, 1, vec![run_completed()]).await, "end");
    let (cancelled, _) = next_run(store, clock, &a, "two").await;
    ok(store.cancel_run(&cancelled, cancel()).await, "cancel");
    let (waiting, lease) = next_run(store, clock, &a, "three").await;
    ok(
        store
            .append(&lease, 1, vec![approval_requested("toolu_f")])
            .await,
        "request",
    );
    let (running, _) = next_run(store, clock, &b, "four").await;
    let (failed, lease) = next_run(store, clock, &b, "five").await;
    ok(store.append(&lease, 1, vec![run_failed()]).await, "fail");

    let query = |agent: &str, statuses: &[RunStatus]| RunQuery {
        statuses: statuses.to_vec(),
        agent: Some(agent.to_owned()),
        limit: 100,
        after: None,
    };
    use RunStatus::{AwaitingApproval, Cancelled, Completed, Failed, Queued};
    let cases: Vec<(RunQuery, Vec<RunId>, &str)> = vec![
        (
            query(&a, &[]),
            vec![waiting.clone(), cancelled.clone(), done.clone()],
            "every run of agent a, newest first",
        ),
        (
            query(&a, &[Completed]),
            vec![done.clone()],
            "completed of a",
        ),
        (
            query(&a, &[Completed, Cancelled]),
            vec![cancelled.clone(), done.clone()],
            "completed or cancelled of a",
        ),
        (
            query(&a, &[AwaitingApproval]),
            vec![waiting.clone()],
            "awaiting approval of a",
        ),
        (query(&b, &[AwaitingApproval]), vec![], "none of b waits"),
        (
            query(&b, &[Queued, Failed]),
            vec![failed.clone(), running.clone()],
            "queued (created, nothing done yet) or failed of b",
        ),
        (query(&fresh_agent("nobody"), &[]), vec![], "unknown agent"),
    ];
    for (query, want, what) in cases {
        let got = page(store, query, what).await;
        assert_eq!(ids(&got.runs), want, "query_runs: {what}");
        assert_eq!(got.next, None, "{what}: everything fit, so no next page");
        for summary in &got.runs {
            assert_eq!(
                *summary,
                ok(store.run(&summary.id).await, "run"),
                "query_runs and run agree"
            );
        }
    }

    // By status alone, across agents (other checks' runs may be there too).
    let failed_runs = page(
        store,
        RunQuery {
            statuses: vec![Failed],
            limit: 10_000,
            ..RunQuery::default()
        },
        "failed of any agent",
    )
    .await;
    assert!(
        failed_runs.runs.iter().any(|r| r.id == failed),
        "a status filter without an agent finds the failed run"
    );
    assert!(
        failed_runs.runs.iter().all(|r| r.status == Failed),
        "and only failed runs"
    );
    let empty = page(
        store,
        RunQuery {
            agent: Some(a),
            limit: 0,
            ..RunQuery::default()
        },
        "limit 0",
    )
    .await;
    assert_eq!(
        empty,
        RunPage {
            runs: vec![],
            next: None
        },
        "a limit of 0 gives an empty page"
    );
}

pub async fn pages_neither_skip_nor_repeat_while_runs_are_created(
    store: &dyn EventLog,
    clock: &TestClock,
) {
    let agent = fresh_agent("pages");
    let mut created = Vec::new();
    for i in 0..5 {
        created.push(next_run(store, clock, &agent, &format!("run {i}")).await);
    }
    let newest_first: Vec<RunId> = created.iter().rev().map(|(id, _)| id.clone()).collect();
    let query = |after: Option<RunCursor>, limit| RunQuery {
        statuses: vec![],
        agent: Some(agent.clone()),
        limit,
        after,
    };

    let first = page(store, query(None, 2), "page 1").await;
    assert_eq!(ids(&first.runs), newest_first[..2].to_vec(), "page 1");
    let Some(cursor) = first.next.clone() else {
        panic!("page 1 of 5 runs by twos must say that more follow");
    };
    assert_eq!(
        cursor,
        RunCursor::after(&first.runs[1]),
        "the page's last run"
    );

    // New runs arrive between pages: they are newer, so they come before the cursor.
    let mut newer = Vec::new();
    for i in 5..7 {
        newer.push(next_run(store, clock, &agent, &format!("run {i}")).await.0);
    }
    // Clients pass the cursor back as its encoded token.
    let cursor = ok(RunCursor::decode(&cursor.encode()), "decode the cursor");
    let second = page(store, query(Some(cursor), 2), "page 2").await;
    assert_eq!(ids(&second.runs), newest_first[2..4].to_vec(), "page 2");
    let third = page(store, query(second.next.clone(), 2), "page 3").await;
    assert_eq!(ids(&third.runs), newest_first[4..].to_vec(), "page 3");
    assert_eq!(
        third.next, None,
        "the last page says so, even when it is not full"
    );

    // A page that ends exactly at the last run has no next page either.
    let exact = page(store, query(None, 7), "all seven").await;
    let mut all: Vec<RunId> = newer.iter().rev().cloned().collect();
    all.extend(newest_first.iter().cloned());
    assert_eq!(ids(&exact.runs), all, "the new runs first, then the rest");
    assert_eq!(exact.next, None, "exactly full, nothing after it");

    // Filters hold across pages: one run ends, the queued ones page on without it.
    let (ended, lease) = &created[2];
    ok(
        store.append(lease, 1, vec![run_completed()]).await,
        "end one",
    );
    let mut running = Vec::new();
    let mut after = None;
    loop {
        let page = page(
            store,
            RunQuery {
                statuses: vec![RunStatus::Queued],
                agent: Some(agent.clone()),
                limit: 2,
                after,
            },
            "queued, by twos",
        )
        .await;
        running.extend(ids(&page.runs));
        match page.next {
            Some(next) => after = Some(next),
            None => break,
        }
    }
    let want: Vec<RunId> = all.into_iter().filter(|id| id != ended).collect();
    assert_eq!(running, want, "every queued run once, newest first");
}

pub async fn claimable_runs_are_free_unfinished_and_oldest_first(
    store: &dyn EventLog,
    clock: &TestClock,
) {
    let agent = fresh_agent("claim");
    // Before the clock jumps: these leases will have expired.
    let (expired, _) = next_run(store, clock, &agent, "abandoned").await;
    let (waiting_expired, lease) = next_run(store, clock, &agent, "waits, abandoned").await;
    ok(
        store
            .append(&lease, 1, vec![approval_requested("toolu_w")])
            .await,
        "request",
    );
    let (completed, lease) = next_run(store, clock, &agent, "done").await;
    ok(store.append(&lease, 1, vec![run_completed()]).await, "end");
    let (failed, lease) = next_run(store, clock, &agent, "failed").await;
    ok(store.append(&lease, 1, vec![run_failed()]).await, "fail");
    let (cancelled, _) = next_run(store, clock, &agent, "cancelled").await;
    ok(store.cancel_run(&cancelled, cancel()).await, "cancel");
    clock.advance(PAST_TTL);

    let (released, lease) = next_run(store, clock, &agent, "queued").await;
    ok(store.release_lease(&lease).await, "release");
    let (waiting, lease) = next_run(store, clock, &agent, "waits").await;
    ok(
        store
            .append(&lease, 1, vec![approval_requested("toolu_x")])
            .await,
        "request",
    );
    ok(store.release_lease(&lease).await, "release");
    let mut decided = Vec::new();
    for approved in [true, false] {
        let (run, lease) = next_run(store, clock, &agent, "decided").await;
        ok(
            store
                .append(&lease, 1, vec![approval_requested("toolu_d")])
                .await,
            "request",
        );
        ok(store.release_lease(&lease).await, "release");
        ok(
            store
                .decide_approval(&run, decision("toolu_d", approved, "ana"))
                .await,
            "decide",
        );
        assert_eq!(
            ok(store.run(&run).await, "run").status,
            RunStatus::Running,
            "a decision (approved: {approved}) makes the run running again"
        );
        decided.push(run);
    }
    let (live, _) = next_run(store, clock, &agent, "driven").await;
    let (live_waiting, lease) = next_run(store, clock, &agent, "driven, waits").await;
    ok(
        store
            .append(&lease, 1, vec![approval_requested("toolu_l")])
            .await,
        "request",
    );

    let mine = [
        &expired,
        &waiting_expired,
        &completed,
        &failed,
        &cancelled,
        &released,
        &waiting,
        &decided[0],
        &decided[1],
        &live,
        &live_waiting,
    ];
    let of_mine = |runs: &[RunSummary]| -> Vec<RunId> {
        ids(runs)
            .into_iter()
            .filter(|id| mine.contains(&id))
            .collect()
    };

    let all = ok(
        store.claimable_runs(&ClaimQuery::free(100_000)).await,
        "claimable",
    );
    assert_eq!(
        of_mine(&all),
        vec![
            expired.clone(),
            released.clone(),
            decided[0].clone(),
            decided[1].clone()
        ],
        "claimable: the expired, the released and the decided runs, oldest first; never an \
         ended run, one awaiting approval (lease or not) or one with a live lease"
    );
    let now = clock.now();
    for run in &all {
        assert!(
            matches!(run.status, RunStatus::Queued | RunStatus::Running),
            "claimable {} is {}",
            run.id,
            run.status
        );
        assert!(
            run.lease.as_ref().is_none_or(|l| !l.is_live(now)),
            "claimable {} has a live lease",
            run.id
        );
        assert_eq!(*run, ok(store.run(&run.id).await, "run"), "summaries agree");
    }
    let order: Vec<_> = all.iter().map(|r| (r.created_at, r.id.clone())).collect();
    let mut sorted = order.clone();
    sorted.sort();
    assert_eq!(order, sorted, "claimable runs come oldest first");
    for limit in [1_u32, 2] {
        let some = ok(
            store.claimable_runs(&ClaimQuery::free(limit)).await,
            "claimable, limited",
        );
        let want = (limit as usize).min(all.len());
        assert_eq!(
            ids(&some),
            ids(&all[..want]),
            "claimable honours the limit {limit}, from the oldest"
        );
    }

    let held = |suffix: &str| ClaimQuery {
        limit: 100_000,
        leases: ClaimLeases::LiveHeldBySuffix(suffix.to_owned()),
    };
    let suffix = &HOLDER[HOLDER.len() - 5..];
    let by_suffix = ok(store.claimable_runs(&held(suffix)).await, "held by suffix");
    assert_eq!(
        of_mine(&by_suffix),
        vec![live.clone()],
        "live leases held by a name ending in {suffix}: the driven run, not the one that \
         waits for a person, nor free or expired ones"
    );
    assert!(
        by_suffix
            .iter()
            .all(|r| r.lease.as_ref().is_some_and(|l| l.holder.ends_with(suffix))),
        "only holders with the suffix"
    );
    let whole = ok(store.claimable_runs(&held(HOLDER)).await, "whole name");
    assert_eq!(
        of_mine(&whole),
        vec![live.clone()],
        "the whole name is a suffix"
    );
    for other in ["-elsewhere:1001", "x", &format!("x{HOLDER}")] {
        let none = ok(store.claimable_runs(&held(other)).await, "other suffix");
        assert_eq!(
            of_mine(&none),
            Vec::<RunId>::new(),
            "no run of mine is held by a name ending in {other}"
        );
    }
}

fn cancel() -> RunCancelled {
    RunCancelled {
        reason: "not needed after all".to_owned(),
        by: Some("ana".to_owned()),
        via: Some("cli".to_owned()),
    }
}
