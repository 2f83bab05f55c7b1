use pretty_assertions::assert_eq;
use serde_json::json;
use toren_protocol::{
    ApprovalPolicy, AssistantMessage, ContextCompacted, Event, EventKind, Message, MessageRange,
    ModelResponded, RunFailed, ToolCall, Usage,
};

use super::*;
use crate::state::tests::{completed, created, log, responded, started};
use crate::{Action, RunState};

/// A run of an agent with a `window`-token context and room for many turns.
pub(crate) fn created_with(window: Option<u32>) -> EventKind {
    let EventKind::RunCreated(mut c) = created(ApprovalPolicy::Never) else {
        unreachable!()
    };
    c.agent.max_turns = 10_000;
    c.agent.context_tokens = window;
    EventKind::RunCreated(c)
}

pub(crate) fn bash(id: &str) -> ToolCall {
    ToolCall::new(id, "bash", json!({"command": format!("make {id}")}))
}

/// `turns` exchanges of one bash call each, whose outputs are `output(n)`.
pub(crate) fn exchanges(turns: usize, output: impl Fn(usize) -> String) -> Vec<EventKind> {
    (1..=turns)
        .flat_map(|n| {
            let id = format!("c{n}");
            [
                responded("", vec![bash(&id)]),
                started(&id, 1),
                completed(&id, &output(n)),
            ]
        })
        .collect()
}

fn fold(kinds: Vec<EventKind>) -> RunState {
    RunState::from_events(&log(kinds)).unwrap()
}

/// Appends `kind` to `events` and folds it into `state`.
pub(crate) fn push(state: &mut RunState, events: &mut Vec<Event>, kind: EventKind) {
    let event = Event {
        run_id: events[0].run_id.clone(),
        seq: events.len() as u64 + 1,
        at: events[0].at,
        v: 1,
        kind,
    };
    state.apply(&event).unwrap();
    events.push(event);
}

pub(crate) fn estimate(state: &RunState, messages: &[Message]) -> u64 {
    let system = crate::system_prompt(&state.agent);
    Budget::new(&state.agent, &system, true, state.compaction()).fixed
        + messages.iter().map(message_tokens).sum::<u64>()
}

/// Every tool results message follows the assistant message whose calls it answers.
pub(crate) fn assert_pairs_kept(messages: &[Message]) {
    for (i, m) in messages.iter().enumerate() {
        if let Message::ToolResults { results } = m {
            let Some(Message::Assistant(a)) = i.checked_sub(1).map(|p| &messages[p]) else {
                panic!("tool results at {i} without their assistant turn: {messages:#?}");
            };
            let asked: Vec<&str> = a.tool_calls.iter().map(|c| c.id.as_str()).collect();
            let answered: Vec<&str> = results.iter().map(|r| r.call_id.as_str()).collect();
            assert_eq!(asked, answered, "at {i}");
        }
    }
}

#[test]
fn the_estimate_counts_three_ascii_bytes_or_one_other_character_per_token() {
    assert_eq!(estimate_tokens(""), 0);
    assert_eq!(estimate_tokens("abc"), 1);
    assert_eq!(estimate_tokens("abcd"), 2);
    assert_eq!(estimate_tokens(&"x".repeat(30_000)), 10_000);
    assert_eq!(estimate_tokens("héllo wörld"), 3 + 2);
    assert_eq!(estimate_tokens("日本語"), 3);
}

#[test]
fn a_conversation_that_fits_is_sent_whole_with_room_for_the_answer() {
    let s = fold(
        [
            vec![created_with(Some(20_000))],
            exchanges(3, |_| "ok\n".into()),
        ]
        .concat(),
    );
    let Action::CallModel {
        messages,
        max_output_tokens,
        ..
    } = s.next_action()
    else {
        panic!("a model call: {:?}", s.next_action());
    };
    assert_eq!(messages, s.messages);
    assert_eq!(
        u64::from(max_output_tokens),
        20_000 - estimate(&s, &messages)
    );
}

#[test]
fn old_outputs_are_stubbed_first_and_the_last_two_exchanges_stay_whole() {
    // 10 outputs of 6,000 bytes (2,000 tokens each) in a 20,000-token window.
    let big = |n: usize| format!("{n}").repeat(6_000)[..6_000].to_owned();
    let mut events = log([vec![created_with(Some(20_000))], exchanges(10, big)].concat());
    let mut s = RunState::from_events(&events).unwrap();
    let Action::Compact { event } = s.next_action() else {
        panic!("a compaction: {:?}", s.next_action());
    };
    // Input budget 15,000 tokens, target 9,000: the outputs older than the last two
    // exchanges go, oldest first, until it fits.
    let before = estimate(&s, &s.messages);
    assert_eq!(
        event,
        ContextCompacted {
            stubbed: (1..=8).map(|n| format!("c{n}")).collect(),
            dropped: vec![],
            context_tokens: 20_000,
            estimated_before: before,
            estimated_after: event.estimated_after,
            refused: None,
        }
    );
    assert!(event.estimated_after <= 9_000, "{event:?}");
    push(
        &mut s,
        &mut events,
        EventKind::ContextCompacted(event.clone()),
    );
    let Action::CallModel { messages, .. } = s.next_action() else {
        panic!("a model call after the compaction");
    };
    assert_eq!(estimate(&s, &messages), event.estimated_after);
    let Message::ToolResults { results } = &messages[2] else {
        panic!("the first results")
    };
    assert_eq!(
        results[0].content,
        "[output of bash call c1 (6,000 bytes) removed to fit the context window; re-run the \
         command if you need it]"
    );
    // The last two exchanges are what was folded, byte for byte.
    assert_eq!(
        messages[messages.len() - 4..],
        s.messages[s.messages.len() - 4..]
    );
    assert_eq!(messages.len(), s.messages.len());
}

#[test]
fn old_exchanges_are_left_out_whole_with_a_note_of_their_calls() {
    // Small outputs are not worth stubbing: 400 exchanges of 300 bytes overflow 20,000 tokens.
    let mut events = log([
        vec![created_with(Some(20_000))],
        exchanges(400, |_| "y".repeat(300)),
    ]
    .concat());
    let mut s = RunState::from_events(&events).unwrap();
    let Action::Compact { event } = s.next_action() else {
        panic!("a compaction");
    };
    assert_eq!(event.stubbed, Vec::<String>::new());
    let [MessageRange { start: 1, end }] = event.dropped[..] else {
        panic!("one stretch after the first message: {event:?}");
    };
    assert_eq!(end % 2, 1, "it ends before an assistant turn");
    push(&mut s, &mut events, EventKind::ContextCompacted(event));
    let Action::CallModel { messages, .. } = s.next_action() else {
        panic!("a model call");
    };
    assert_pairs_kept(&messages);
    assert_eq!(messages[0], s.messages[0], "the first message stays");
    let Message::User { text } = &messages[1] else {
        panic!("a note in place of what was left out");
    };
    let dropped_calls = (end as usize - 1) / 2;
    let mut want = format!(
        "[Toren: {} earlier messages were left out here to fit the context window \
         ({dropped_calls} tool calls, 0 messages from the user). The last calls, oldest first:",
        end - 1
    );
    for n in dropped_calls - 9..=dropped_calls {
        want.push_str(&format!("\n- bash: make c{n}"));
    }
    want.push_str("\nRepeat a call if you need its result.]");
    assert_eq!(text, &want);
    assert_eq!(messages[2..], s.messages[end as usize..]);
}

#[test]
fn a_session_keeps_its_latest_user_message() {
    let history: Vec<Message> = (1..=150)
        .flat_map(|n| {
            let id = format!("h{n}");
            [
                Message::User {
                    text: format!("request {n}"),
                },
                Message::Assistant(AssistantMessage {
                    text: String::new(),
                    tool_calls: vec![bash(&id)],
                }),
                Message::ToolResults {
                    results: vec![toren_protocol::ToolResult {
                        call_id: id,
                        content: "z".repeat(350),
                        is_error: false,
                    }],
                },
            ]
        })
        .collect();
    let mut events = log([
        vec![created_with(Some(20_000))],
        exchanges(200, |_| "w".repeat(300)),
    ]
    .concat());
    let mut s = RunState::from_events_with_history(&history, &events).unwrap();
    let latest_user = history.len();
    for _ in 0..3 {
        match s.next_action() {
            Action::Compact { event } => {
                push(&mut s, &mut events, EventKind::ContextCompacted(event))
            }
            Action::CallModel { messages, .. } => {
                assert_pairs_kept(&messages);
                assert!(
                    messages.contains(&s.messages[latest_user]),
                    "the turn's request stays"
                );
                assert_eq!(messages[0], s.messages[0]);
                assert!(!s.compaction().is_dropped(latest_user));
                assert!(s.compaction().dropped_messages() > 0);
                return;
            }
            other => panic!("{other:?}"),
        }
    }
    panic!("no model call after compacting");
}

#[test]
fn a_request_that_cannot_fit_fails_the_run_instead_of_being_sent() {
    let EventKind::RunCreated(mut c) = created_with(Some(8_000)) else {
        unreachable!()
    };
    c.input = "q".repeat(30_000);
    let s = fold(vec![EventKind::RunCreated(c)]);
    let Action::Fail {
        event: RunFailed { error },
    } = s.next_action()
    else {
        panic!("a failure: {:?}", s.next_action());
    };
    assert!(
        error
            .starts_with("the conversation does not fit the model's context window of 8000 tokens"),
        "{error}"
    );
    assert!(error.contains("`context_tokens`"), "{error}");
}

/// The whole loop, model and tools simulated: 300 turns with outputs of every size in a
/// small window. Every request fits, every call keeps its result, and folding the log anew
/// at any point gives the request that was sent then.
#[test]
fn three_hundred_turns_fit_and_the_log_alone_gives_every_request_again() {
    let window = 12_000;
    let mut events = log(vec![created_with(Some(window))]);
    let mut s = RunState::from_events(&events).unwrap();
    let mut sent: Vec<(u64, Action)> = Vec::new();
    let mut n = 0;
    while n < 300 {
        let action = s.next_action();
        match &action {
            Action::CallModel {
                messages,
                max_output_tokens,
                ..
            } => {
                let estimate = estimate(&s, messages);
                let budget = Budget::new(
                    &s.agent,
                    &crate::system_prompt(&s.agent),
                    true,
                    s.compaction(),
                );
                assert!(
                    estimate <= budget.input,
                    "turn {n}: {estimate} > {}",
                    budget.input
                );
                assert_eq!(u64::from(*max_output_tokens), budget.window - estimate);
                assert_pairs_kept(messages);
                sent.push((s.last_seq, action.clone()));
                n += 1;
                let id = format!("c{n}");
                push(&mut s, &mut events, responded("", vec![bash(&id)]));
                push(&mut s, &mut events, started(&id, 1));
                // 50 bytes to 20,000, in a fixed pattern.
                let size = [50, 20_000, 900, 4_000, 300, 12_000, 2_500][n % 7];
                push(&mut s, &mut events, completed(&id, &"x".repeat(size)));
            }
            Action::Compact { event } => {
                push(
                    &mut s,
                    &mut events,
                    EventKind::ContextCompacted(event.clone()),
                );
            }
            other => panic!("turn {n}: {other:?}"),
        }
    }
    assert!(s.compaction().compactions() > 5, "{:?}", s.compaction());
    for (seq, action) in &sent {
        let replayed = RunState::from_events(&events[..*seq as usize]).unwrap();
        assert_eq!(
            &replayed.next_action(),
            action,
            "the request after seq {seq}"
        );
    }
}

#[test]
fn a_compaction_that_does_not_fit_the_conversation_is_a_corrupt_log() {
    let base = || {
        [
            vec![created_with(Some(20_000))],
            exchanges(3, |_| "ok".into()),
        ]
        .concat()
    };
    let cases = [
        (
            ContextCompacted {
                stubbed: vec!["nope".into()],
                ..Default::default()
            },
            "the conversation has no tool result nope to stub",
        ),
        (
            ContextCompacted {
                dropped: vec![MessageRange { start: 1, end: 2 }],
                ..Default::default()
            },
            "leaving out messages 1..2 would part tool results from their calls",
        ),
        (
            ContextCompacted {
                dropped: vec![MessageRange { start: 0, end: 3 }],
                ..Default::default()
            },
            "messages 0..3 are not a stretch after the first message and before the last (the \
             conversation has 7)",
        ),
        (
            ContextCompacted {
                dropped: vec![MessageRange { start: 3, end: 7 }],
                ..Default::default()
            },
            "messages 3..7 are not a stretch after the first message and before the last (the \
             conversation has 7)",
        ),
    ];
    for (event, why) in cases {
        let mut kinds = base();
        kinds.push(EventKind::ContextCompacted(event));
        let error = RunState::from_events(&log(kinds)).unwrap_err();
        let crate::Error::Inconsistent { why: got, .. } = error else {
            panic!("{error:?}");
        };
        assert_eq!(got, why);
    }
    let mut kinds = base();
    kinds.push(responded("", vec![bash("c9")]));
    kinds.push(EventKind::ContextCompacted(ContextCompacted::default()));
    assert!(
        RunState::from_events(&log(kinds)).is_err(),
        "not while calls are open"
    );
}

#[test]
fn usage_is_summed_over_the_answers_and_over_runs() {
    let answer = |usage: Usage| {
        EventKind::ModelResponded(ModelResponded {
            message: AssistantMessage {
                text: "done".into(),
                tool_calls: vec![],
            },
            stop_reason: "end_turn".into(),
            usage,
            model: "m".into(),
        })
    };
    let cached = Usage {
        cache_read_input_tokens: 900,
        cache_creation_input_tokens: 50,
        ..Usage::new(1_000, 20)
    };
    let mut kinds = vec![created_with(None)];
    kinds.extend(exchanges(1, |_| "ok".into()));
    kinds.push(answer(cached));
    let events = log(kinds);
    let s = RunState::from_events(&events).unwrap();
    let want = Usage {
        cache_read_input_tokens: 900,
        cache_creation_input_tokens: 50,
        ..Usage::new(1_000, 20)
    };
    assert_eq!(s.usage(), want);
    assert_eq!(crate::usage_of(&events), want);
    assert_eq!(
        crate::total_usage([&s, &s]),
        Usage {
            cache_read_input_tokens: 1_800,
            cache_creation_input_tokens: 100,
            ..Usage::new(2_000, 40)
        }
    );
}
