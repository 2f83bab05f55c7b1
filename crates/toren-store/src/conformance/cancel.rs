//! Conformance checks for [`EventLog::cancel_run`]: any caller may cancel a run that has not
//! ended, whoever holds it; the cancellation ends the run, fences its holder off and takes
//! the next seq; an ended or unknown run cannot be cancelled.

use toren_protocol::{EventKind, RunCancelled, RunId, RunStatus};

use super::fixtures::{HOLDER, TTL, approval_requested, new_run, ok, run_completed};
use crate::{Error, EventLog};

fn cancelled(by: &str) -> RunCancelled {
    RunCancelled {
        reason: "no longer needed".to_owned(),
        by: Some(by.to_owned()),
        via: Some("cli".to_owned()),
    }
}

pub async fn a_held_run_is_cancelled_without_its_lease(store: &dyn EventLog) {
    let (run_id, _, lease) = new_run(store, "cancel me").await;
    ok(
        store
            .append(&lease, 1, vec![approval_requested("toolu_c")])
            .await,
        "request",
    );
    let event = ok(store.cancel_run(&run_id, cancelled("ana")).await, "cancel");
    assert_eq!(event.seq, 3, "the cancellation takes the next seq");
    assert_eq!(event.kind, EventKind::RunCancelled(cancelled("ana")));
    let summary = ok(store.run(&run_id).await, "run");
    assert_eq!(summary.status, RunStatus::Cancelled);
    assert!(summary.lease.is_none(), "a cancelled run holds no lease");

    // Its driver is fenced off: whatever it saw, it cannot write again.
    let late = store.append(&lease, 3, vec![run_completed()]).await;
    assert!(
        matches!(late, Err(Error::RunEnded { .. })),
        "an append after the cancellation must fail with RunEnded, got {late:?}"
    );
    let renew = store.renew_lease(&lease, TTL).await;
    assert!(
        matches!(renew, Err(Error::RunEnded { .. })),
        "renewing after the cancellation must fail with RunEnded, got {renew:?}"
    );
    let lease_again = store.acquire_lease(&run_id, HOLDER, TTL).await;
    assert!(
        matches!(lease_again, Err(Error::RunEnded { .. })),
        "a cancelled run cannot be leased (resumed), got {lease_again:?}"
    );
}

pub async fn ended_and_unknown_runs_are_not_cancelled(store: &dyn EventLog) {
    let (run_id, _, lease) = new_run(store, "finished").await;
    ok(
        store.append(&lease, 1, vec![run_completed()]).await,
        "complete",
    );
    let again = store.cancel_run(&run_id, cancelled("bo")).await;
    assert!(
        matches!(again, Err(Error::RunEnded { .. })),
        "cancelling an ended run must fail with RunEnded, got {again:?}"
    );
    assert_eq!(
        ok(store.read(&run_id, 0).await, "read").len(),
        2,
        "a refused cancellation writes nothing"
    );

    let ghost = RunId::new();
    let result = store.cancel_run(&ghost, cancelled("bo")).await;
    assert!(
        matches!(result, Err(Error::RunNotFound { .. })),
        "cancelling an unknown run must fail with RunNotFound, got {result:?}"
    );
}
