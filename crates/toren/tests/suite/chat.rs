//! `toren chat`: a session on a pseudo-terminal and piped, continued by a new process that
//! shows where it stopped and sends the model the whole conversation; a turn killed with
//! SIGKILL resumed by the next `toren chat`; the session commands.

use std::io::Write as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toren_protocol::{AssistantMessage, ToolCall};
use toren_test_support::{FakeAnthropic, Reply};

use super::common::{Toren, read, text};
use super::pty::Terminal;

fn tool(name: &str, args: Value) -> AssistantMessage {
    AssistantMessage {
        text: String::new(),
        tool_calls: vec![ToolCall::new(
            format!("toolu_{name}_{}", args.to_string().len()),
            name,
            args,
        )],
    }
}

fn say(text: &str) -> AssistantMessage {
    AssistantMessage {
        text: text.into(),
        tool_calls: vec![],
    }
}

/// Three turns' model answers: write a note, edit it, read it back.
fn fake() -> FakeAnthropic {
    FakeAnthropic::start(Reply::turns(vec![
        tool(
            "write_file",
            json!({"path": "notes.txt", "content": "first draft\n"}),
        ),
        say("I wrote notes.txt."),
        tool(
            "edit_file",
            json!({"path": "notes.txt", "old_string": "first", "new_string": "second"}),
        ),
        say("I edited it."),
        tool("read_file", json!({"path": "notes.txt"})),
        say("It says: second draft."),
    ]))
    .unwrap()
}

fn toren_with(fake: &FakeAnthropic) -> Toren {
    let toren = Toren::new()
        .env("ANTHROPIC_API_KEY", "k")
        .env("ANTHROPIC_BASE_URL", &fake.base_url());
    toren.agent(
        "claude",
        "name: claude\nmodel: anthropic/claude-sonnet-5\nsandbox: true\n",
    );
    toren
}

/// The texts of every user message and tool result a request sent.
fn sent_texts(body: &Value) -> String {
    body["messages"].to_string()
}

fn session_workspace(toren: &Toren, session: &str) -> std::path::PathBuf {
    let out = toren.run(&["sessions", "show", session, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    shown["workspace"].as_str().unwrap().into()
}

fn check_conversation_carried(fake: &FakeAnthropic) {
    let requests = fake.requests();
    assert_eq!(requests.len(), 6);
    // The third model call (turn 2's first) carries turn 1's messages: its input, the
    // write_file call and its result, and the answer.
    let third = sent_texts(&requests[2].body);
    for part in ["make a note", "write_file", "I wrote notes.txt.", "edit it"] {
        assert!(third.contains(part), "{part} missing from {third}");
    }
    // The fifth (turn 3, from a new process) carries both earlier turns.
    let fifth = sent_texts(&requests[4].body);
    for part in ["make a note", "I edited it.", "what does it say"] {
        assert!(fifth.contains(part), "{part} missing from {fifth}");
    }
}

#[test]
fn a_chat_on_a_terminal_keeps_its_conversation_and_workspace_across_processes() {
    let fake = fake();
    let toren = toren_with(&fake);

    let mut term = Terminal::spawn(&toren, &["chat", "notes", "--agent", "claude"]);
    term.wait_for("you> ");
    term.type_keys("make a note\r");
    term.wait_for("I wrote notes.txt.");
    term.wait_for("you> ");
    term.type_keys("edit it\r");
    term.wait_for("I edited it.");
    term.wait_for("you> ");
    term.type_keys("/files\r");
    term.wait_for("notes.txt");
    term.wait_for("you> ");
    term.type_keys("\x04");
    let (status, _) = term.finish();
    assert!(status.success(), "{status}");
    let ws = session_workspace(&toren, "notes");
    assert_eq!(read(&ws.join("notes.txt")), "second draft\n");

    // Days later, a new process: it shows where it stopped and the agent reads the file.
    let mut term = Terminal::spawn(&toren, &["chat", "notes"]);
    term.wait_for("where it stopped");
    term.wait_for("edit it");
    term.wait_for("you> ");
    term.type_keys("what does it say\r");
    term.wait_for("It says: second draft.");
    term.wait_for("you> ");
    term.type_keys("/exit\r");
    let (status, _) = term.finish();
    assert!(status.success(), "{status}");
    check_conversation_carried(&fake);
}

fn chat_piped(toren: &Toren, args: &[&str], input: &str) -> std::process::Output {
    let mut child = toren
        .command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

#[test]
fn a_chat_with_pipes_reads_a_message_per_line_and_exits_at_the_end() {
    let fake = fake();
    let toren = toren_with(&fake);
    let out = chat_piped(
        &toren,
        &["chat", "piped", "--agent", "claude"],
        "make a note\nedit it\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let stdout = text(&out.stdout);
    assert_eq!(
        stdout, "I wrote notes.txt.\nI edited it.\n",
        "plain answers on stdout"
    );
    assert!(
        !stdout.contains('\u{1b}'),
        "no control sequences without a terminal"
    );
    let out = chat_piped(&toren, &["chat", "piped"], "what does it say\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "It says: second draft.\n");
    check_conversation_carried(&fake);

    // `/history` counts each result's lines in words that agree with the count.
    let out = chat_piped(&toren, &["chat", "piped"], "/history\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let history = text(&out.stdout);
    assert!(history.contains(" (1 line)\n"), "{history}");
    assert!(!history.contains("(1 lines)"), "{history}");

    // The agent of an existing session cannot be swapped.
    toren.agent("other", "name: other\nmodel: anthropic/claude-sonnet-5\n");
    let out = chat_piped(&toren, &["chat", "piped", "--agent", "other"], "");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("talks to agent `claude`"),
        "{}",
        text(&out.stderr)
    );
    // A new session needs an agent.
    let out = chat_piped(&toren, &["chat", "fresh"], "");
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("--agent"),
        "{}",
        text(&out.stderr)
    );
}

const SLOW: &str = r#"
turns:
  - tool_calls:
      - bash: {command: "echo start >> starts.log; if [ -f once ]; then echo fine; else touch once; sleep 30; fi"}
  - text: "done at last"
"#;

/// A chat of session `name` whose first turn is inside its long command (started once):
/// the chat process (stdin still open), the session's workspace and id.
#[expect(
    clippy::zombie_processes,
    reason = "the chat process is returned; every caller kills and waits for it"
)]
fn slow_turn_running(
    toren: &Toren,
    name: &str,
) -> (std::process::Child, std::path::PathBuf, String) {
    toren.file("slow.script.yaml", SLOW);
    toren.agent(
        "slow",
        "name: slow\nmodel: scripted/slow.script.yaml\nsandbox:\n  approval: never\n",
    );
    let mut child = toren
        .command(&["chat", name, "--agent", "slow"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    let deadline = Instant::now() + Duration::from_secs(60);
    loop {
        let out = toren.run(&["sessions", "show", name, "--json"]);
        if out.status.success() {
            let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
            let ws = std::path::PathBuf::from(shown["workspace"].as_str().unwrap());
            if ws.join("once").exists() {
                return (child, ws, shown["id"].as_str().unwrap().to_owned());
            }
        }
        assert!(
            Instant::now() < deadline,
            "the turn's command never started"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

#[test]
fn a_turn_killed_mid_command_is_resumed_by_the_next_chat() {
    let toren = Toren::new();
    let (mut child, ws, _) = slow_turn_running(&toren, "k");
    child.kill().unwrap();
    child.wait().unwrap();

    let out = chat_piped(&toren, &["chat", "k"], "");
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(stderr.contains("resuming turn 1"), "{stderr}");
    assert_eq!(text(&out.stdout), "done at last\n");
    assert_eq!(read(&ws.join("starts.log")), "start\nstart\n");
    let out = toren.run(&["sessions", "show", "k", "--json"]);
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["status"], "idle");
    assert_eq!(shown["turns"].as_array().unwrap().len(), 1);
}

#[test]
fn sessions_are_listed_shown_and_removed_keeping_the_workspace_unless_asked() {
    let fake = fake();
    let toren = toren_with(&fake);
    let out = chat_piped(
        &toren,
        &["chat", "gone", "--agent", "claude"],
        "make a note\n",
    );
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let list: Value =
        serde_json::from_slice(&toren.run(&["sessions", "list", "--json"]).stdout).unwrap();
    assert_eq!(list[0]["name"], "gone");
    let ws = session_workspace(&toren, "gone");
    let out = toren.run(&["sessions", "rm", "gone"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("workspace is kept"),
        "{}",
        text(&out.stderr)
    );
    assert!(ws.join("notes.txt").exists());
    assert_ne!(
        toren.run(&["sessions", "show", "gone"]).status.code(),
        Some(0)
    );

    let out = chat_piped(&toren, &["chat", "gone2", "--agent", "claude"], "edit it\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let ws = session_workspace(&toren, "gone2");
    let out = toren.run(&["sessions", "rm", "gone2", "--delete-workspace"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!ws.exists(), "the workspace was deleted as asked");
}

/// The containers `toren sandbox list` shows for `key` (a session's id).
fn containers_of(toren: &Toren, key: &str) -> usize {
    let out = toren.run(&["sandbox", "list", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let list: Value = serde_json::from_slice(&out.stdout).unwrap();
    list.as_array()
        .unwrap()
        .iter()
        .filter(|c| c["run"] == key)
        .count()
}

#[test]
fn a_docker_session_keeps_one_container_across_a_killed_turn_and_none_when_idle() {
    let toren = Toren::new().env("TOREN_SANDBOX", "docker");
    let (mut child, ws, id) = slow_turn_running(&toren, "d");
    assert_eq!(
        containers_of(&toren, &id),
        1,
        "one container serves the session"
    );
    child.kill().unwrap();
    child.wait().unwrap();

    // The next chat resumes the turn in the session's container, then releases it.
    let out = chat_piped(&toren, &["chat", "d"], "");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "done at last\n");
    assert_eq!(read(&ws.join("starts.log")), "start\nstart\n");
    assert_eq!(
        containers_of(&toren, &id),
        0,
        "an idle session holds no container"
    );
    let out = toren.run(&["sessions", "rm", "d"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(ws.exists(), "the workspace survives the session's removal");
}

#[test]
fn send_to_channel_in_a_chat_delivers_the_file_byte_for_byte_to_the_downloads() {
    let toren = Toren::new();
    let downloads = toren.dir.path().join("dl");
    let toren = toren.env("TOREN_DOWNLOADS", &downloads.display().to_string());
    let content = "col1,col2\n1,2\nünïcode ✓\n";
    let script = json!({"turns": [
        {"tool_calls": [{"write_file": {"path": "out/report.csv", "content": content}}]},
        {"tool_calls": [{"send_to_channel": {"path": "out/report.csv", "caption": "the numbers"}}]},
        {"text": "sent it"},
    ]});
    toren.file("send.script.yaml", &script.to_string());
    toren.agent(
        "sender",
        "name: sender\nmodel: scripted/send.script.yaml\nsandbox: true\n",
    );
    let out = chat_piped(
        &toren,
        &["chat", "files", "--agent", "sender"],
        "send me the report\n",
    );
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "sent it\n");
    let delivered = downloads.join("files").join("report.csv");
    assert_eq!(std::fs::read(&delivered).unwrap(), content.as_bytes());
    assert!(stderr.contains("report.csv"), "announced: {stderr}");
    assert!(stderr.contains("the numbers"), "with its caption: {stderr}");
    let shown: Value =
        serde_json::from_slice(&toren.run(&["sessions", "show", "files", "--json"]).stdout)
            .unwrap();
    let run = shown["turns"][0]["run"].as_str().unwrap().to_owned();
    let events = toren.events(&run);
    let delivery = events
        .iter()
        .find(|e| e["type"] == "message_delivered")
        .expect("the delivery is journaled");
    assert_eq!(delivery["bytes"], content.len());
    assert_eq!(delivery["channel"], "terminal");
}
