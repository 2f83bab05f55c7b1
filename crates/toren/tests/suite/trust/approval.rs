//! Approval cannot be bypassed (I-9). Beyond `suite::approval` (which shows the ordinary
//! flow): while a bash call waits, and after it is denied, no process of the run exists at
//! all — watched on the host, where any sandbox shows the run's workspace in bubblewrap's
//! argv; a decision after a denial is refused and changes nothing; decisions racing from
//! several terminals are applied exactly once; decisions for unknown runs and calls are
//! refused.

use std::process::Output;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::harness::{self, bash, processes_with};
use super::{Backend, report};
use crate::suite::common::{Toren, text};

const MARKER: &str = "approval-probe-5c7e";

/// Watches the host for `within`: any process naming `marker` or the workspace `ws`.
fn spawned_during(marker: &str, ws: &str, within: Duration) -> Vec<(u32, String)> {
    let deadline = Instant::now() + within;
    let mut seen = Vec::new();
    while Instant::now() < deadline {
        seen.extend(processes_with(marker));
        seen.extend(processes_with(ws));
        std::thread::sleep(Duration::from_millis(10));
    }
    seen
}

fn decisions(events: &[Value], call: &str) -> usize {
    events
        .iter()
        .filter(|e| e["type"] == "approval_decided" && e["call_id"] == call)
        .count()
}

fn has(events: &[Value], kind: &str, call: &str) -> bool {
    events
        .iter()
        .any(|e| e["type"] == kind && e["call_id"] == call)
}

fn wait_for_request(toren: &Toren, run: &str, call: &str) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while !has(&toren.events(run), "approval_requested", call) {
        assert!(
            Instant::now() < deadline,
            "{call} never waited for approval"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn refused(out: &Output) -> bool {
    out.status.code() != Some(0)
}

pub(crate) fn suite(backend: &Backend) {
    let toren = harness::toren_for(backend);
    let slow = format!("sleep 5; echo {MARKER} > pending.txt");
    harness::agent(
        &toren,
        "guarded",
        "  approval: always\n",
        &[vec![bash(&slow), bash("echo ran >> count.txt")]],
    );
    let mut child = toren.spawn(&["run", "guarded", "--input", "probe"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    let ws = toren.workspace(&run).display().to_string();
    let mut count = 0;

    // Not yet decided: nothing of the run runs.
    assert_eq!(spawned_during(MARKER, &ws, Duration::from_secs(1)), vec![]);
    assert!(!has(&toren.events(&run), "tool_started", "call_1"));
    count += 1;

    // Denied: still nothing, and a later approval is refused and changes nothing.
    let deny = toren.run(&["deny", &run, "call_1", "--reason", "not now"]);
    assert_eq!(deny.status.code(), Some(0), "{}", text(&deny.stderr));
    let approve_late = toren.run(&["approve", &run, "call_1"]);
    assert!(refused(&approve_late), "a second decision was accepted");
    assert!(
        text(&approve_late.stderr).contains("already"),
        "{}",
        text(&approve_late.stderr)
    );
    wait_for_request(&toren, &run, "call_2");
    assert_eq!(
        spawned_during(MARKER, &ws, Duration::from_millis(500)),
        vec![]
    );
    let events = toren.events(&run);
    assert!(!has(&events, "tool_started", "call_1"));
    assert_eq!(decisions(&events, "call_1"), 1);
    assert!(!toren.workspace(&run).join("pending.txt").exists());
    count += 2;

    // Decisions for a run or call that does not exist are refused.
    assert!(refused(&toren.run(&["approve", &run, "call_99"])));
    assert!(refused(&toren.run(&[
        "approve",
        "run_01jqz5m3k8v7c2x9n4b6t0r1ya",
        "call_2"
    ])));
    assert!(refused(&toren.run(&["approve", "not-a-run", "call_2"])));
    count += 3;

    // Several terminals decide call_2 at once: exactly one decision wins, applied once.
    // All four are started before any is waited for.
    let mut racers = Vec::new();
    for verb in ["approve", "deny", "approve", "deny"] {
        racers.push(toren.spawn(&[verb, &run, "call_2"]));
    }
    let outcomes: Vec<Output> = racers
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    let winners = outcomes
        .iter()
        .filter(|o| o.status.code() == Some(0))
        .count();
    assert_eq!(winners, 1, "exactly one racing decision is accepted");
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events = toren.events(&run);
    assert_eq!(decisions(&events, "call_2"), 1);
    let approved = events
        .iter()
        .find(|e| e["type"] == "approval_decided" && e["call_id"] == "call_2")
        .unwrap()["approved"]
        == true;
    let counted = std::fs::read_to_string(toren.workspace(&run).join("count.txt"));
    if approved {
        assert_eq!(
            counted.unwrap(),
            "ran\n",
            "an approved call runs exactly once"
        );
    } else {
        assert!(counted.is_err(), "a denied call never runs");
        assert!(!has(&events, "tool_started", "call_2"));
    }
    count += 1;

    // And after the run, nothing of it is left.
    assert_eq!(harness::gone(&ws, Duration::from_secs(2)), vec![]);
    count += 1;
    report(backend, "approval", count);
}
