//! The log check against whole logs as the server writes them (JSON events), one flaw at a
//! time.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toren_protocol::Event;

use super::{Expected, ExpectedCall, problems};

const RUN: &str = "run_01jqz5m3k8v7c2x9n4b6t0r1ya";
const OTHER: &str = "run_01jqz6a0f3h5k7m9p1r3t5v7x9";

const BASH: Expected<'static> = Expected {
    input: "load run 7",
    call: Some(ExpectedCall {
        tool: "bash",
        output: "load-ok\n",
    }),
    answer: "load done",
};

/// The event kinds (without run_id, seq and at) of a correct run of the bash agent.
fn bash_kinds() -> Vec<Value> {
    vec![
        json!({"type": "run_created", "agent": {"name": "load", "model": "scripted/load.script.yaml", "max_turns": 50}, "input": "load run 7"}),
        json!({"type": "model_responded", "message": {"text": "", "tool_calls": [{"id": "call_1", "name": "bash", "arguments": {"command": "echo load-ok"}}]}}),
        json!({"type": "tool_started", "call_id": "call_1", "tool": "bash", "attempt": 1}),
        json!({"type": "tool_completed", "call_id": "call_1", "output": "load-ok\n[exit code: 0]", "is_error": false, "exit_code": 0}),
        json!({"type": "model_responded", "message": {"text": "load done", "tool_calls": []}}),
        json!({"type": "run_completed", "output": "load done"}),
    ]
}

/// Numbers `kinds` as a log of `RUN` from seq 1.
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

fn check(events: &[Event], expected: &Expected<'_>) -> Vec<String> {
    problems(RUN, events, expected)
}

#[test]
fn a_correct_log_has_no_problems() {
    assert_eq!(check(&log(bash_kinds()), &BASH), Vec::<String>::new());
    let answer_only = log(vec![
        bash_kinds()[0].clone(),
        bash_kinds()[4].clone(),
        bash_kinds()[5].clone(),
    ]);
    let none = Expected { call: None, ..BASH };
    assert_eq!(check(&answer_only, &none), Vec::<String>::new());
}

#[test]
fn an_empty_log_or_a_gap_in_the_seqs_is_wrong() {
    assert_eq!(check(&[], &BASH), vec!["the log is empty"]);
    let mut events = log(bash_kinds());
    events[3].seq = 5;
    events[4].seq = 6;
    events[5].seq = 7;
    assert_eq!(
        check(&events, &BASH),
        vec!["event 4 has seq 5 (seqs must run 1, 2, 3, … without gaps)"]
    );
}

#[test]
fn another_runs_event_or_input_is_wrong() {
    let mut events = log(bash_kinds());
    events[2].run_id = OTHER.parse().unwrap();
    assert_eq!(
        check(&events, &BASH),
        vec![format!("seq 3 belongs to {OTHER}, not to this run")]
    );
    let other_input = Expected {
        input: "load run 8",
        ..BASH
    };
    assert_eq!(
        check(&log(bash_kinds()), &other_input),
        vec![r#"run_created has input "load run 7", not "load run 8""#]
    );
}

#[test]
fn a_run_that_did_not_complete_with_the_answer_is_wrong() {
    let mut kinds = bash_kinds();
    kinds[5] = json!({"type": "run_failed", "error": "the sandbox is gone"});
    assert_eq!(
        check(&log(kinds), &BASH),
        vec!["the run failed: the sandbox is gone"]
    );
    let mut kinds = bash_kinds();
    kinds[5] = json!({"type": "run_completed", "output": "(end of script)"});
    assert_eq!(
        check(&log(kinds), &BASH),
        vec![r#"run_completed answers "(end of script)", not "load done""#]
    );
    let unfinished = log(bash_kinds()[..4].to_vec());
    assert_eq!(
        check(&unfinished, &BASH),
        vec!["the last event is tool_completed, not run_completed"]
    );
}

#[test]
fn a_call_run_twice_or_never_completed_is_wrong() {
    // Re-run after an interruption: two starts.
    let mut kinds = bash_kinds();
    kinds.insert(
        3,
        json!({"type": "tool_started", "call_id": "call_1", "tool": "bash", "attempt": 2}),
    );
    assert_eq!(
        check(&log(kinds), &BASH),
        vec!["2 tool_started and 1 tool_completed, not one of each"]
    );
    let mut kinds = bash_kinds();
    kinds.remove(3);
    assert_eq!(
        check(&log(kinds), &BASH),
        vec!["1 tool_started and 0 tool_completed, not one of each"]
    );
    let none = Expected { call: None, ..BASH };
    assert_eq!(
        check(&log(bash_kinds()), &none),
        vec!["1 tool_started and 1 tool_completed, but the agent makes no tool call"]
    );
}

#[test]
fn a_failed_or_mismatched_call_is_wrong() {
    let mut kinds = bash_kinds();
    kinds[3] = json!({"type": "tool_completed", "call_id": "call_1", "output": "bwrap: No permissions\n[exit code: 1]", "is_error": true, "exit_code": 1});
    assert_eq!(
        check(&log(kinds), &BASH),
        vec![
            r#"the call's result is "bwrap: No permissions\n[exit code: 1]" (error: true, exit code Some(1)), not "load-ok\n" with exit code 0"#
        ]
    );
    let mut kinds = bash_kinds();
    kinds[2] = json!({"type": "tool_started", "call_id": "call_2", "tool": "bash", "attempt": 1});
    assert_eq!(
        check(&log(kinds), &BASH),
        vec!["tool_completed (seq 4, call_1) does not follow tool_started (seq 3, call_2)"]
    );
}
