//! Under `approval: always`, no bash command starts before a human decided, decisions
//! come from another terminal, a denial reaches the model, and a call is decided once.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::common::{Toren, interrupt, text};
use super::pty::Terminal;

const SCRIPT: &str = r#"
turns:
  - tool_calls:
      - bash: {command: "touch approved.txt"}
      - bash: {command: "touch denied.txt"}
      - write_file: {path: free.txt, content: "file tools never ask\n"}
  - text: "finished"
"#;

fn position(events: &[Value], kind: &str, call: &str) -> Option<usize> {
    events
        .iter()
        .position(|e| e["type"] == kind && e["call_id"] == call)
}

#[test]
fn bash_waits_for_decisions_from_another_terminal() {
    let toren = Toren::new();
    toren.file("s.yaml", SCRIPT);
    toren.agent(
        "careful",
        "name: careful\nmodel: scripted/s.yaml\nsandbox: true\n",
    );
    let mut child = toren.spawn(&["run", "careful", "--input", "go"]);

    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    let ws = toren.workspace(&run);
    // Give a wrongly eager runtime the chance to run the command anyway.
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !ws.join("approved.txt").exists(),
        "nothing ran before the decision"
    );
    let events = toren.events(&run);
    assert_eq!(position(&events, "tool_started", "call_1"), None);
    assert_eq!(toren.show(&run)["pending_approval"]["call_id"], "call_1");
    assert_eq!(
        toren.show(&run)["pending_approval"]["command"],
        "touch approved.txt"
    );

    // A decision for a call that is not pending is refused.
    let early = toren.run(&["approve", &run, "call_2"]);
    assert_ne!(early.status.code(), Some(0));

    let ok = toren.run(&["approve", &run, "call_1"]);
    assert_eq!(ok.status.code(), Some(0), "{}", text(&ok.stderr));
    // A second decision for the same call is refused, and not recorded.
    let again = toren.run(&["deny", &run, "call_1", "--reason", "changed my mind"]);
    assert_ne!(again.status.code(), Some(0));
    assert!(
        text(&again.stderr).contains("already"),
        "{}",
        text(&again.stderr)
    );

    // The run goes on to the next bash call and waits again.
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while position(&toren.events(&run), "approval_requested", "call_2").is_none() {
        assert!(
            std::time::Instant::now() < deadline,
            "second approval never requested"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(ws.join("approved.txt").exists());
    let denied = toren.run(&["deny", &run, "call_2", "--reason", "no stray files please"]);
    assert_eq!(denied.status.code(), Some(0), "{}", text(&denied.stderr));

    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "finished\n");
    assert!(
        stderr.contains(&format!("toren approve {run} call_1")),
        "says how to answer: {stderr}"
    );
    assert!(
        !ws.join("denied.txt").exists(),
        "a denied command never runs"
    );
    assert!(ws.join("free.txt").exists());

    let events = toren.events(&run);
    let decided = position(&events, "approval_decided", "call_1").unwrap();
    let started = position(&events, "tool_started", "call_1").unwrap();
    assert!(decided < started, "approval_decided precedes tool_started");
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "approval_decided")
            .count(),
        2
    );
    assert_eq!(position(&events, "tool_started", "call_2"), None);
    let denial = &events[position(&events, "tool_completed", "call_2").unwrap()];
    assert_eq!(denial["is_error"], true);
    assert!(
        denial["output"]
            .as_str()
            .unwrap()
            .contains("no stray files please"),
        "{denial}"
    );
    assert_eq!(
        position(&events, "approval_requested", "call_3"),
        None,
        "file tools never ask"
    );
}

#[test]
fn approval_never_runs_bash_directly() {
    let toren = Toren::new();
    toren.file("s.yaml", SCRIPT);
    toren.agent(
        "free",
        "name: free\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    let out = toren.run(&["run", "free", "--input", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run = toren.newest_run().unwrap();
    assert!(toren.workspace(&run).join("denied.txt").exists());
    assert!(
        !toren
            .event_types(&run)
            .iter()
            .any(|t| t.starts_with("approval"))
    );
}

#[test]
fn on_a_terminal_toren_run_asks() {
    // A pseudo-terminal for stdin, stdout and stderr; each answer is typed after its
    // question appeared (keys typed earlier answer nothing: `suite::terminal`).
    let toren = Toren::new();
    toren.file("s.yaml", SCRIPT);
    toren.agent(
        "careful",
        "name: careful\nmodel: scripted/s.yaml\nsandbox: true\n",
    );
    let mut term = Terminal::spawn(&toren, &["run", "careful", "--input", "go"]);
    let first = term.wait_for("approve? [y]es / [n]o: ");
    assert!(first.contains("$ touch approved.txt"), "{first}");
    term.type_keys("y\n");
    let second = term.wait_for("approve? [y]es / [n]o: ");
    assert!(second.contains("$ touch denied.txt"), "{second}");
    term.type_keys("n\n");
    term.wait_for("reason for the model (optional): ");
    term.type_keys("not that one\n");
    let (status, shown) = term.finish();
    assert_eq!(status.code(), Some(0), "{shown}");
    let run = toren.newest_run().unwrap();
    let ws = toren.workspace(&run);
    assert!(ws.join("approved.txt").exists());
    assert!(!ws.join("denied.txt").exists());
    let events = toren.events(&run);
    let decisions: Vec<(&str, bool, &str)> = events
        .iter()
        .filter(|e| e["type"] == "approval_decided")
        .map(|e| {
            (
                e["call_id"].as_str().unwrap(),
                e["approved"].as_bool().unwrap(),
                e["via"].as_str().unwrap(),
            )
        })
        .collect();
    assert_eq!(
        decisions,
        vec![("call_1", true, "terminal"), ("call_2", false, "terminal")]
    );
    let denial = &events[position(&events, "tool_completed", "call_2").unwrap()];
    assert!(
        denial["output"].as_str().unwrap().contains("not that one"),
        "{denial}"
    );
}

#[test]
fn ctrl_c_while_waiting_exits_130_and_keeps_the_run() {
    let toren = Toren::new();
    toren.file("s.yaml", SCRIPT);
    toren.agent(
        "careful",
        "name: careful\nmodel: scripted/s.yaml\nsandbox: true\n",
    );
    let mut child = toren.spawn(&["run", "careful", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    interrupt(&child);
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(130), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    assert!(text(&out.stderr).contains(&run), "{}", text(&out.stderr));
    // The run is left exactly where it was: still waiting, nothing ran.
    assert_eq!(toren.show(&run)["status"], "awaiting_approval");
    assert!(!toren.workspace(&run).join("approved.txt").exists());
}

#[test]
fn a_host_request_whose_call_ended_is_refused_with_exit_2_and_nothing_written() {
    let toren = Toren::new();
    toren.file(
        "s.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"pip install x\"}\n  - text: done\n",
    );
    toren.agent(
        "fetcher",
        "name: fetcher\nmodel: scripted/s.yaml\nsandbox: true\n",
    );
    let mut child = toren.spawn(&["run", "fetcher", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    let call = toren.show(&run)["pending_approval"]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    child.kill().unwrap();
    child.wait().unwrap();

    // What a driver writes when the approved command reaches a host the policy asks
    // about, nobody answers, and the command ends (its connection gave up).
    let db = toren.dir.path().join("toren").join("toren.db");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        use toren_protocol::{EventKind, HostApprovalRequested, ToolCompleted, ToolStarted};
        use toren_store::EventLog;
        let store = toren_store::SqliteStore::open(&format!("sqlite://{}", db.display()))
            .await
            .unwrap();
        let run_id: toren_protocol::RunId = run.parse().unwrap();
        let decided = toren_protocol::ApprovalDecided {
            call_id: call.clone(),
            approved: true,
            by: "ana".into(),
            via: "cli".into(),
            reason: None,
        };
        store.decide_approval(&run_id, decided).await.unwrap();
        let summary = store.run(&run_id).await.unwrap();
        let dead = summary.lease.unwrap().holder;
        let lease = store
            .take_over_lease(&run_id, &dead, "test/1/1", Duration::from_secs(5))
            .await
            .unwrap();
        let kinds = vec![
            EventKind::ToolStarted(ToolStarted {
                call_id: call.clone(),
                tool: "bash".into(),
                attempt: 1,
                checkpoint: None,
            }),
            EventKind::HostApprovalRequested(HostApprovalRequested::new(
                "pypi.test",
                443,
                Some((call.clone(), "pip install x".into())),
            )),
            EventKind::ToolCompleted(ToolCompleted {
                call_id: call.clone(),
                output: "connection refused".into(),
                is_error: true,
                exit_code: Some(1),
                truncated: false,
            }),
        ];
        store.append(&lease, summary.last_seq, kinds).await.unwrap();
        store.release_lease(&lease).await.unwrap();
    });

    let before = toren.events(&run);
    assert!(toren.show(&run)["pending_approval"].is_null());
    for answer in ["approve", "deny"] {
        let out = toren.run(&[answer, &run, "host:pypi.test"]);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{answer}: {stderr}");
        assert!(
            stderr.contains("host:pypi.test") && stderr.contains("which has ended"),
            "{stderr}"
        );
    }
    assert_eq!(
        toren.events(&run),
        before,
        "a refused decision writes nothing"
    );
}
