//! `toren resume` after `kill -9` of `toren run`: the log is replayed, nothing finished is
//! done again, an interrupted command is re-run (and the model told), a pending approval
//! stays pending, and the policy pinned at creation governs.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::common::{Toren, read, text};

fn kill9(child: &mut std::process::Child) {
    child.kill().unwrap(); // SIGKILL
    child.wait().unwrap();
}

fn count(events: &[Value], kind: &str) -> usize {
    events.iter().filter(|e| e["type"] == kind).count()
}

const INTERRUPTED: &str = r#"
turns:
  - tool_calls:
      - write_file: {path: before.txt, content: "written once\n"}
      - bash: {command: "echo attempt >> attempts.log; if [ -f once ]; then echo second run; else touch once; sleep 30; fi"}
  - text: "finished"
"#;

#[test]
fn an_interrupted_command_is_rerun_and_nothing_else_is_repeated() {
    let toren = Toren::new();
    toren.file("s.yaml", INTERRUPTED);
    toren.agent(
        "a",
        "name: a\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    let mut child = toren.spawn(&["run", "a", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "running");
    // `once` exists as soon as the command got past its first line.
    let ws = toren.workspace(&run);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ws.join("once").exists() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    kill9(&mut child);
    assert_eq!(count(&toren.events(&run), "tool_started"), 2);
    assert_eq!(count(&toren.events(&run), "tool_completed"), 1);

    let out = toren.run(&["resume", &run]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "finished\n");
    assert!(stderr.contains("re-running bash call call_2"), "{stderr}");
    assert!(
        stderr.contains("1 model answer(s), 1 completed tool call(s)"),
        "{stderr}"
    );

    assert_eq!(
        read(&ws.join("attempts.log")),
        "attempt\nattempt\n",
        "at-least-once: run twice"
    );
    assert_eq!(read(&ws.join("before.txt")), "written once\n");
    let events = toren.events(&run);
    assert_eq!(
        count(&events, "model_responded"),
        2,
        "the first answer was not requested again"
    );
    let starts: Vec<(&str, u64)> = events
        .iter()
        .filter(|e| e["type"] == "tool_started")
        .map(|e| {
            (
                e["call_id"].as_str().unwrap(),
                e["attempt"].as_u64().unwrap(),
            )
        })
        .collect();
    assert_eq!(starts, vec![("call_1", 1), ("call_2", 1), ("call_2", 2)]);
    let rerun = events
        .iter()
        .find(|e| e["type"] == "tool_completed" && e["call_id"] == "call_2")
        .unwrap();
    let output = rerun["output"].as_str().unwrap();
    assert!(
        output.contains("interrupted") && output.contains("second run"),
        "{output}"
    );
    let seqs: Vec<u64> = events.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=events.len() as u64).collect::<Vec<_>>());
}

const APPROVAL: &str = r#"
turns:
  - tool_calls:
      - bash: {command: "touch approved.txt"}
  - text: "finished"
"#;

#[test]
fn a_pending_approval_survives_and_the_pinned_policy_governs() {
    let toren = Toren::new();
    toren.file("s.yaml", APPROVAL);
    let agent = toren.agent("a", "name: a\nmodel: scripted/s.yaml\nsandbox: true\n");
    let mut child = toren.spawn(&["run", "a", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    kill9(&mut child);

    // The operator changes everything between crash and resume: none of it applies.
    std::fs::write(
        &agent,
        "name: a\nmodel: anthropic/claude-sonnet-5\nsandbox:\n  approval: never\n  network: true\n",
    )
    .unwrap();
    let toren = toren.env("TOREN_SANDBOX", "none");

    let mut resumed = toren.spawn(&["resume", &run]);
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        assert!(
            resumed.try_wait().unwrap().is_none(),
            "resume must wait for the decision"
        );
        if Instant::now() > deadline {
            panic!("resume never settled into waiting");
        }
        std::thread::sleep(Duration::from_millis(300));
        if toren.show(&run)["status"] == "awaiting_approval" {
            break;
        }
    }
    std::thread::sleep(Duration::from_millis(300));
    assert!(!toren.workspace(&run).join("approved.txt").exists());
    assert_eq!(
        count(&toren.events(&run), "approval_requested"),
        1,
        "not asked twice"
    );

    let ok = toren.run(&["approve", &run, "call_1"]);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    let out = resumed.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("call call_1 still waits for approval"),
        "{stderr}"
    );
    assert!(toren.workspace(&run).join("approved.txt").exists());
    let events = toren.events(&run);
    assert_eq!(events[0]["agent"]["model"], "scripted/s.yaml");
    assert_eq!(events[0]["policy"]["approval"], "always");
}

#[test]
fn resuming_an_ended_run_changes_nothing() {
    let toren = Toren::new();
    toren.file("s.yaml", "turns:\n  - text: done\n");
    toren.agent("a", "name: a\nmodel: scripted/s.yaml\n");
    let out = toren.run(&["run", "a", "--input", "go"]);
    assert_eq!(out.status.code(), Some(0));
    let run = toren.newest_run().unwrap();
    let before = toren.events(&run);
    let out = toren.run(&["resume", &run]);
    assert_eq!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("already completed"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(toren.events(&run), before);
    let unknown = toren.run(&["resume", "run_01nosuchrun"]);
    assert_eq!(unknown.status.code(), Some(1));
    assert!(text(&unknown.stderr).contains("run_01nosuchrun"));
}
