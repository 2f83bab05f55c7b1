//! `toren cancel` from another process: a running command is stopped, a run waiting for
//! approval ends, the container or sandbox is released, and a cancelled run can be neither
//! resumed nor decided.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::json;

use super::common::{Toren, text};
use super::trust::harness::processes_with;

fn wait_until(what: &str, mut done: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !done() {
        assert!(Instant::now() < deadline, "{what} never happened");
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn cancel_a_running_command(toren: &Toren) {
    const MARKER: &str = "cancel-probe-6d1f";
    let script = json!({"turns": [
        {"tool_calls": [{"bash": {"command": format!("touch started; sleep 30 # {MARKER}")}}]},
        {"text": "never reached"},
    ]});
    toren.file("s.yaml", &script.to_string());
    toren.agent(
        "c",
        "name: c\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    let mut child = toren.spawn(&["run", "c", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "running");
    let ws = toren.workspace(&run);
    wait_until("the command starting", || ws.join("started").exists());

    let cancelled_at = Instant::now();
    let out = toren.run(&["cancel", &run, "--reason", "wrong branch"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = child.wait_with_output().unwrap();
    let stopped_in = cancelled_at.elapsed();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        stopped_in < Duration::from_secs(10),
        "the run stopped {stopped_in:?} after the cancel"
    );
    assert_eq!(
        processes_with(MARKER),
        vec![],
        "the running command was killed"
    );
    let shown = toren.show(&run);
    assert_eq!(shown["status"], "cancelled");
    assert_eq!(shown["resumable"], false);
    let events = toren.events(&run);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "run_cancelled");
    assert_eq!(last["reason"], "wrong branch");
    assert_eq!(last["via"], "cli");
    assert!(
        !events.iter().any(|e| e["type"] == "tool_completed"),
        "the killed command's result is not recorded"
    );

    // Cancelled for good: no resume, no second cancel.
    let out = toren.run(&["resume", &run]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("cancelled"),
        "{}",
        text(&out.stderr)
    );
    let out = toren.run(&["cancel", &run]);
    assert_ne!(out.status.code(), Some(0));
    assert_eq!(
        toren.events(&run).len(),
        events.len(),
        "nothing more was written"
    );
}

#[test]
fn cancel_stops_a_running_command_from_another_process() {
    cancel_a_running_command(&Toren::new());
}

#[test]
fn cancel_stops_a_running_command_in_a_docker_container_and_releases_it() {
    let toren = Toren::new().env("TOREN_SANDBOX", "docker");
    cancel_a_running_command(&toren);
    let run = toren.newest_run().unwrap();
    let out = toren.run(&["sandbox", "list", "--json"]);
    assert!(
        !text(&out.stdout).contains(&run),
        "the cancelled run's container was removed: {}",
        text(&out.stdout)
    );
}

#[test]
fn cancel_ends_a_run_waiting_for_approval_and_nothing_runs() {
    let toren = Toren::new();
    let script = json!({"turns": [
        {"tool_calls": [{"bash": {"command": "touch ran"}}]},
        {"text": "never reached"},
    ]});
    toren.file("s.yaml", &script.to_string());
    toren.agent("w", "name: w\nmodel: scripted/s.yaml\nsandbox: true\n");
    let mut child = toren.spawn(&["run", "w", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    let call = toren.show(&run)["pending_approval"]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();

    let out = toren.run(&["cancel", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(!toren.workspace(&run).join("ran").exists());
    assert_eq!(toren.show(&run)["status"], "cancelled");

    // A decision after the cancellation changes nothing.
    let out = toren.run(&["approve", &run, &call]);
    assert_ne!(out.status.code(), Some(0));
    assert!(!toren.workspace(&run).join("ran").exists());
    assert!(
        !toren
            .events(&run)
            .iter()
            .any(|e| e["type"] == "tool_started")
    );
}

#[test]
fn cancelling_an_unknown_run_is_refused() {
    let toren = Toren::new();
    let out = toren.run(&["cancel", "run_01jqz5m3k8v7c2x9n4b6t0r1ya"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("run_01jqz5m3k8v7c2x9n4b6t0r1ya"),
        "{}",
        text(&out.stderr)
    );
}
