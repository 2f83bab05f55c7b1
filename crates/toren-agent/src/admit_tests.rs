//! Tool call ids unique within a run, whatever the provider sends; arguments decoded once
//! for both the approval and the tool; calls that keep killing their worker given up.

use pretty_assertions::assert_eq;
use serde_json::json;
use toren_protocol::{ApprovalPolicy, ApprovalRequested, AssistantMessage, EventKind, ToolCall};

use crate::state::tests::{call, completed, created, request, responded, run_tool, started, state};
use crate::{Action, MAX_TOOL_ATTEMPTS, RunState};

fn answer(ids: &[&str]) -> AssistantMessage {
    AssistantMessage {
        text: String::new(),
        tool_calls: ids.iter().map(|id| call(id, "bash")).collect(),
    }
}

fn ids(message: &AssistantMessage) -> Vec<(String, Option<String>)> {
    message
        .tool_calls
        .iter()
        .map(|c| (c.id.clone(), c.wire_id.clone()))
        .collect()
}

fn owned(pairs: &[(&str, Option<&str>)]) -> Vec<(String, Option<String>)> {
    pairs
        .iter()
        .map(|(id, wire)| ((*id).to_owned(), wire.map(str::to_owned)))
        .collect()
}

#[test]
fn new_ids_are_kept_and_missing_ones_assigned() {
    let s = state(vec![created(ApprovalPolicy::Never)]);
    let admitted = s.admit(answer(&["toolu_a", "", "  "]));
    assert_eq!(
        ids(&admitted),
        owned(&[("toolu_a", None), ("toren_1_1", None), ("toren_1_2", None)])
    );
}

#[test]
fn ids_repeated_across_turns_get_toren_ids_and_keep_the_providers_for_the_wire() {
    // Turn 1 used call_1 and call_2 (a provider numbering per turn).
    let s = state(vec![
        created(ApprovalPolicy::Never),
        responded(
            "",
            vec![call("call_1", "read_file"), call("call_2", "read_file")],
        ),
        started("call_1", 1),
        completed("call_1", "x"),
        started("call_2", 1),
        completed("call_2", "y"),
    ]);
    let admitted = s.admit(answer(&["call_1", "call_3"]));
    assert_eq!(
        ids(&admitted),
        owned(&[("toren_2_1", Some("call_1")), ("call_3", None)])
    );
    assert_eq!(admitted.tool_calls[0].wire_id(), "call_1");
}

#[test]
fn ids_repeated_within_one_answer_are_made_unique_and_the_log_folds() {
    let s = state(vec![created(ApprovalPolicy::Never)]);
    let admitted = s.admit(answer(&["dup", "dup", "dup"]));
    assert_eq!(
        ids(&admitted),
        owned(&[("dup", None), ("toren_1_1", None), ("toren_1_2", None)])
    );
    // What is journaled folds, and every call runs in turn.
    let s = state(vec![
        created(ApprovalPolicy::Never),
        responded("", admitted.tool_calls.clone()),
    ]);
    assert_eq!(s.next_action(), run_tool(admitted.tool_calls[0].clone(), 1));
}

#[test]
fn an_assigned_id_never_collides_with_one_the_model_chose() {
    let s = state(vec![
        created(ApprovalPolicy::Never),
        responded("", vec![call("toren_2_1", "read_file")]),
        started("toren_2_1", 1),
        completed("toren_2_1", "x"),
    ]);
    let admitted = s.admit(answer(&["", "toren_2_2"]));
    assert_eq!(
        ids(&admitted),
        owned(&[("toren_2_2", None), ("toren_2_3", Some("toren_2_2"))])
    );
}

#[test]
fn admitting_is_deterministic() {
    let s = state(vec![created(ApprovalPolicy::Never)]);
    let message = answer(&["", "a", "a", ""]);
    assert_eq!(s.admit(message.clone()), s.admit(message));
}

fn bash(arguments: serde_json::Value) -> ToolCall {
    ToolCall::new("call_1", "bash", arguments)
}

#[test]
fn the_approval_shows_the_command_the_tool_will_run_even_when_encoded_twice() {
    let cases = [
        (json!({"command": "ls -la"}), "ls -la"),
        // Arguments sent as a JSON string holding an object, with escaped characters:
        // the tool decodes the string and runs what it holds, so that is what is shown.
        (
            json!(r#"{"command": "\u0065\u0063\u0068\u006f PWNED > pwned"}"#),
            "echo PWNED > pwned",
        ),
        (json!({"command": "a\nb", "timeout_secs": 5}), "a\nb"),
    ];
    for (arguments, shown) in cases {
        let c = bash(arguments);
        let s = state(vec![
            created(ApprovalPolicy::Always),
            responded("", vec![c.clone()]),
        ]);
        assert_eq!(
            s.next_action(),
            Action::RequestApproval {
                request: request(&c, shown, 1),
                call: c,
            }
        );
    }
}

#[test]
fn bash_arguments_that_do_not_decode_are_refused_without_asking_or_running() {
    let cases = [
        json!({"cmd": "ls"}),
        json!("{\"command\": \"broken"),
        json!("\"ls\""),
        json!([1]),
        json!({"command": "ls", "extra": true}),
    ];
    for arguments in cases {
        let c = bash(arguments.clone());
        let s = state(vec![
            created(ApprovalPolicy::Always),
            responded("", vec![c.clone()]),
        ]);
        let Action::Refuse { call, result } = s.next_action() else {
            panic!("{arguments}: {:?}", s.next_action());
        };
        assert_eq!(call, c);
        assert!(result.output.contains("`bash`"), "{result:?}");
        assert!(result.is_error);
    }
}

#[test]
fn a_call_that_never_completes_is_given_up_after_the_limit() {
    let c = call("call_1", "edit_file");
    let mut kinds = vec![
        created(ApprovalPolicy::Never),
        responded("", vec![c.clone()]),
    ];
    for attempt in 1..=MAX_TOOL_ATTEMPTS {
        assert_eq!(
            state(kinds.clone()).next_action(),
            run_tool(c.clone(), attempt)
        );
        kinds.push(started("call_1", attempt));
    }
    let Action::Refuse { call, result } = state(kinds.clone()).next_action() else {
        panic!("{:?}", state(kinds).next_action());
    };
    assert_eq!(call, c);
    assert!(
        result
            .output
            .contains("started 3 times and never completed"),
        "{result:?}"
    );
}

#[test]
fn an_approved_call_that_keeps_dying_is_given_up_too() {
    let c = call("call_1", "bash");
    let mut kinds = vec![
        created(ApprovalPolicy::Always),
        responded("", vec![c]),
        EventKind::ApprovalRequested(ApprovalRequested {
            call_id: "call_1".into(),
            tool: "bash".into(),
            command: "echo hi".into(),
            attempt: 1,
        }),
        EventKind::ApprovalDecided(toren_protocol::ApprovalDecided {
            call_id: "call_1".into(),
            approved: true,
            by: "me".into(),
            via: "cli".into(),
            reason: None,
        }),
    ];
    for attempt in 1..=MAX_TOOL_ATTEMPTS {
        kinds.push(started("call_1", attempt));
    }
    assert!(matches!(state(kinds).next_action(), Action::Refuse { .. }));
}

#[test]
fn the_used_ids_survive_a_fold() {
    let s = state(vec![
        created(ApprovalPolicy::Never),
        responded("", vec![call("a", "read_file")]),
        started("a", 1),
        completed("a", "x"),
    ]);
    let again = RunState::from_events(&crate::state::tests::log(vec![
        created(ApprovalPolicy::Never),
        responded("", vec![call("a", "read_file")]),
        started("a", 1),
        completed("a", "x"),
    ]))
    .unwrap();
    assert_eq!(s.admit(answer(&["a"])), again.admit(answer(&["a"])));
    assert_eq!(
        ids(&s.admit(answer(&["a"]))),
        owned(&[("toren_2_1", Some("a"))])
    );
}
