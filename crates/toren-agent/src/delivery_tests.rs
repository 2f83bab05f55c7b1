//! Folding `message_delivered`: a delivery belongs to a running call of the current turn,
//! journaled before its result; anything else is a corrupt log.

use pretty_assertions::assert_eq;
use toren_protocol::{
    ApprovalPolicy, ChannelBinding, EventKind, MessageDelivered, RunCreated, ToolCompleted,
    ToolResult,
};

use super::Error;
use super::tests::{call, completed, created, log, responded, started, state};
use crate::{Action, RunState};

fn delivered(id: &str) -> MessageDelivered {
    MessageDelivered {
        call_id: id.into(),
        channel: "terminal".into(),
        path: "out/report.pdf".into(),
        bytes: 5,
        sha256: "2cf24dba5fb0a30e26e83b2ac5b9e29e1b161e5c1fa7425e73043362938b9824".into(),
        kind: "document".into(),
        caption: Some("the report".into()),
        receipt: "/home/p/Downloads/toren/chat/report.pdf".into(),
        repeated: false,
    }
}

fn result(id: &str) -> ToolCompleted {
    ToolCompleted {
        call_id: id.into(),
        output: "sent".into(),
        is_error: false,
        exit_code: None,
        truncated: false,
    }
}

fn bound() -> EventKind {
    let EventKind::RunCreated(created) = created(ApprovalPolicy::Never) else {
        unreachable!()
    };
    EventKind::RunCreated(RunCreated {
        channel: Some(ChannelBinding {
            kind: "terminal".into(),
            address: "chat".into(),
        }),
        ..created
    })
}

#[test]
fn a_delivery_folds_with_its_call_and_the_binding_is_kept() {
    let send = call("c1", "send_to_channel");
    let mut kinds = vec![bound(), responded("", vec![send]), started("c1", 1)];
    // The worker appends what the state machine says, in its order.
    kinds.extend(Action::finished(result("c1"), Some(delivered("c1"))));
    let state = state(kinds);
    assert_eq!(state.deliveries, [delivered("c1")]);
    assert_eq!(
        state.channel,
        Some(ChannelBinding {
            kind: "terminal".into(),
            address: "chat".into()
        })
    );
    assert_eq!(
        state.messages.last(),
        Some(&toren_protocol::Message::ToolResults {
            results: vec![ToolResult {
                call_id: "c1".into(),
                content: "sent".into(),
                is_error: false,
            }]
        })
    );
    // No delivery, no event for it.
    assert_eq!(
        Action::finished(result("c2"), None),
        [EventKind::ToolCompleted(result("c2"))]
    );
}

#[test]
fn a_delivery_that_does_not_fit_the_run_is_an_inconsistency() {
    let send = || call("c1", "send_to_channel");
    let why = |kinds: Vec<EventKind>| match RunState::from_events(&log(kinds)) {
        Err(Error::Inconsistent { kind, why, .. }) => {
            assert_eq!(kind, "message_delivered");
            why
        }
        other => panic!("expected an inconsistency, got {other:?}"),
    };
    let d = || EventKind::MessageDelivered(delivered("c1"));
    // A call the model never made.
    let unknown = why(vec![
        bound(),
        responded("", vec![call("c9", "send_to_channel")]),
        started("c9", 1),
        d(),
    ]);
    assert_eq!(unknown, "the current turn has no tool call c1");
    // Before the call started.
    assert_eq!(
        why(vec![bound(), responded("", vec![send()]), d()]),
        "c1 was never started"
    );
    // After its result (its turn is closed).
    assert_eq!(
        why(vec![
            bound(),
            responded("", vec![send(), call("c2", "bash")]),
            started("c1", 1),
            completed("c1", "sent"),
            d()
        ]),
        "c1 already completed"
    );
    // Twice.
    assert_eq!(
        why(vec![
            bound(),
            responded("", vec![send()]),
            started("c1", 1),
            d(),
            d()
        ]),
        "c1 was already delivered"
    );
}

#[test]
fn an_unbound_run_has_no_channel() {
    let state = state(vec![created(ApprovalPolicy::Never)]);
    assert_eq!(state.channel, None);
    assert!(state.deliveries.is_empty());
}
