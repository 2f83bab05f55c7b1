//! Approval cannot be bypassed (I-9). Beyond `suite::approval` (which shows the ordinary
//! flow): while a bash call waits, and after it is denied, no process of the run exists at
//! all — watched on the host, where any sandbox shows the run's workspace in bubblewrap's
//! argv; a decision after a denial is refused and changes nothing; decisions racing from
//! several terminals are applied exactly once; decisions for unknown runs and calls are
//! refused.

use std::process::Output;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

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
    let ws = harness::workspace(&toren, &run).display().to_string();
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
    assert!(
        !harness::workspace(&toren, &run)
            .join("pending.txt")
            .exists()
    );
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
    let counted = std::fs::read_to_string(harness::workspace(&toren, &run).join("count.txt"));
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

/// What a human approves is exactly what runs (I-11): bash arguments in every encoding a
/// model or provider may send are decoded once, by the code the tool uses, and the command
/// the approval shows is the one whose effect appears; arguments that do not decode are
/// refused without a prompt and run nothing.
pub(crate) fn shown_is_what_runs(backend: &Backend) {
    // (arguments, the command that must be shown and run; None: refused, nothing runs)
    let probes: Vec<(Value, Option<&str>)> = vec![
        (
            json!({"command": "echo a > f1.txt"}),
            Some("echo a > f1.txt"),
        ),
        (
            json!(r#"{"command": "echo b > f2.txt"}"#),
            Some("echo b > f2.txt"),
        ),
        (
            json!(r#"{"command": "\u0065\u0063\u0068\u006f c > f3.txt"}"#),
            Some("echo c > f3.txt"),
        ),
        (
            json!(r#"{"command": "echo d > f4.txt", "timeout_secs": 5}"#),
            Some("echo d > f4.txt"),
        ),
        (
            json!(r#"{"command": "echo e \u003e f5.txt\necho e2 \u003e f5b.txt"}"#),
            Some("echo e > f5.txt\necho e2 > f5b.txt"),
        ),
        // Duplicate keys: whichever one decoding keeps is both shown and run.
        (
            json!(r#"{"command": "echo x > f6x.txt", "command": "echo y > f6.txt"}"#),
            Some("echo y > f6.txt"),
        ),
        (json!(r#""echo g > f7.txt""#), None),
        (json!({"cmd": "echo h > f8.txt"}), None),
        (json!({"command": "echo i > f9.txt", "sudo": true}), None),
        (json!(r#"{"command": "echo j > f10.txt"} trailing"#), None),
        (json!({"command": ["echo", "k > f11.txt"]}), None),
        (json!(r#"[{"command": "echo l > f12.txt"}]"#), None),
    ];
    let calls: Vec<Vec<harness::Call>> = probes
        .iter()
        .map(|(args, _)| vec![harness::call("bash", args.clone())])
        .collect();
    let toren = harness::toren_for(backend);
    harness::agent(&toren, "encoded", "  approval: always\n", &calls);
    let mut child = toren.spawn(&["run", "encoded", "--input", "probe"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");

    let mut expected_files: Vec<String> = Vec::new();
    for (index, (args, shown)) in probes.iter().enumerate() {
        let call = format!("call_{}", index + 1);
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            let events = toren.events(&run);
            if has(&events, "tool_completed", &call) {
                assert_eq!(*shown, None, "{args}: completed without an approval");
                assert!(!has(&events, "tool_started", &call), "{args}: it ran");
                assert!(!has(&events, "approval_requested", &call), "{args}");
                break;
            }
            if has(&events, "approval_requested", &call) {
                let request = events
                    .iter()
                    .find(|e| e["type"] == "approval_requested" && e["call_id"] == call)
                    .unwrap();
                assert_eq!(request["command"].as_str(), *shown, "{args}");
                let out = toren.run(&["approve", &run, &call]);
                assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
                for line in shown.unwrap().lines() {
                    let file = line.rsplit("> ").next().unwrap().to_owned();
                    let deadline = Instant::now() + Duration::from_secs(30);
                    // Under e2b the workspace is the sandbox's, made at the first command.
                    while !harness::workspace(&toren, &run).join(&file).exists() {
                        assert!(Instant::now() < deadline, "{args}: `{file}` never appeared");
                        std::thread::sleep(Duration::from_millis(20));
                    }
                    expected_files.push(file);
                }
                break;
            }
            assert!(
                Instant::now() < deadline,
                "{args}: neither asked nor answered"
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let ws = harness::workspace(&toren, &run);
    let mut made: Vec<String> = std::fs::read_dir(&ws)
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    made.sort();
    expected_files.sort();
    assert_eq!(made, expected_files, "exactly the approved commands ran");
    report(backend, "approval (shown is what runs)", probes.len());
}
