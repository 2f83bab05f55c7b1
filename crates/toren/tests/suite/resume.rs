//! `toren resume` after `kill -9` of `toren run`: the log is replayed, nothing finished is
//! done again, an interrupted command is re-run (and the model told), a pending approval
//! stays pending, and the policy pinned at creation governs.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::common::{Toren, interrupt, read, text};

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
        stderr.contains("1 model answer, 1 completed tool call;"),
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
        text(&out.stderr).contains("already ended (completed)"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(toren.events(&run), before);
    // A run nobody has is the caller's mistake (a usage error, naming what to give).
    let unknown = toren.run(&["resume", "run_01nosuchrun"]);
    assert_eq!(unknown.status.code(), Some(2));
    assert!(text(&unknown.stderr).contains("run_01nosuchrun"));
}

/// The `resumable` flag `toren runs list --json` gives the newest run.
fn listed_resumable(toren: &Toren) -> bool {
    let list: Value =
        serde_json::from_slice(&toren.run(&["runs", "list", "--json"]).stdout).unwrap();
    list[0]["resumable"].as_bool().unwrap()
}

/// Waits until a live process holds the newest run (a resume took its lease).
fn wait_until_held(toren: &Toren) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while listed_resumable(toren) {
        assert!(Instant::now() < deadline, "no process took the run's lease");
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn runs_list_tells_which_runs_can_be_resumed() {
    let toren = Toren::new();
    toren.file("s.yaml", APPROVAL);
    toren.agent("a", "name: a\nmodel: scripted/s.yaml\nsandbox: true\n");

    // While its process lives, a waiting run is driven: not resumable.
    let mut child = toren.spawn(&["run", "a", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    assert!(!listed_resumable(&toren));
    // Ctrl-C releases the lease: resumable at once, and the user is told how.
    interrupt(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130));
    assert!(
        text(&out.stderr).contains(&format!("toren resume {run}")),
        "{}",
        text(&out.stderr)
    );
    assert!(listed_resumable(&toren));
    let table = text(&toren.run(&["runs", "list"]).stdout);
    assert!(table.contains("awaiting_approval (resumable)"), "{table}");

    // kill -9 leaves a live lease behind, but its holder is a dead process of this machine.
    let mut child = toren.spawn(&["resume", &run]);
    wait_until_held(&toren);
    kill9(&mut child);
    assert!(listed_resumable(&toren));

    // A run that is being driven cannot be resumed twice.
    let mut first = toren.spawn(&["resume", &run]);
    wait_until_held(&toren);
    let second = toren.run(&["resume", &run]);
    assert_eq!(second.status.code(), Some(1));
    assert!(
        text(&second.stderr).contains("being driven by"),
        "{}",
        text(&second.stderr)
    );
    kill9(&mut first);
    assert_eq!(
        toren.run(&["approve", &run, "call_1"]).status.code(),
        Some(0)
    );
    let done = toren.run(&["resume", &run]);
    assert_eq!(done.status.code(), Some(0), "{}", text(&done.stderr));
    assert!(
        !listed_resumable(&toren),
        "a completed run is not resumable"
    );
}

/// Rewrites a run's pinned backend to `firecracker` (no toren has it) in the SQLite file
/// given as argv[1].
const PIN_UNKNOWN: &str = r#"
import sqlite3, sys
c = sqlite3.connect(sys.argv[1])
c.execute("""UPDATE events SET payload = replace(payload, '"backend":"local"', '"backend":"firecracker"') WHERE seq = 1""")
c.commit()
print(c.total_changes)
"#;

#[test]
fn a_resume_that_cannot_honour_the_pinned_backend_fails_and_keeps_the_run() {
    let toren = Toren::new();
    toren.file("s.yaml", APPROVAL);
    toren.agent("a", "name: a\nmodel: scripted/s.yaml\nsandbox: true\n");
    let mut child = toren.spawn(&["run", "a", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    kill9(&mut child);

    // The run was pinned to a backend this toren cannot provide (as if created by a toren
    // with another backend): rewrite the pinned policy in the database itself.
    let db = toren.dir.path().join("toren/toren.db");
    let edit = std::process::Command::new("python3")
        .args(["-c", PIN_UNKNOWN, db.to_str().unwrap()])
        .output()
        .unwrap();
    assert_eq!(text(&edit.stdout).trim(), "1", "{}", text(&edit.stderr));
    assert_eq!(toren.events(&run)[0]["policy"]["backend"], "firecracker");
    let out = toren.run(&["resume", &run]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("backend `firecracker` is not available"),
        "{stderr}"
    );
    assert!(listed_resumable(&toren), "the run is left resumable");
    assert_eq!(toren.show(&run)["status"], "awaiting_approval");
}

const KILLS_ITS_WORKER: &str = r#"
turns:
  - tool_calls:
      - bash: {command: "echo start >> starts.txt; sleep 60"}
  - text: "went on"
"#;

/// A tool call whose process keeps dying (here: killed each time it runs) is given up after
/// `MAX_TOOL_ATTEMPTS` starts, recorded in the log, instead of crash-looping on resume.
#[test]
fn a_call_that_keeps_killing_its_worker_is_given_up_after_three_attempts() {
    let toren = Toren::new();
    toren.file("s.yaml", KILLS_ITS_WORKER);
    toren.agent(
        "k",
        "name: k\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    let mut child = toren.spawn(&["run", "k", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "running");
    let starts = toren.workspace(&run).join("starts.txt");
    for attempt in 1..=3 {
        let deadline = Instant::now() + Duration::from_secs(30);
        while std::fs::read_to_string(&starts)
            .unwrap_or_default()
            .lines()
            .count()
            < attempt
        {
            assert!(Instant::now() < deadline, "attempt {attempt} never started");
            std::thread::sleep(Duration::from_millis(20));
        }
        kill9(&mut child);
        if attempt < 3 {
            child = toren.spawn(&["resume", &run]);
        }
    }
    let out = toren.run(&["resume", &run]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "went on\n");
    assert_eq!(
        read(&starts),
        "start\nstart\nstart\n",
        "not run a fourth time"
    );
    let events = toren.events(&run);
    assert_eq!(count(&events, "tool_started"), 3);
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_completed")
        .unwrap();
    assert_eq!(result["is_error"], true);
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("started 3 times and never completed"),
        "{result}"
    );
}

const ASKS_ON_INTERRUPT: &str = r#"
turns:
  - tool_calls:
      - bash: {command: "echo attempt >> attempts.log; if [ -f once ]; then echo second; else touch once; sleep 30; fi"}
  - text: "went on"
"#;

/// Starts a run under `on_interrupt: ask`, kills it mid-command, and resumes it: the
/// resumed run must ask before running the command again. Returns the run, its workspace
/// and the resuming process.
fn interrupted_asking_run(toren: &Toren) -> (String, std::path::PathBuf, std::process::Child) {
    toren.file("s.yaml", ASKS_ON_INTERRUPT);
    toren.agent(
        "careful",
        "name: careful\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n  on_interrupt: ask\n",
    );
    let mut child = toren.spawn(&["run", "careful", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "running");
    let ws = toren.workspace(&run);
    let deadline = Instant::now() + Duration::from_secs(30);
    while !ws.join("once").exists() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
    kill9(&mut child);

    let mut resumed = toren.spawn(&["resume", &run]);
    let deadline = Instant::now() + Duration::from_secs(30);
    let pending = loop {
        let shown = toren.show(&run);
        if !shown["pending_approval"].is_null() {
            break shown["pending_approval"].clone();
        }
        assert!(
            resumed.try_wait().unwrap().is_none(),
            "resume exited without asking"
        );
        assert!(Instant::now() < deadline, "the resumed run never asked");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert_eq!(pending["attempt"], 2);
    assert_eq!(pending["interrupted"], true);
    assert!(
        pending["command"]
            .as_str()
            .unwrap()
            .contains("attempts.log"),
        "{pending}"
    );
    (run, ws, resumed)
}

#[test]
fn on_interrupt_ask_asks_before_a_rerun_and_a_denial_reaches_the_model() {
    let toren = Toren::new();
    let (run, ws, resumed) = interrupted_asking_run(&toren);
    // Nothing ran again while it waits.
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(read(&ws.join("attempts.log")), "attempt\n");
    let call = toren.show(&run)["pending_approval"]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = toren.run(&["deny", &run, &call, "--reason", "it already ran"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = resumed.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "went on\n");
    assert!(stderr.contains("interrupted mid-execution"), "{stderr}");
    assert_eq!(read(&ws.join("attempts.log")), "attempt\n", "not re-run");
    let events = toren.events(&run);
    assert_eq!(count(&events, "tool_started"), 1);
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_completed")
        .unwrap();
    let output = result["output"].as_str().unwrap();
    assert!(output.contains("interrupted mid-execution"), "{output}");
    assert!(output.contains("it already ran"), "{output}");
    assert_eq!(result["is_error"], true);
}

#[test]
fn on_interrupt_ask_reruns_once_approved() {
    let toren = Toren::new();
    let (run, ws, resumed) = interrupted_asking_run(&toren);
    let call = toren.show(&run)["pending_approval"]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = toren.run(&["approve", &run, &call]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = resumed.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(read(&ws.join("attempts.log")), "attempt\nattempt\n");
    let events = toren.events(&run);
    assert_eq!(count(&events, "tool_started"), 2);
    let requested: Vec<u64> = events
        .iter()
        .filter(|e| e["type"] == "approval_requested")
        .map(|e| e["attempt"].as_u64().unwrap())
        .collect();
    assert_eq!(requested, vec![2], "only the re-run asked");
}
