//! Conformance check for [`EventLog::count_runs`]: runs are counted by status, and a run
//! counts as claimable exactly while a worker could claim it (`queued` or `running`, with no
//! live lease). The check works on a store other checks have written to: it compares
//! counts before and after its own runs.

use std::collections::HashMap;

use toren_protocol::RunStatus;

use super::fixtures::{
    PAST_TTL, TTL, approval_requested, model_wants_bash, new_run, ok, run_completed,
};
use crate::{EventLog, RunCounts, TestClock};

/// What changed from `before` to `after` (statuses whose count did not change are left
/// out; counts only grow here).
fn growth(before: &RunCounts, after: &RunCounts) -> RunCounts {
    let by_status: HashMap<RunStatus, u64> = after
        .by_status
        .iter()
        .map(|(status, n)| (*status, n.saturating_sub(before.of(*status))))
        .filter(|(_, n)| *n > 0)
        .collect();
    RunCounts {
        by_status,
        claimable: after.claimable.saturating_sub(before.claimable),
    }
}

pub async fn runs_are_counted_by_status_and_claimability(store: &dyn EventLog, clock: &TestClock) {
    // A run whose lease expires: its driver stopped renewing.
    let (_, _, expired) = new_run(store, "expired").await;
    // Every lease granted so far expires, so what earlier checks left behind does not
    // change under this check (leases granted from now on are live).
    clock.advance(PAST_TTL);
    let before = ok(store.count_runs().await, "count_runs");

    let (_, _, _held) = new_run(store, "held").await;
    let (_, _, released) = new_run(store, "released").await;
    ok(store.release_lease(&released).await, "release");
    let (_, _, waiting) = new_run(store, "waiting").await;
    let asks = vec![
        model_wants_bash("toolu_c", "ls"),
        approval_requested("toolu_c"),
    ];
    ok(store.append(&waiting, 1, asks).await, "ask");
    ok(
        store.release_lease(&waiting).await,
        "release the waiting run",
    );
    let (_, _, done) = new_run(store, "done").await;
    ok(
        store.append(&done, 1, vec![run_completed()]).await,
        "complete",
    );

    let after = ok(store.count_runs().await, "count_runs");
    assert_eq!(
        growth(&before, &after),
        RunCounts {
            by_status: HashMap::from([
                // Created, nothing done yet: waiting for a worker.
                (RunStatus::Queued, 2),
                (RunStatus::AwaitingApproval, 1),
                (RunStatus::Completed, 1),
            ]),
            // Only the released run: a live lease, a person to answer or an end keep the
            // others from any worker.
            claimable: 1,
        },
        "four runs counted by status; only the released queued one is claimable"
    );

    // The expired lease was counted claimable: renewed by its holder, it no longer is.
    ok(
        store.renew_lease(&expired, TTL).await,
        "renew the expired lease",
    );
    let renewed = ok(store.count_runs().await, "count_runs");
    assert_eq!(
        renewed.claimable + 1,
        after.claimable,
        "a run whose expired lease is renewed is held again, not claimable"
    );
    assert_eq!(
        renewed.by_status, after.by_status,
        "leases do not move statuses"
    );

    // Once the live leases expire, the held run is claimable too (and the renewed one).
    clock.advance(PAST_TTL);
    let later = ok(store.count_runs().await, "count_runs");
    assert_eq!(
        later.claimable,
        after.claimable + 1,
        "an expired lease makes a running run claimable; awaiting or ended runs never are"
    );
}
