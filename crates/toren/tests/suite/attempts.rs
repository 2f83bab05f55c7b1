//! Two attempts of the same command never run at once, through the real binary on each
//! backend whose sandbox can outlive its driver (docker: a container; local: bubblewrap,
//! which dies with it). A command appends numbered lines for 8 s; its driver is killed
//! (SIGKILL) after a few of them and the run resumed at once: the second attempt starts
//! only once the first is dead, so no line of the first attempt follows a line of the
//! second in the log file, and the first attempt's lines stop where it was killed.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;

use super::common::{Toren, read, text};

/// Appends `ATTEMPT N` for N in 1..=40, one line every 0.2 s (ATTEMPT: a random number
/// per attempt; a PID would repeat, each attempt starting in a fresh PID namespace).
const SLOW: &str =
    "a=$RANDOM$RANDOM; for i in $(seq 1 40); do echo \"$a $i\" >> log.txt; sleep 0.2; done";

fn never_at_once(backend: &str) {
    let toren = Toren::new().env("TOREN_SANDBOX", backend);
    toren.file(
        "slow-turns.yaml",
        &format!(
            "turns:\n  - tool_calls:\n      - bash: {{command: {SLOW:?}}}\n  - text: \"done\"\n"
        ),
    );
    toren.agent(
        "slow",
        "name: slow\nmodel: scripted/slow-turns.yaml\nsandbox:\n  approval: never\n",
    );
    let mut child = toren.spawn(&["run", "slow", "append"]);
    let run = toren.wait_for_status(&mut child, "running");
    let log = toren.workspace(&run).join("log.txt");
    let deadline = Instant::now() + Duration::from_secs(60);
    while std::fs::read_to_string(&log).map_or(0, |t| t.lines().count()) < 5 {
        assert!(child.try_wait().unwrap().is_none(), "toren exited early");
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(50));
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let out = toren.run(&["resume", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    // Whatever the first attempt could still write, it would have by now.
    std::thread::sleep(Duration::from_millis(600));
    let lines: Vec<(String, u32)> = read(&log)
        .lines()
        .map(|l| {
            let (pid, n) = l.split_once(' ').unwrap();
            (pid.to_owned(), n.parse().unwrap())
        })
        .collect();
    let first = lines[0].0.clone();
    let switch = lines
        .iter()
        .position(|(pid, _)| *pid != first)
        .expect("a second attempt wrote lines");
    // The first attempt's lines, then only the second's, counting from 1 to 40.
    assert!(
        lines[switch..].iter().all(|(pid, _)| *pid != first),
        "the attempts interleaved: {lines:?}"
    );
    let second: Vec<u32> = lines[switch..].iter().map(|(_, n)| *n).collect();
    assert_eq!(second, (1..=40).collect::<Vec<_>>());
    let started = toren
        .events(&run)
        .iter()
        .filter(|e| e["type"] == "tool_started")
        .count();
    assert_eq!(started, 2);
}

#[test]
fn two_attempts_of_a_command_never_run_at_once_in_docker() {
    never_at_once("docker");
}

#[test]
fn two_attempts_of_a_command_never_run_at_once_locally() {
    never_at_once("local");
}
