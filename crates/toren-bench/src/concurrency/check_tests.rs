//! The log check against whole logs as the server writes them (JSON events).

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toren_protocol::Event;

use super::{ASK, TOOL, problems};

const RUN: &str = "run_01jqz5m3k8v7c2x9n4b6t0r1ya";

fn kinds(agent: &str, asks: bool) -> Vec<Value> {
    let (command, output, answer) = super::script(agent);
    let mut kinds = vec![
        json!({"type": "run_created", "agent": {"name": agent, "model": "scripted/x", "max_turns": 50}, "input": format!("{agent} run 3")}),
        json!({"type": "model_responded", "message": {"text": "", "tool_calls": [{"id": "call_1", "name": "bash", "arguments": {"command": command}}]}}),
    ];
    if asks {
        kinds.push(json!({"type": "approval_requested", "call_id": "call_1", "tool": "bash", "command": command}));
        kinds.push(json!({"type": "approval_decided", "call_id": "call_1", "approved": true, "by": "bench", "via": "api"}));
    }
    kinds.extend([
        json!({"type": "tool_started", "call_id": "call_1", "tool": "bash", "attempt": 1}),
        json!({"type": "tool_completed", "call_id": "call_1", "output": format!("{output}[exit code: 0]"), "is_error": false, "exit_code": 0}),
        json!({"type": "model_responded", "message": {"text": answer, "tool_calls": []}}),
        json!({"type": "run_completed", "output": answer}),
    ]);
    kinds
}

fn log(kinds: Vec<Value>) -> Vec<Event> {
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, mut kind)| {
            kind["run_id"] = json!(RUN);
            kind["seq"] = json!(i + 1);
            kind["at"] = json!("2026-03-14T09:26:53Z");
            serde_json::from_value(kind).unwrap()
        })
        .collect()
}

fn check(agent: &str, events: &[Event]) -> Vec<String> {
    problems(RUN, agent, &super::input(agent, 3), events)
}

#[test]
fn correct_logs_of_both_agents_pass() {
    assert_eq!(check(TOOL, &log(kinds(TOOL, false))), Vec::<String>::new());
    assert_eq!(check(ASK, &log(kinds(ASK, true))), Vec::<String>::new());
}

#[test]
fn a_run_that_asks_must_have_been_approved_before_its_call() {
    let found = check(ASK, &log(kinds(ASK, false)));
    assert_eq!(found.len(), 1, "{found:?}");
    assert!(found[0].contains("approval_requested"), "{found:?}");
    // Approved after the call started: wrong too.
    let mut late = kinds(ASK, true);
    let decided = late.remove(3);
    late.insert(5, decided);
    let found = check(ASK, &log(late));
    assert!(found.iter().any(|p| p.contains("approved at")), "{found:?}");
    // The agent that never asks must not have asked.
    let found = check(TOOL, &log(kinds(TOOL, true)));
    assert!(found.iter().any(|p| p.contains("never asks")), "{found:?}");
}

#[test]
fn a_wrong_result_input_or_ending_is_named() {
    let mut wrong = kinds(TOOL, false);
    wrong[3]["exit_code"] = json!(1);
    wrong[0]["input"] = json!("tool run 4");
    wrong[5] = json!({"type": "run_failed", "error": "boom"});
    let found = check(TOOL, &log(wrong));
    assert_eq!(found.len(), 3, "{found:?}");
    assert!(found[0].contains("run_created"), "{found:?}");
    assert!(found[1].contains("boom"), "{found:?}");
    assert!(found[2].contains("exit code"), "{found:?}");
    let mut twice = kinds(TOOL, false);
    twice.insert(3, twice[2].clone());
    assert!(
        check(TOOL, &log(twice))
            .iter()
            .any(|p| p.contains("not one of each"))
    );
    assert_eq!(check(TOOL, &[]), vec!["the log is empty".to_owned()]);
}
