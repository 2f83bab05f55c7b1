//! A session of 300 chat turns against a model with a small context window: every turn
//! reads a file of several kilobytes, so the conversation outgrows the window many times;
//! the fake Anthropic server refuses an oversize request as the real API does. The session
//! completes, and a chat killed with SIGKILL while a model call of turn 150 is in flight
//! sends, once the next chat resumed it, byte for byte the requests of an uninterrupted
//! session.

use std::io::Write as _;
use std::process::{Child, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::json;
use toren_protocol::{AssistantMessage, ToolCall};
use toren_test_support::{FakeAnthropic, ReceivedRequest, Reply, fake_input_tokens};

use super::common::{Toren, text};

const WINDOW: u64 = 16_000;
const TURNS: usize = 300;
/// The turn whose first model call the killed chat waits for.
const KILLED_IN_TURN: usize = 150;

/// Two model answers a turn: a file read (3 to 9 KB of output), then the turn's answer.
/// The first turn writes the file.
fn replies() -> Vec<Reply> {
    let mut replies = Vec::new();
    for n in 1..=TURNS {
        let (name, arguments) = if n == 1 {
            (
                "bash",
                json!({"command": "seq 100000 104000 > numbers.txt; echo written"}),
            )
        } else {
            let lines = 200 + (n * 37) % 500;
            (
                "read_file",
                json!({"path": "numbers.txt", "offset": n, "limit": lines}),
            )
        };
        replies.push(Reply::Turn(AssistantMessage {
            text: String::new(),
            tool_calls: vec![ToolCall::new(format!("toolu_{n:03}"), name, arguments)],
        }));
        replies.push(Reply::text(&format!("Turn {n} done.")));
    }
    replies
}

fn fake(replies: Vec<Reply>) -> FakeAnthropic {
    let fake = FakeAnthropic::start(replies).unwrap();
    fake.limit_input_tokens(WINDOW);
    fake.stream_whole();
    fake
}

fn home(fake: &FakeAnthropic) -> Toren {
    let toren = Toren::new()
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", &fake.base_url());
    toren.agent(
        "long",
        &format!(
            "name: long\nmodel: anthropic/claude-haiku-4-5\ncontext_tokens: {WINDOW}\n\
             sandbox:\n  approval: never\n"
        ),
    );
    toren
}

fn messages(turns: std::ops::RangeInclusive<usize>) -> String {
    turns.map(|n| format!("do step {n}\n")).collect()
}

fn chat(toren: &Toren, args: &[&str], input: &str) -> Child {
    let mut child = toren
        .command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let mut stdin = child.stdin.take().unwrap();
    stdin.write_all(input.as_bytes()).unwrap();
    drop(stdin);
    child
}

fn bodies(requests: &[ReceivedRequest]) -> Vec<String> {
    requests
        .iter()
        .map(|r| String::from_utf8(r.raw_body.clone()).unwrap())
        .collect()
}

fn answers(turns: std::ops::RangeInclusive<usize>) -> String {
    turns.map(|n| format!("Turn {n} done.\n")).collect()
}

#[test]
fn three_hundred_chat_turns_fit_a_small_window_and_a_resumed_session_sends_the_same_bytes() {
    let killed_call = 2 * (KILLED_IN_TURN - 1) + 1;
    let reference = fake(replies());
    let mut hung = replies();
    hung[killed_call - 1] = Reply::Hang;
    let interrupted = fake(hung.drain(..killed_call).collect());
    let (a, b) = (home(&reference), home(&interrupted));
    let started = Instant::now();
    let whole = chat(
        &a,
        &["chat", "long", "--agent", "long"],
        &messages(1..=TURNS),
    );
    let mut killed = chat(
        &b,
        &["chat", "long", "--agent", "long"],
        &messages(1..=TURNS),
    );
    let deadline = Instant::now() + Duration::from_secs(180);
    while interrupted.requests().len() < killed_call {
        assert!(
            killed.try_wait().unwrap().is_none(),
            "the chat ended before call {killed_call}"
        );
        assert!(Instant::now() < deadline, "call {killed_call} never came");
        std::thread::sleep(Duration::from_millis(20));
    }
    killed.kill().unwrap(); // SIGKILL, while it waits for the model's answer
    killed.wait().unwrap();

    let out = whole.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), answers(1..=TURNS));

    // The next chat, against a server holding the rest, resumes turn 150 and goes on.
    let rest = fake(replies().split_off(killed_call - 1));
    let resumed = b
        .command(&["chat", "long"])
        .env("ANTHROPIC_BASE_URL", rest.base_url())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let resumed = {
        let mut resumed = resumed;
        let mut stdin = resumed.stdin.take().unwrap();
        stdin
            .write_all(messages(KILLED_IN_TURN + 1..=TURNS).as_bytes())
            .unwrap();
        drop(stdin);
        resumed.wait_with_output().unwrap()
    };
    let stderr = text(&resumed.stderr);
    assert_eq!(resumed.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains(&format!("resuming turn {KILLED_IN_TURN}")),
        "{stderr}"
    );
    assert_eq!(text(&resumed.stdout), answers(KILLED_IN_TURN..=TURNS));
    println!(
        "two 300-turn sessions in {:.1} s",
        started.elapsed().as_secs_f64()
    );

    let want = bodies(&reference.requests());
    assert_eq!(want.len(), 2 * TURNS, "two requests a turn, none refused");
    let before_kill = bodies(&interrupted.requests());
    let after_resume = bodies(&rest.requests());
    assert_eq!(before_kill.len(), killed_call);
    // The call in flight at the kill is sent again, the same bytes; and so is every other.
    assert!(
        before_kill[killed_call - 1] == after_resume[0],
        "call {killed_call} differs"
    );
    for (n, body) in before_kill.iter().chain(&after_resume[1..]).enumerate() {
        assert!(
            *body == want[n],
            "request {} differs from the uninterrupted session's",
            n + 1
        );
    }
    // Every request fitted the window with its answer's room; the last still carries the
    // session's first message.
    for (n, r) in reference.requests().iter().enumerate() {
        let tokens = fake_input_tokens(&r.raw_body) + r.body["max_tokens"].as_u64().unwrap();
        assert!(tokens <= WINDOW, "request {}: {tokens}", n + 1);
    }
    assert!(
        want[2 * TURNS - 1].contains("do step 1\\n") || want[2 * TURNS - 1].contains("do step 1\"")
    );
}
