//! `toren rewind` through the real binary with a sandbox whose PID 1 is the `toren-exec`
//! helper (the local backend's kept sandbox, and a docker container): a loop the agent
//! left running in the background cannot rewrite the workspace after the rewind restored
//! it. The loop is started by the run's first bash call, in the background of a call that
//! returned (the helper ends what a command left behind) or of one still running when the
//! process driving the run was killed: locally the kept sandbox ends with its input; a
//! container outlives its driver, and the rewind removes it before restoring (a run's,
//! and a session's container, which its turns share).

use std::io::Write as _;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use toren_test_support::{FakeOpenAi, Reply};

use super::common::{Toren, bash, text};

const LOOP: &str = "(while true; do echo x >> bg.txt; sleep 0.05; done) &";

/// The static helper, built by `scripts/build-exec-helper` (seconds when up to date).
fn helper() -> String {
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let out = Command::new(repo.join("scripts/build-exec-helper"))
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
    text(&out.stdout).trim().to_owned()
}

fn pending_call(toren: &Toren, run: &str) -> Option<String> {
    toren.show(run)["pending_approval"]["call_id"]
        .as_str()
        .map(str::to_owned)
}

/// Waits until `ready` holds, failing after a minute.
fn wait(what: &str, mut ready: impl FnMut() -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ready() {
        assert!(Instant::now() < deadline, "timed out waiting for {what}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// The step just before the first event of call `c1` (the model's answer asking for it).
fn step_before_first_call(events: &[Value]) -> u64 {
    let first = events
        .iter()
        .find(|e| e["call_id"] == "c1")
        .and_then(|e| e["seq"].as_u64())
        .unwrap();
    events
        .iter()
        .filter_map(|e| e["seq"].as_u64())
        .filter(|s| *s < first)
        .max()
        .unwrap()
}

/// Runs `first` (approved) then, with `kill_during_first`, kills the driving process
/// while `first` still runs, else once the second call waits for approval; rewinds to
/// before `first` and checks that `bg.txt` stays absent a second later.
fn background_does_not_survive(backend: &str, first: &str, kill_during_first: bool) {
    let fake = FakeOpenAi::start(vec![bash("c1", first), bash("c2", "echo second")]).unwrap();
    let toren = Toren::new()
        .env("TOREN_SANDBOX", backend)
        .env("OLLAMA_HOST", &fake.host_url())
        .env("TOREN_EXEC_HELPER", &helper());
    toren.agent("r", "name: r\nmodel: ollama/llama3.2\nsandbox: true\n");
    let mut child = toren.spawn(&["run", "r", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    wait("c1's approval", || {
        pending_call(&toren, &run).as_deref() == Some("c1")
    });
    let out = toren.run(&["approve", &run, "c1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let ws = toren.workspace(&run);
    if kill_during_first {
        wait("the loop to write", || ws.join("bg.txt").exists());
    } else {
        wait("c2's approval", || {
            pending_call(&toren, &run).as_deref() == Some("c2")
        });
    }
    child.kill().unwrap();
    child.wait().unwrap();

    let step = step_before_first_call(&toren.events(&run));
    if backend == "docker" {
        // A daemon that does not answer cannot stop the container: refused, nothing written.
        let before = toren.events(&run).len();
        let out = toren
            .command(&["rewind", &run, "--to", &step.to_string()])
            .env("DOCKER_HOST", "unix:///nonexistent/docker.sock")
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
        assert!(
            text(&out.stderr).contains("cannot be stopped before the restore"),
            "{}",
            text(&out.stderr)
        );
        assert_eq!(toren.events(&run).len(), before);
    }
    let out = toren.run(&["rewind", &run, "--to", &step.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    stays_gone(&ws);
}

/// `bg.txt`, which the loop writes every 50 ms, is gone after the restore and stays gone.
fn stays_gone(ws: &Path) {
    assert!(!ws.join("bg.txt").exists(), "the restore left bg.txt");
    // Observation window for a survivor, not synchronisation.
    std::thread::sleep(Duration::from_secs(1));
    assert!(
        !ws.join("bg.txt").exists(),
        "a background process rewrote the workspace after the rewind"
    );
}

/// A session `s` of an agent `w` (docker, no approvals) on `fake`, made by `toren chat`;
/// its workspace.
fn docker_session(fake: &FakeOpenAi) -> (Toren, PathBuf) {
    let toren = Toren::new()
        .env("TOREN_SANDBOX", "docker")
        .env("OLLAMA_HOST", &fake.host_url())
        .env("TOREN_EXEC_HELPER", &helper());
    toren.agent(
        "w",
        "name: w\nmodel: ollama/llama3.2\nsandbox:\n  approval: never\n",
    );
    let out = toren.run(&["chat", "s", "--agent", "w"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = toren.run(&["sessions", "show", "s", "--json"]);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    let ws = PathBuf::from(shown["workspace"].as_str().unwrap());
    (toren, ws)
}

#[test]
fn a_loop_left_in_the_background_does_not_outlive_a_rewind() {
    background_does_not_survive("local", LOOP, false);
}

#[test]
fn a_loop_of_a_call_cut_short_does_not_outlive_a_rewind() {
    background_does_not_survive("local", &format!("{LOOP} sleep 600"), true);
}

#[test]
fn a_loop_left_in_a_container_does_not_outlive_a_rewind() {
    background_does_not_survive("docker", LOOP, false);
}

#[test]
fn a_loop_of_a_container_call_cut_short_does_not_outlive_a_rewind() {
    background_does_not_survive("docker", &format!("{LOOP} sleep 600"), true);
}

/// A session's turn whose command left a loop running in the session's container when
/// its `toren chat` was killed: once the turn is cancelled, `toren rewind SESSION --to 1`
/// removes the container before restoring, so the loop cannot rewrite the workspace.
#[test]
fn a_loop_of_a_session_turn_cut_short_does_not_outlive_the_sessions_rewind() {
    let fake = FakeOpenAi::start(vec![bash("c1", &format!("{LOOP} sleep 600"))]).unwrap();
    let (toren, ws) = docker_session(&fake);
    let mut chat = toren
        .command(&["chat", "s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    // The message, and stdin kept open: the chat stays in its turn until killed.
    let mut stdin = chat.stdin.take().unwrap();
    stdin.write_all(b"go\n").unwrap();
    wait("the loop to write", || ws.join("bg.txt").exists());
    chat.kill().unwrap();
    chat.wait().unwrap();
    drop(stdin);

    // The turn no one drives any more is cancelled (no driver: its container stays, the
    // loop still writing), then the session goes back to before it.
    let turn = toren.run(&["sessions", "show", "s", "--json"]);
    let turn: Value = serde_json::from_slice(&turn.stdout).unwrap();
    let run = turn["turns"][0]["run"].as_str().unwrap().to_owned();
    let out = toren.run(&["cancel", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = toren.run(&["rewind", "s", "--to", "1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    stays_gone(&ws);
}

/// `/undo` in a docker session's chat, which removes whatever container the session still
/// has: the chat's next turn runs its command in a fresh one around the restored
/// workspace, as if nothing had happened (not as a container lost mid-command).
#[test]
fn a_docker_chat_goes_on_in_a_fresh_container_after_undo() {
    let fake = FakeOpenAi::start(vec![
        bash("c1", "echo one > one.txt"),
        Reply::text("wrote one"),
        bash("c2", "ls; echo two > two.txt"),
        Reply::text("wrote two"),
    ])
    .unwrap();
    let (toren, ws) = docker_session(&fake);
    let mut chat = toren
        .command(&["chat", "s"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    chat.stdin
        .take()
        .unwrap()
        .write_all(b"first\n/undo\nsecond\n")
        .unwrap();
    let out = chat.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("is back at before turn 1"),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("wrote two"),
        "{}",
        text(&out.stdout)
    );
    // The second command ran whole, in a workspace without the undone file.
    let last = fake.requests().last().unwrap().body["messages"].clone();
    let result = last
        .as_array()
        .unwrap()
        .iter()
        .rfind(|m| m["role"] == "tool")
        .map(|m| m["content"].to_string())
        .unwrap();
    assert!(!result.contains("one.txt"), "{result}");
    assert!(!result.contains("container"), "{result}");
    assert!(ws.join("two.txt").exists() && !ws.join("one.txt").exists());
}
