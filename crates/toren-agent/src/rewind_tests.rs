//! Folding `rewound`: the conversation, the turn's calls and what comes next are those of
//! the step gone back to; what really happened (usage, call ids) stays; steps in the middle
//! of a call and steps left behind are refused.

use pretty_assertions::assert_eq;
use toren_protocol::{ApprovalPolicy, EventKind, Rewound};

use crate::state::tests::{call, completed, created, log, responded, started, state};
use crate::{Action, RunState};

fn rewound(to: u64, checkpoint: Option<&str>) -> EventKind {
    EventKind::Rewound(Rewound {
        to,
        checkpoint: checkpoint.map(str::to_owned),
        by: Some("alice via cli".into()),
        turn: None,
    })
}

/// Three bash turns, each call started and completed (steps 2-4, 5-7, 8-10).
fn three_turns() -> Vec<EventKind> {
    let mut kinds = vec![created(ApprovalPolicy::Never)];
    for id in ["a", "b", "c"] {
        kinds.push(responded("", vec![call(id, "bash")]));
        kinds.push(started(id, 1));
        kinds.push(completed(id, &format!("out {id}")));
    }
    kinds
}

#[test]
fn the_run_continues_from_the_step_it_went_back_to() {
    let mut kinds = three_turns();
    kinds.push(rewound(4, Some("cp1")));
    let rewound_state = state(kinds);
    // Folding only the first four events: the state the run had at step 4.
    let then = state(three_turns().into_iter().take(4).collect());
    assert_eq!(rewound_state.messages, then.messages);
    assert_eq!(rewound_state.turns, then.turns);
    assert_eq!(rewound_state.next_action(), then.next_action());
    assert!(matches!(
        rewound_state.next_action(),
        Action::CallModel { .. }
    ));
    assert_eq!(rewound_state.restore_due(), Some("cp1"));
    assert_eq!(rewound_state.last_seq, 11);
    // Every call id used stays used: a new answer's ids do not repeat the left-behind ones.
    assert!(rewound_state.used_ids.contains("c"));
}

#[test]
fn right_after_a_model_answer_its_calls_run_again() {
    let mut kinds = three_turns();
    kinds.push(rewound(5, Some("cp2")));
    let s = state(kinds);
    assert_eq!(
        s.next_action(),
        crate::state::tests::run_tool(call("b", "bash"), 1)
    );
}

#[test]
fn the_restore_is_due_only_until_the_next_event() {
    let mut kinds = three_turns();
    kinds.push(rewound(4, Some("cp1")));
    kinds.push(responded("done", vec![]));
    let s = state(kinds);
    assert_eq!(s.restore_due(), None);
    assert!(matches!(s.next_action(), Action::Complete { .. }));
    // Nothing to restore: no call changed the workspace after the step.
    let mut kinds = three_turns();
    kinds.push(rewound(10, None));
    assert_eq!(state(kinds).restore_due(), None);
}

#[test]
fn a_step_in_the_middle_of_a_call_is_refused_with_the_steps_near_it() {
    let s = state(three_turns());
    assert_eq!(s.rewind_targets(), vec![1, 2, 4, 5, 7, 8, 10]);
    let why = s.can_rewind_to(6).unwrap_err();
    assert!(why.contains("e.g. step 5 or 7"), "{why}");
    let mut kinds = three_turns();
    kinds.push(rewound(6, None));
    let error = RunState::from_events(&log(kinds)).unwrap_err();
    assert!(
        error.to_string().contains("middle of a tool call"),
        "{error}"
    );
}

#[test]
fn steps_left_behind_are_refused_and_earlier_ones_reached_again() {
    let mut kinds = three_turns();
    kinds.push(rewound(7, Some("cp3"))); // 11
    kinds.push(responded("", vec![call("d", "bash")])); // 12
    let s = state(kinds.clone());
    assert_eq!(s.rewind_targets(), vec![1, 2, 4, 5, 7, 11, 12]);
    let why = s.can_rewind_to(9).unwrap_err();
    assert!(
        why.contains("left behind by the rewind at step 11"),
        "{why}"
    );
    kinds.push(rewound(2, Some("cp0"))); // 13
    let s = state(kinds);
    let then = state(three_turns().into_iter().take(2).collect());
    assert_eq!(s.messages, then.messages);
    assert_eq!(
        s.next_action(),
        crate::state::tests::run_tool(call("a", "bash"), 1)
    );
}

/// A session's rewind turn: no input of its own, the restore due from its first event,
/// then completed (no model call); its conversation is the history it was given.
#[test]
fn a_session_rewind_turn_restores_then_completes_without_a_model_call() {
    let EventKind::RunCreated(mut created) = created(ApprovalPolicy::Never) else {
        unreachable!()
    };
    created.input = String::new();
    created.start = Some(toren_protocol::TurnStart {
        checkpoint: Some("before".into()),
        rewound: Some(Rewound {
            to: 0,
            checkpoint: Some("cp2".into()),
            by: Some("alice via chat".into()),
            turn: Some(2),
        }),
        forked: None,
        seeded: None,
    });
    let history = vec![toren_protocol::Message::User {
        text: "earlier".into(),
    }];
    let events = log(vec![EventKind::RunCreated(created)]);
    let s = RunState::from_events_with_history(&history, &events).unwrap();
    assert_eq!(s.messages, history);
    assert!(s.own_messages().is_empty());
    assert_eq!(s.restore_due(), Some("cp2"));
    assert_eq!(s.session_rewind().map(|r| r.turn), Some(Some(2)));
    let Action::Complete { event } = s.next_action() else {
        panic!("{:?}", s.next_action())
    };
    assert_eq!(
        event.output,
        "the session went back to before turn 2 (workspace restored to checkpoint cp2)"
    );
    let mut kinds: Vec<EventKind> = events.into_iter().map(|e| e.kind).collect();
    kinds.push(EventKind::RunCompleted(event));
    let done = RunState::from_events_with_history(&history, &log(kinds)).unwrap();
    assert_eq!(done.restore_due(), None);
    assert!(done.status.is_terminal());
}

/// A run going on from an ended run's step begins where the ended run was then: the
/// same conversation, turns and next action, whichever kind of step it is.
#[test]
fn a_new_run_forked_from_an_ended_run_goes_on_as_the_step_did() {
    let mut ended = three_turns();
    ended.push(responded("done", vec![]));
    ended.push(EventKind::RunCompleted(toren_protocol::RunCompleted {
        output: "done".into(),
    }));
    let origin = state(ended);
    assert!(origin.status.is_terminal());
    assert!(origin.can_rewind_to(4).is_err());
    // Between turns (4) and right after a model answer (5).
    for to in [4, 5] {
        let forked = origin.fork_at(to).unwrap();
        let then = state(three_turns().into_iter().take(to as usize).collect());
        let EventKind::RunCreated(mut created) = created(ApprovalPolicy::Never) else {
            unreachable!()
        };
        created.start = Some(toren_protocol::TurnStart {
            forked: Some(forked),
            ..Default::default()
        });
        let fork = state(vec![EventKind::RunCreated(created)]);
        assert_eq!(fork.messages, then.messages, "step {to}");
        assert_eq!(fork.turns, then.turns, "step {to}");
        assert_eq!(fork.next_action(), then.next_action(), "step {to}");
        assert_eq!(fork.forked_from().map(|(_, s)| s), Some(to));
        // Its own steps begin at its start: it can be rewound there.
        assert_eq!(fork.rewind_targets(), vec![1]);
    }
    // A step in the middle of a call is no step to go on from.
    assert!(
        origin
            .fork_at(3)
            .unwrap_err()
            .contains("middle of a tool call")
    );
}
