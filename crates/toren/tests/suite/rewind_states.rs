//! Rewind from the states a run can wait in, through the real binary (real bubblewrap,
//! real SQLite, fake model servers): a run rewound while a call waits for approval no
//! longer takes a decision on the call it left behind (refused with nothing written, the
//! call no longer listed as pending, the log still folds), and a run paused at its budget
//! that goes back to an earlier step is still paused there, so a raise lets it go on.

use std::process::Child;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::Value;
use toren_test_support::{FakeAnthropic, FakeOpenAi, Reply};

use super::budget::answer;
use super::common::{Toren, bash, text};

/// Waits until the run's pending call is `call`.
fn wait_pending(toren: &Toren, child: &mut Child, run: &str, call: &str) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let shown = toren.show(run);
        if shown["pending_approval"]["call_id"] == call {
            return;
        }
        if let Some(exit) = child.try_wait().unwrap() {
            panic!("toren exited ({exit}) while {call} should wait: {shown}");
        }
        assert!(Instant::now() < deadline, "{call} never waited: {shown}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn seq_of(events: &[Value], kind: &str) -> u64 {
    events
        .iter()
        .find(|e| e["type"] == kind)
        .and_then(|e| e["seq"].as_u64())
        .unwrap_or_else(|| panic!("no {kind}"))
}

#[test]
fn a_decision_on_a_call_a_rewind_left_behind_is_refused_and_the_run_goes_on() {
    let fake = FakeOpenAi::start(vec![
        bash("call_1", "echo one > one.txt"),
        bash("call_2", "echo two > two.txt"),
        // Asked again after the rewind (the id is made unique within the run).
        bash("call_2", "echo two > two.txt"),
        Reply::text("done"),
    ])
    .unwrap();
    let toren = Toren::new().env("OLLAMA_HOST", &fake.host_url());
    toren.agent("r", "name: r\nmodel: ollama/llama3.2\nsandbox: true\n");
    let mut child = toren.spawn(&["run", "r", "--input", "two files"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    wait_pending(&toren, &mut child, &run, "call_1");
    let out = toren.run(&["approve", &run, "call_1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    wait_pending(&toren, &mut child, &run, "call_2");
    child.kill().unwrap();
    child.wait().unwrap();

    // Back to the step after the first call's result, before call_2 was asked about.
    let step = toren
        .events(&run)
        .iter()
        .find(|e| e["type"] == "tool_completed" && e["call_id"] == "call_1")
        .and_then(|e| e["seq"].as_u64())
        .unwrap();
    let out = toren.run(&["rewind", &run, "--to", &step.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let before = toren.events(&run);

    for answer in ["approve", "deny"] {
        let out = toren.run(&[answer, &run, "call_2"]);
        assert_ne!(out.status.code(), Some(0), "{answer} of a call left behind");
        let stderr = text(&out.stderr);
        assert!(
            stderr.contains("call_2") && stderr.contains("left behind by a rewind"),
            "{stderr}"
        );
    }
    assert_eq!(
        toren.events(&run),
        before,
        "a refused decision writes nothing"
    );
    let shown = toren.show(&run);
    assert_eq!(shown["status"], "running", "{shown}");
    assert!(shown["pending_approval"].is_null(), "{shown}");

    // The run goes on from the step: the model answers again, its call is asked about,
    // approved, and the run completes.
    let mut child = toren.spawn(&["resume", &run]);
    let again = loop {
        let shown = toren.show(&run);
        if let Some(call) = shown["pending_approval"]["call_id"].as_str() {
            break call.to_owned();
        }
        assert!(child.try_wait().unwrap().is_none(), "{shown}");
        std::thread::sleep(Duration::from_millis(50));
    };
    let out = toren.run(&["approve", &run, &again]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(toren.show(&run)["status"], "completed");
    assert_eq!(
        std::fs::read_to_string(toren.workspace(&run).join("two.txt")).unwrap(),
        "two\n"
    );
}

#[test]
fn a_run_paused_at_its_budget_and_rewound_is_still_paused_and_is_raised() {
    let fake = FakeAnthropic::start([
        answer("toolu_a", 30, 5),
        answer("toolu_b", 30, 5),
        answer("toolu_c", 30, 5),
        Reply::text("all read"),
    ])
    .unwrap();
    let toren = Toren::new()
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", &fake.base_url())
        .env("TOREN_APPROVAL_POLL", "50ms");
    toren.agent(
        "spender",
        "name: spender\nmodel: anthropic/claude-haiku-4-5\nsandbox:\n  approval: never\n\
         budget: {tokens: 40}\n",
    );
    let mut child = toren.spawn(&["run", "spender", "--input", "look"]);
    let run = toren.wait_for_status(&mut child, "awaiting_budget");
    child.kill().unwrap();
    child.wait().unwrap();

    let step = seq_of(&toren.events(&run), "tool_completed");
    let out = toren.run(&["rewind", &run, "--to", &step.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown = toren.show(&run);
    assert_eq!(shown["status"], "awaiting_budget", "{shown}");
    let human = text(&toren.run(&["runs", "show", &run]).stdout);
    assert!(
        human.contains(&format!("toren budget {run} --add-tokens N")),
        "{human}"
    );

    let out = toren.run(&["budget", &run, "--add-tokens", "1000"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = toren.run(&["resume", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(toren.show(&run)["status"], "completed");
    // The model was asked once per answer it gave: nothing sent twice across the rewind.
    let types = toren.event_types(&run);
    assert_eq!(types.iter().filter(|t| *t == "rewound").count(), 1);
}
