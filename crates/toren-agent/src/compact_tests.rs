use pretty_assertions::assert_eq;
use toren_protocol::{EventKind, SizeRefusal};

use crate::context::tests::{assert_pairs_kept, bash, created_with, estimate, exchanges, push};
use crate::state::tests::{completed, log, responded, started};
use crate::{Action, RunState};

fn refusal(input: Option<u64>, limit: Option<u64>) -> SizeRefusal {
    SizeRefusal {
        input_tokens: input,
        limit_tokens: limit,
        message: "prompt is too long".into(),
    }
}

#[test]
fn a_refusal_teaches_the_window_and_the_next_request_fits_it() {
    // The spec says 100k; the provider has 20k and refuses a request of 30k of its tokens.
    let big = |_| "x".repeat(6_000);
    let mut events = log([vec![created_with(Some(100_000))], exchanges(12, big)].concat());
    let mut s = RunState::from_events(&events).unwrap();
    assert!(matches!(s.next_action(), Action::CallModel { .. }));
    let event = s
        .after_refusal(refusal(Some(30_000), Some(20_000)))
        .unwrap();
    assert_eq!(event.context_tokens, 20_000);
    assert_eq!(event.refused, Some(refusal(Some(30_000), Some(20_000))));
    assert!(!event.stubbed.is_empty(), "{event:?}");
    push(&mut s, &mut events, EventKind::ContextCompacted(event));
    let Action::CallModel {
        messages,
        max_output_tokens,
        ..
    } = s.next_action()
    else {
        panic!("a model call: {:?}", s.next_action());
    };
    assert_pairs_kept(&messages);
    // What the provider counts, by what the refusal taught, fits its window with the answer.
    let taught = estimate(&s, &messages) * s.compaction().scale() / 1000;
    assert!(
        taught + u64::from(max_output_tokens) <= 20_000,
        "{taught} + {max_output_tokens}"
    );
    assert_eq!(
        RunState::from_events(&events).unwrap(),
        s,
        "the log alone says it"
    );
}

#[test]
fn a_provider_that_keeps_refusing_ends_the_run_instead_of_looping() {
    let mut events = log([
        vec![created_with(Some(50_000))],
        exchanges(30, |_| "y".repeat(2_000)),
    ]
    .concat());
    let mut s = RunState::from_events(&events).unwrap();
    for refusals in 1..=100 {
        match s.after_refusal(refusal(None, None)) {
            Ok(event) => push(&mut s, &mut events, EventKind::ContextCompacted(event)),
            Err(failed) => {
                assert!(
                    failed.error.starts_with(
                        "the model provider refused the request as too large for the model's \
                         context window (prompt is too long), and nothing more"
                    ),
                    "{}",
                    failed.error
                );
                assert!(refusals > 3, "it tried to make room first ({refusals})");
                return;
            }
        }
        // Every compaction leaves a request the state machine would send.
        assert!(matches!(s.next_action(), Action::CallModel { .. }));
    }
    panic!("still compacting after 100 refusals");
}

#[test]
fn a_refusal_of_the_answers_room_lowers_max_tokens_only() {
    let mut events = log(vec![
        created_with(Some(200_000)),
        responded("", vec![bash("c1")]),
        started("c1", 1),
        completed("c1", "ok"),
    ]);
    let mut s = RunState::from_events(&events).unwrap();
    let Action::CallModel {
        messages: before, ..
    } = s.next_action()
    else {
        panic!()
    };
    let event = s.after_refusal(refusal(Some(4_000), Some(8_192))).unwrap();
    assert_eq!((event.stubbed.len(), event.dropped.len()), (0, 0));
    push(&mut s, &mut events, EventKind::ContextCompacted(event));
    let Action::CallModel {
        messages,
        max_output_tokens,
        ..
    } = s.next_action()
    else {
        panic!()
    };
    assert_eq!(messages, before);
    assert!(max_output_tokens < 8_192 - 4_000, "{max_output_tokens}");
}
