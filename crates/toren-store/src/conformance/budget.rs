//! Raising a budget: atomic, needs no lease, only for a run paused at its budget, once
//! per pause; a paused run is never claimed, a raised one is.

use toren_protocol::{
    BudgetLimit, BudgetLimits, BudgetRaised, BudgetReached, EventKind, RunId, RunStatus, Spending,
};

use super::fixtures::{HOLDER, TTL, ok, run_completed, run_created};
use crate::{ClaimRequest, Error, EventLog, TestClock};

fn reached() -> EventKind {
    EventKind::BudgetReached(BudgetReached {
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
    })
}

fn raise(tokens: u64) -> BudgetRaised {
    BudgetRaised {
        tokens,
        by: "ana".to_owned(),
        via: "cli".to_owned(),
        ..BudgetRaised::default()
    }
}

pub async fn a_paused_run_is_raised_once_without_its_lease(
    store: &dyn EventLog,
    clock: &TestClock,
) {
    let agent = format!("budget-{}", RunId::new());
    let mut created = run_created("spend");
    created.agent.name.clone_from(&agent);
    let run = RunId::new();
    let (_, lease) = ok(store.create_run(&run, created, HOLDER, TTL).await, "create");

    // Not paused: nothing to raise.
    match store.raise_budget(&run, raise(10)).await {
        Err(Error::NotAwaitingBudget { status, .. }) => assert_eq!(status, RunStatus::Queued),
        other => panic!("a run not paused at its budget was raised: {other:?}"),
    }

    ok(store.append(&lease, 1, vec![reached()]).await, "pause");
    ok(store.release_lease(&lease).await, "let go");
    assert_eq!(
        ok(store.run(&run).await, "run").status,
        RunStatus::AwaitingBudget
    );
    clock.advance(std::time::Duration::from_secs(1));
    let only_this = ClaimRequest {
        backends: vec!["local".to_owned()],
        agents: vec![agent.clone()],
        ..ClaimRequest::new("budget-claimer", TTL)
    };
    assert!(
        ok(store.claim(&only_this).await, "claim").is_none(),
        "a run paused at its budget is not claimed"
    );

    // Raised with no lease; the raise is the next event and the run runs again.
    let event = ok(store.raise_budget(&run, raise(1_000)).await, "raise");
    assert_eq!(event.seq, 3);
    assert_eq!(event.kind, EventKind::BudgetRaised(raise(1_000)));
    assert_eq!(ok(store.run(&run).await, "run").status, RunStatus::Running);
    match store.raise_budget(&run, raise(5)).await {
        Err(Error::NotAwaitingBudget { status, .. }) => assert_eq!(status, RunStatus::Running),
        other => panic!("a second raise of one pause was written: {other:?}"),
    }
    assert_eq!(ok(store.read(&run, 0).await, "read").len(), 3);

    let (claimed, lease) = ok(store.claim(&only_this).await, "claim").unwrap_or_else(|| {
        panic!("a raised run is claimable");
    });
    assert_eq!(claimed.id, run);
    ok(store.append(&lease, 3, vec![run_completed()]).await, "end");
    assert!(matches!(
        store.raise_budget(&run, raise(5)).await,
        Err(Error::RunEnded { .. })
    ));
    assert!(matches!(
        store.raise_budget(&RunId::new(), raise(5)).await,
        Err(Error::RunNotFound(_))
    ));
}
