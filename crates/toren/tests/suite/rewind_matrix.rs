//! Rewind against every state a run can be in, on each backend whose workspace is on this
//! host (`local`: real bubblewrap; `docker`: the machine's Docker Engine), through the real
//! binary with real SQLite and fake model servers. For each state the run is taken back to
//! the step after its first call's result, where the workspace held `a.txt` only, and
//! then driven on: the workspace is the step's, every command agrees on the state the run
//! is in, and the run (or the new run, for one that had ended) finishes from the step.
//!
//! | state the run is in                       | what going back does                      |
//! |-------------------------------------------|-------------------------------------------|
//! | driven by a live process                  | refused, nothing written                  |
//! | waiting for approval, nobody drives it     | rewound; the left-behind call is refused  |
//! | killed in the middle of a command          | what still runs is ended, then rewound    |
//! | paused at its budget                      | rewound, still paused; a raise goes on    |
//! | rewound already                           | rewound again, to an earlier step         |
//! | completed, failed, cancelled              | a new run goes on from the step           |
//!
//! A run waiting for a host decision is rewound as a run waiting for approval is (the
//! same fold, the same refusal of a decision the rewind left behind); its egress needs
//! a network namespace and is driven by the netns tests.

use std::path::Path;
use std::process::Child;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toren_test_support::{FakeAnthropic, FakeOpenAi, Reply, anthropic_sse};

use super::common::{Toren, bash, commands_sent, read, seq_of, text};

const FIRST: &str = "echo one > a.txt";
const SECOND: &str = "echo two > b.txt && rm a.txt";
const THIRD: &str = "echo three > c.txt";
/// Replaces `a.txt`, then writes a tick every 0.2 s until it is killed.
const FOREVER: &str =
    "echo two > b.txt && rm a.txt && while true; do date >> tick.txt; sleep 0.2; done";

fn home(backend: &str, fake: &FakeOpenAi) -> Toren {
    Toren::new()
        .env("TOREN_SANDBOX", backend)
        .env("OLLAMA_HOST", &fake.host_url())
        .env("TOREN_APPROVAL_POLL", "50ms")
}

fn agent(toren: &Toren, sandbox: &str) {
    toren.agent(
        "m",
        &format!("name: m\nmodel: ollama/llama3.2\nmax_turns: 10\nsandbox:\n{sandbox}"),
    );
}

/// Waits until `done` holds of the run's `runs show`, while `child` still runs.
fn wait_shown(toren: &Toren, child: &mut Child, run: &str, done: impl Fn(&Value) -> bool) {
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let shown = toren.show(run);
        if done(&shown) {
            return;
        }
        if let Some(exit) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            panic!("toren exited ({exit}) early: {shown} {stderr}");
        }
        assert!(Instant::now() < deadline, "never got there: {shown}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn pending_is(call: &'static str) -> impl Fn(&Value) -> bool {
    move |shown| shown["pending_approval"]["call_id"] == call
}

fn approve(toren: &Toren, run: &str, call: &str) {
    let out = toren.run(&["approve", run, call]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

fn kill(mut child: Child) {
    child.kill().unwrap();
    child.wait().unwrap();
}

fn rewind(toren: &Toren, run: &str, to: u64) -> std::process::Output {
    let out = toren.run(&["rewind", run, "--to", &to.to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    out
}

/// The workspace is the one of the step after the first call's result.
fn at_first_step(ws: &Path) {
    assert_eq!(read(&ws.join("a.txt")), "one\n", "{}", ws.display());
    for gone in ["b.txt", "c.txt", "tick.txt"] {
        assert!(!ws.join(gone).exists(), "{gone} in {}", ws.display());
    }
}

/// Whether the run's sandbox (its container on docker) is gone: nothing of its own runs.
fn no_container(toren: &Toren, run: &str) -> bool {
    let out = toren.run(&["sandbox", "list", "--json"]);
    !text(&out.stdout).contains(run)
}

/// `toren resume` finishes the run with `answer`, having sent the model the conversation
/// of the first step (the input, the first call and its result).
fn resumed_from_first_step(toren: &Toren, fake: &FakeOpenAi, run: &str, answer: &str) {
    fake.push(Reply::text(answer));
    let out = toren.run(&["resume", run]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), format!("{answer}\n"));
    let requests = fake.requests();
    let sent = &requests.last().unwrap().body;
    let commands = commands_sent(sent);
    assert_eq!(commands, [FIRST], "{sent}");
    assert_eq!(toren.show(run)["status"], "completed");
}

fn driven_by_a_live_process(backend: &str) {
    let fake = FakeOpenAi::start(vec![bash("c1", FIRST)]).unwrap();
    let toren = home(backend, &fake);
    agent(&toren, "  approval: always\n");
    let mut child = toren.spawn(&["run", "m", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    wait_shown(&toren, &mut child, &run, pending_is("c1"));
    let before = toren.events(&run);
    let out = toren.run(&["rewind", &run, "--to", "1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("is being driven by"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(toren.events(&run), before, "nothing written");
    kill(child);
}

fn waiting_for_approval(backend: &str) {
    let fake = FakeOpenAi::start(vec![
        bash("c1", FIRST),
        bash("c2", SECOND),
        bash("c3", THIRD),
    ])
    .unwrap();
    let toren = home(backend, &fake);
    agent(&toren, "  approval: always\n");
    let mut child = toren.spawn(&["run", "m", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    wait_shown(&toren, &mut child, &run, pending_is("c1"));
    approve(&toren, &run, "c1");
    wait_shown(&toren, &mut child, &run, pending_is("c2"));
    approve(&toren, &run, "c2");
    wait_shown(&toren, &mut child, &run, pending_is("c3"));
    kill(child);

    let step = seq_of(&toren.events(&run), "tool_completed", "c1");
    rewind(&toren, &run, step);
    let ws = toren.workspace(&run);
    at_first_step(&ws);
    // Nothing waits any more, on any front door; the call left behind takes no decision.
    let shown = toren.show(&run);
    assert_eq!(shown["status"], "running", "{shown}");
    assert!(shown["pending_approval"].is_null(), "{shown}");
    let out = toren.run(&["approve", &run, "c3"]);
    assert_ne!(out.status.code(), Some(0), "{}", text(&out.stderr));
    resumed_from_first_step(&toren, &fake, &run, "done from the step");
    at_first_step(&ws);
}

fn killed_in_the_middle_of_a_command(backend: &str) {
    let fake = FakeOpenAi::start(vec![bash("c1", FIRST), bash("c2", FOREVER)]).unwrap();
    let toren = home(backend, &fake);
    agent(&toren, "  approval: never\n");
    let mut child = toren.spawn(&["run", "m", "go"]);
    let run = toren.wait_for_status(&mut child, "running");
    let ws = toren.workspace(&run);
    let deadline = Instant::now() + Duration::from_secs(60);
    while !ws.join("tick.txt").exists() {
        assert!(child.try_wait().unwrap().is_none(), "toren exited");
        assert!(
            Instant::now() < deadline,
            "the second command never started"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    kill(child);

    let step = seq_of(&toren.events(&run), "tool_completed", "c1");
    rewind(&toren, &run, step);
    at_first_step(&ws);
    // Whatever the killed driver left running was ended before the restore: nothing
    // writes to the restored workspace.
    std::thread::sleep(Duration::from_millis(1_000));
    at_first_step(&ws);
    assert!(
        no_container(&toren, &run),
        "the run's sandbox was left running"
    );
    resumed_from_first_step(&toren, &fake, &run, "done after the kill");
    at_first_step(&ws);
}

/// A tool call answer (bash `command`) whose usage is 30 tokens in and 5 out.
fn costly_bash(id: &str, command: &str) -> Reply {
    Reply::RawSse(anthropic_sse(&[
        json!({"type": "message_start", "message": {"id": "m", "type": "message",
            "role": "assistant", "model": "claude-haiku-4-5", "content": [], "usage": {
            "input_tokens": 30, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use",
            "id": id, "name": "bash", "input": {"command": command}}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": 5}}),
        json!({"type": "message_stop"}),
    ]))
}

fn paused_at_its_budget(backend: &str) {
    let fake = FakeAnthropic::start([
        costly_bash("toolu_a", FIRST),
        costly_bash("toolu_b", SECOND),
        Reply::text("all done"),
    ])
    .unwrap();
    let toren = Toren::new()
        .env("TOREN_SANDBOX", backend)
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", &fake.base_url())
        .env("TOREN_APPROVAL_POLL", "50ms");
    toren.agent(
        "m",
        "name: m\nmodel: anthropic/claude-haiku-4-5\nsandbox:\n  approval: never\n\
         budget: {tokens: 40}\n",
    );
    let mut child = toren.spawn(&["run", "m", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_budget");
    kill(child);
    let ws = toren.workspace(&run);
    assert!(ws.join("b.txt").exists());

    let step = seq_of(&toren.events(&run), "tool_completed", "toolu_a");
    rewind(&toren, &run, step);
    at_first_step(&ws);
    // Still paused: it spent what it spent, and every command says so.
    assert_eq!(toren.show(&run)["status"], "awaiting_budget");
    let out = toren.run(&["budget", &run, "--add-tokens", "1000"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = toren.run(&["resume", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "all done\n");
    assert_eq!(toren.show(&run)["status"], "completed");
    // From the step, the model was asked again and answered: the second call, left
    // behind, did not run again.
    at_first_step(&ws);
}

fn rewound_already(backend: &str) {
    let fake = FakeOpenAi::start(vec![
        bash("c1", FIRST),
        bash("c2", SECOND),
        bash("c3", THIRD),
    ])
    .unwrap();
    let toren = home(backend, &fake);
    agent(&toren, "  approval: always\n");
    let mut child = toren.spawn(&["run", "m", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    let ws = toren.workspace(&run);
    for (call, next) in [("c1", "c2"), ("c2", "c3")] {
        wait_shown(&toren, &mut child, &run, pending_is(call));
        approve(&toren, &run, call);
        wait_shown(&toren, &mut child, &run, pending_is(next));
    }
    kill(child);
    let events = toren.events(&run);
    let second = seq_of(&events, "tool_completed", "c2");
    let first = seq_of(&events, "tool_completed", "c1");
    rewind(&toren, &run, second);
    assert!(ws.join("b.txt").exists() && !ws.join("c.txt").exists());
    // Rewound again, further back, before anything drove it.
    rewind(&toren, &run, first);
    at_first_step(&ws);
    // The step the first rewind went to was left behind by the second.
    let out = toren.run(&["rewind", &run, "--to", &second.to_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    resumed_from_first_step(&toren, &fake, &run, "done twice back");
}

/// A run that ends as `end` makes it, then goes on from its first step as a new run.
fn ended(backend: &str, end: &str) {
    let mut replies = vec![bash("c1", FIRST), bash("c2", SECOND)];
    match end {
        "completed" => replies.push(Reply::text("finished")),
        // Cancelled while its third call waits for approval, nobody driving it.
        "cancelled" => replies.push(bash("c3", THIRD)),
        _ => {}
    }
    let fake = FakeOpenAi::start(replies).unwrap();
    let toren = home(backend, &fake);
    match end {
        "failed" => toren.agent(
            "m",
            "name: m\nmodel: ollama/llama3.2\nmax_turns: 2\nsandbox:\n  approval: never\n",
        ),
        "cancelled" => toren.agent(
            "m",
            "name: m\nmodel: ollama/llama3.2\nsandbox:\n  approval: always\n",
        ),
        _ => toren.agent(
            "m",
            "name: m\nmodel: ollama/llama3.2\nsandbox:\n  approval: never\n",
        ),
    };
    let run = if end == "cancelled" {
        let mut child = toren.spawn(&["run", "m", "go"]);
        let run = toren.wait_for_status(&mut child, "awaiting_approval");
        wait_shown(&toren, &mut child, &run, pending_is("c1"));
        approve(&toren, &run, "c1");
        wait_shown(&toren, &mut child, &run, pending_is("c2"));
        approve(&toren, &run, "c2");
        wait_shown(&toren, &mut child, &run, pending_is("c3"));
        kill(child);
        let out = toren.run(&["cancel", &run]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        run
    } else {
        let _ = toren.run(&["run", "m", "go"]);
        toren.newest_run().unwrap()
    };
    assert_eq!(toren.show(&run)["status"], end);
    let ws = toren.workspace(&run);
    let before = toren.events(&run);
    let step = seq_of(&before, "tool_completed", "c1");
    let out = rewind(&toren, &run, step);
    let new = text(&out.stdout).trim().to_owned();
    assert!(new.starts_with("run_") && new != run, "{new:?}");
    // The ended run is as it was; the new one begins at the step.
    assert_eq!(toren.events(&run), before);
    assert!(ws.join("b.txt").exists());
    let new_ws = toren.workspace(&new);
    at_first_step(&new_ws);
    resumed_from_first_step(&toren, &fake, &new, &format!("again after {end}"));
    at_first_step(&new_ws);
}

macro_rules! matrix {
    ($($backend:ident),*) => {$(
        mod $backend {
            #[test]
            fn driven_by_a_live_process_is_refused() {
                super::driven_by_a_live_process(stringify!($backend));
            }
            #[test]
            fn waiting_for_approval() {
                super::waiting_for_approval(stringify!($backend));
            }
            #[test]
            fn killed_in_the_middle_of_a_command() {
                super::killed_in_the_middle_of_a_command(stringify!($backend));
            }
            #[test]
            fn paused_at_its_budget() {
                super::paused_at_its_budget(stringify!($backend));
            }
            #[test]
            fn rewound_already() {
                super::rewound_already(stringify!($backend));
            }
            #[test]
            fn completed() {
                super::ended(stringify!($backend), "completed");
            }
            #[test]
            fn failed() {
                super::ended(stringify!($backend), "failed");
            }
            #[test]
            fn cancelled() {
                super::ended(stringify!($backend), "cancelled");
            }
        }
    )*};
}

matrix!(local, docker);
