use jiff::Timestamp;
use pretty_assertions::assert_eq;
use toren_protocol::{
    ApprovalDecided, ApprovalPolicy, Budget, BudgetLimit, BudgetLimits, BudgetRaised,
    BudgetReached, Event, EventKind, ModelResponded, Pricing, RunId, RunStatus, Spending, Usage,
    Usd,
};

use crate::state::tests::{call, completed, created, request, responded, started};
use crate::{Action, RunState};

/// `run_created` of an agent with `budget`, approvals as given.
fn created_with(budget: Budget, approval: ApprovalPolicy) -> EventKind {
    let mut kind = created(approval);
    if let EventKind::RunCreated(c) = &mut kind {
        c.agent.budget = Some(budget);
    }
    kind
}

fn tokens(limit: u64) -> Budget {
    Budget {
        limits: BudgetLimits {
            tokens: Some(limit),
            ..BudgetLimits::default()
        },
        pricing: None,
    }
}

/// A model answer calling one bash tool, with `usage`.
fn answered(id: &str, usage: Usage) -> EventKind {
    let mut kind = responded("", vec![call(id, "bash")]);
    if let EventKind::ModelResponded(ModelResponded { usage: u, .. }) = &mut kind {
        *u = usage;
    }
    kind
}

/// A log whose events happen at the given seconds.
fn timed(kinds: Vec<(i64, EventKind)>) -> Vec<Event> {
    let run_id = RunId::new();
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, (second, kind))| Event {
            run_id: run_id.clone(),
            seq: i as u64 + 1,
            at: Timestamp::from_second(1_700_000_000 + second).unwrap(),
            v: 1,
            kind,
        })
        .collect()
}

fn fold(kinds: Vec<EventKind>) -> RunState {
    let at = kinds.into_iter().map(|k| (0, k)).collect();
    RunState::from_events(&timed(at)).unwrap()
}

fn raised(tokens: u64) -> EventKind {
    EventKind::BudgetRaised(BudgetRaised {
        tokens,
        by: "ana".into(),
        via: "cli".into(),
        ..BudgetRaised::default()
    })
}

#[test]
fn a_token_budget_pauses_before_the_next_model_call_and_a_raise_resumes_it() {
    let mut kinds = vec![
        created_with(tokens(1_000), ApprovalPolicy::Never),
        answered("c1", Usage::new(700, 400)),
        started("c1", 1),
        completed("c1", "hi"),
    ];
    let state = fold(kinds.clone());
    let reached = BudgetReached {
        reached: vec![BudgetLimit::Tokens],
        spent: Spending {
            tokens: 1_100,
            // The scripted model costs nothing.
            usd: Some(Usd::ZERO),
            wall_secs: 0,
        },
        limits: tokens(1_000).limits,
    };
    assert_eq!(
        state.next_action(),
        Action::ReachBudget {
            event: reached.clone()
        }
    );

    kinds.push(EventKind::BudgetReached(reached.clone()));
    let paused = fold(kinds.clone());
    assert_eq!(paused.status, RunStatus::AwaitingBudget);
    assert_eq!(paused.budget_reached(), Some(&reached));
    assert_eq!(paused.next_action(), Action::AwaitBudget { reached });

    // Raised by too little: it pauses again, with the new limit.
    kinds.push(raised(50));
    let still = fold(kinds.clone());
    assert_eq!(still.status, RunStatus::Running);
    assert_eq!(still.budget_limits().tokens, Some(1_050));
    assert!(
        matches!(still.next_action(), Action::ReachBudget { event } if event.limits.tokens == Some(1_050))
    );

    // Raised enough: the model is called, with the conversation as it was.
    kinds.pop();
    kinds.push(raised(2_000));
    let resumed = fold(kinds);
    assert_eq!(resumed.budget_limits().tokens, Some(3_000));
    assert_eq!(resumed.budget_reached(), None);
    assert!(matches!(resumed.next_action(), Action::CallModel { .. }));
}

#[test]
fn a_final_answer_completes_whatever_it_spent_and_tools_of_a_turn_still_run() {
    let mut over = responded("done", vec![]);
    if let EventKind::ModelResponded(r) = &mut over {
        r.usage = Usage::new(5_000, 5_000);
    }
    let state = fold(vec![created_with(tokens(10), ApprovalPolicy::Never), over]);
    assert!(matches!(state.next_action(), Action::Complete { .. }));

    // The call in flight took it over the limit; its tool call still runs.
    let state = fold(vec![
        created_with(tokens(10), ApprovalPolicy::Never),
        answered("c1", Usage::new(50, 50)),
    ]);
    assert!(matches!(state.next_action(), Action::RunTool { .. }));
}

#[test]
fn dollars_are_priced_from_the_agent_files_pricing() {
    let budget = Budget {
        limits: BudgetLimits {
            usd: Some(Usd(1_000_000)),
            ..BudgetLimits::default()
        },
        pricing: Some(Pricing {
            input: Usd(3_000_000),
            output: Usd(15_000_000),
            cache_read: Usd(300_000),
            cache_write: Usd(3_750_000),
        }),
    };
    let kinds = vec![
        created_with(budget, ApprovalPolicy::Never),
        // $0.30 + $0.75 = $1.05.
        answered("c1", Usage::new(100_000, 50_000)),
        started("c1", 1),
        completed("c1", "hi"),
    ];
    let state = fold(kinds);
    assert_eq!(state.spending().usd, Some(Usd(1_050_000)));
    assert!(matches!(
        state.next_action(),
        Action::ReachBudget { event } if event.reached == vec![BudgetLimit::Usd]
    ));
}

#[test]
fn wall_time_leaves_out_the_waits_for_a_person() {
    let budget = Budget {
        limits: BudgetLimits {
            wall_secs: Some(60),
            ..BudgetLimits::default()
        },
        pricing: None,
    };
    let c1 = call("c1", "bash");
    let events = timed(vec![
        (0, created_with(budget, ApprovalPolicy::Always)),
        (20, answered("c1", Usage::default())),
        (21, EventKind::ApprovalRequested(request(&c1, "echo hi", 1))),
        // An hour waiting for the decision does not count.
        (
            3_621,
            EventKind::ApprovalDecided(ApprovalDecided {
                call_id: "c1".into(),
                approved: true,
                by: "ana".into(),
                via: "cli".into(),
                reason: None,
            }),
        ),
        (3_622, started("c1", 1)),
        (3_650, completed("c1", "hi")),
    ]);
    let state = RunState::from_events(&events).unwrap();
    // 20 + 1 + 1 + 28 seconds.
    assert_eq!(state.spending().wall_secs, 50);
    assert!(matches!(state.next_action(), Action::CallModel { .. }));

    let mut longer = events;
    longer.pop();
    let run_id = longer[0].run_id.clone();
    longer.push(Event {
        run_id,
        seq: 6,
        at: Timestamp::from_second(1_700_000_000 + 3_700).unwrap(),
        v: 1,
        kind: completed("c1", "hi"),
    });
    let state = RunState::from_events(&longer).unwrap();
    assert_eq!(state.spending().wall_secs, 100);
    assert!(matches!(
        state.next_action(),
        Action::ReachBudget { event } if event.reached == vec![BudgetLimit::Wall]
    ));
}

#[test]
fn an_agent_without_a_budget_never_pauses_and_a_stray_raise_does_not_fold() {
    let state = fold(vec![
        created(ApprovalPolicy::Never),
        answered("c1", Usage::new(10_000_000, 10_000_000)),
        started("c1", 1),
        completed("c1", "hi"),
    ]);
    assert!(matches!(state.next_action(), Action::CallModel { .. }));
    assert_eq!(state.spending().tokens, 20_000_000);

    let events = timed(vec![(0, created(ApprovalPolicy::Never)), (1, raised(5))]);
    let error = RunState::from_events(&events).unwrap_err();
    assert!(
        error
            .to_string()
            .contains("does not wait for a budget raise"),
        "{error}"
    );
}
