//! A decision while the run waits on more than one request: the run stays
//! `awaiting_approval`, and so unclaimed, until nothing of its current wait is open; a
//! request of an earlier wait (a host whose connection gave up before its command ended)
//! holds nothing; a decision leaves a run paused at its budget paused.

use toren_protocol::{
    BudgetLimit, BudgetLimits, BudgetReached, EventKind, HostApprovalRequested, RunId, RunStatus,
    Spending,
};

use super::fixtures::{
    HOLDER, TTL, approval_requested, decision, model_wants_bash, ok, run_created, tool_completed,
    tool_started,
};
use crate::{ClaimRequest, Error, EventLog, Lease, TestClock};

fn host(name: &str) -> EventKind {
    EventKind::HostApprovalRequested(HostApprovalRequested::new(
        name,
        443,
        Some(("toolu_b".into(), "make deps".into())),
    ))
}

/// A run of its own agent (so a claim can pick exactly it) whose bash call `toolu_b` has
/// started; the lease and the claim request that finds only this run.
async fn running_call(store: &dyn EventLog, input: &str) -> (RunId, Lease, ClaimRequest) {
    let agent = format!("waiting-{}", RunId::new());
    let mut created = run_created(input);
    created.agent.name.clone_from(&agent);
    let run = RunId::new();
    let (_, lease) = ok(store.create_run(&run, created, HOLDER, TTL).await, "create");
    let kinds = vec![
        model_wants_bash("toolu_b", "make deps"),
        tool_started("toolu_b"),
    ];
    ok(store.append(&lease, 1, kinds).await, "the call starts");
    let claim = ClaimRequest {
        backends: vec!["local".to_owned()],
        agents: vec![agent],
        ..ClaimRequest::new("waiting-claimer", TTL)
    };
    (run, lease, claim)
}

#[track_caller]
fn expect(status: RunStatus, run: &crate::RunSummary, why: &str) {
    assert_eq!(run.status, status, "{why}");
}

pub async fn a_decision_leaves_the_run_waiting_while_another_request_is_open(
    store: &dyn EventLog,
    clock: &TestClock,
) {
    // The driver was killed while a host waited; on resume (`on_interrupt: ask`) the
    // re-run of the call needs approval, and the run is parked (no lease).
    let (run, lease, claim) = running_call(store, "killed while a host waited").await;
    let kinds = vec![host("a.test"), approval_requested("toolu_b")];
    ok(
        store.append(&lease, 3, kinds).await,
        "host, then the re-run's request",
    );
    ok(store.release_lease(&lease).await, "parked");
    clock.advance(std::time::Duration::from_secs(1));
    ok(
        store
            .decide_approval(&run, decision("host:a.test", true, "ana"))
            .await,
        "the host",
    );
    expect(
        RunStatus::AwaitingApproval,
        &ok(store.run(&run).await, "run"),
        "the host's decision leaves the run waiting for the call's",
    );
    assert!(
        ok(store.claim(&claim).await, "claim").is_none(),
        "a run that still waits on a call's approval is not claimed"
    );
    ok(
        store
            .decide_approval(&run, decision("toolu_b", true, "ana"))
            .await,
        "the call",
    );
    expect(
        RunStatus::Running,
        &ok(store.run(&run).await, "run"),
        "the last open request decided",
    );
    assert!(
        ok(store.claim(&claim).await, "claim").is_some(),
        "a run nothing waits on is claimable"
    );

    // Two hosts of one running command, decided in turn.
    let (run, lease, _) = running_call(store, "two hosts").await;
    let kinds = vec![host("a.test"), host("b.test")];
    ok(store.append(&lease, 3, kinds).await, "two hosts");
    ok(
        store
            .decide_approval(&run, decision("host:b.test", false, "ana"))
            .await,
        "b",
    );
    expect(
        RunStatus::AwaitingApproval,
        &ok(store.run(&run).await, "run"),
        "a.test is still open",
    );
    ok(
        store
            .decide_approval(&run, decision("host:a.test", true, "bo"))
            .await,
        "a",
    );
    expect(
        RunStatus::Running,
        &ok(store.run(&run).await, "run"),
        "both decided",
    );
}

pub async fn a_request_of_an_earlier_wait_holds_nothing(store: &dyn EventLog, clock: &TestClock) {
    // a.test asked about while toolu_b ran, never answered (its connection gave up); the
    // call ended and the next one waits for its approval, parked.
    let (run, lease, claim) = running_call(store, "a late host decision").await;
    let kinds = vec![
        host("a.test"),
        tool_completed("toolu_b"),
        model_wants_bash("toolu_c", "make"),
        approval_requested("toolu_c"),
    ];
    ok(store.append(&lease, 3, kinds).await, "to the next approval");
    ok(store.release_lease(&lease).await, "parked");
    clock.advance(std::time::Duration::from_secs(1));
    // A late decision on the host is refused (its call is over) and changes nothing.
    let late = store
        .decide_approval(&run, decision("host:a.test", true, "ana"))
        .await;
    assert!(matches!(late, Err(Error::CallEnded { .. })), "{late:?}");
    expect(
        RunStatus::AwaitingApproval,
        &ok(store.run(&run).await, "run"),
        "the run still waits for toolu_c",
    );
    assert!(ok(store.claim(&claim).await, "claim").is_none());
    ok(
        store
            .decide_approval(&run, decision("toolu_c", true, "ana"))
            .await,
        "toolu_c",
    );
    expect(
        RunStatus::Running,
        &ok(store.run(&run).await, "run"),
        "toolu_c was all the run waited on",
    );

    // Paused at its budget: a late host decision leaves it paused, and raisable. (A
    // request of no call, which stays decidable: a process a command left running asked.)
    let (run, lease, claim) = running_call(store, "decided while paused").await;
    let reached = EventKind::BudgetReached(BudgetReached {
        reached: vec![BudgetLimit::Tokens],
        spent: Spending {
            tokens: 120,
            usd: None,
            wall_secs: 3,
        },
        limits: BudgetLimits {
            tokens: Some(100),
            ..BudgetLimits::default()
        },
    });
    let background =
        EventKind::HostApprovalRequested(HostApprovalRequested::new("a.test", 443, None));
    let kinds = vec![tool_completed("toolu_b"), background, reached];
    ok(store.append(&lease, 3, kinds).await, "to the pause");
    ok(store.release_lease(&lease).await, "paused");
    clock.advance(std::time::Duration::from_secs(1));
    ok(
        store
            .decide_approval(&run, decision("host:a.test", true, "ana"))
            .await,
        "the old host",
    );
    expect(
        RunStatus::AwaitingBudget,
        &ok(store.run(&run).await, "run"),
        "a decision does not end a pause",
    );
    assert!(ok(store.claim(&claim).await, "claim").is_none());
    let raised = toren_protocol::BudgetRaised {
        tokens: 100,
        by: "ana".to_owned(),
        via: "cli".to_owned(),
        ..Default::default()
    };
    ok(store.raise_budget(&run, raised).await, "raise");
    expect(
        RunStatus::Running,
        &ok(store.run(&run).await, "run"),
        "raised",
    );
}
