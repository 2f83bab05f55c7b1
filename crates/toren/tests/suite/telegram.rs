//! The Telegram bot through the real binary (`toren telegram`) against the local Bot API
//! server of toren-test-support: a message from an allowed user becomes a session turn of
//! a scripted agent and its reply arrives (edited as it streams); a stranger gets one
//! refusal naming their id and reaches no agent; a bash call is approved by a button and
//! runs only after it, a denied one reaches the model; a file sent with `send_to_channel`
//! arrives as a photo or a document byte for byte with its caption; the bot killed with
//! SIGKILL while a turn waits for approval is started again and the old button still
//! works, with no update handled twice; a decision from the CLI while the button shows
//! updates the message and a later press is told the decision that stands; the token is
//! never in the event log, a log line or the sandbox.

use std::path::{Path, PathBuf};
use std::process::Child;
use std::time::Duration;

use serde_json::Value;
use toren_test_support::telegram::{BotMessage, FakeTelegram};

use super::common::{Toren, text};

const TOKEN: &str = "4242:telegram-canary-token-value";
const USER: i64 = 111;
const STRANGER: i64 = 999;
const WAIT: Duration = Duration::from_secs(60);

fn toren_for(fake: &FakeTelegram) -> Toren {
    Toren::new()
        .env("TELEGRAM_BOT_TOKEN", TOKEN)
        .env("TELEGRAM_API_URL", &fake.url())
        .env("TOREN_TELEGRAM_USERS", &USER.to_string())
        .env("TOREN_TELEGRAM_AGENT", "tg")
        .env("TOREN_APPROVAL_POLL", "100ms")
}

fn bot(toren: &Toren) -> Child {
    toren.spawn(&["telegram"])
}

/// Stops the bot and returns its stderr.
fn stop(mut child: Child) -> String {
    let _ = child.kill();
    let out = child.wait_with_output().unwrap();
    text(&out.stderr)
}

fn find(root: &Path, name: &str) -> Option<PathBuf> {
    for entry in std::fs::read_dir(root).ok()?.flatten() {
        let path = entry.path();
        if path.file_name().is_some_and(|n| n == name) {
            return Some(path);
        }
        if path.is_dir()
            && let Some(found) = find(&path, name)
        {
            return Some(found);
        }
    }
    None
}

fn with_buttons(messages: &[BotMessage]) -> Vec<BotMessage> {
    messages
        .iter()
        .filter(|m| !m.buttons().is_empty())
        .cloned()
        .collect()
}

fn button(message: &BotMessage, prefix: &str) -> String {
    message
        .buttons()
        .into_iter()
        .map(|(_, data)| data)
        .find(|d| d.starts_with(prefix))
        .unwrap()
}

fn runs(toren: &Toren) -> Vec<Value> {
    let out = toren.run(&["runs", "list", "--json"]);
    serde_json::from_slice(&out.stdout).unwrap()
}

#[test]
fn a_message_is_a_turn_whose_reply_streams_into_one_message_and_strangers_are_refused() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    toren.file(
        "tg.script.yaml",
        "turns:\n  - text: \"Hello from the agent. Here is `code` & <b>no tags</b>.\"\n    delay_ms: 100\n",
    );
    toren.agent("tg", "name: tg\nmodel: scripted/tg.script.yaml\n");
    let child = bot(&toren);
    fake.send_text(STRANGER, "let me in");
    fake.send_text(STRANGER, "please");
    fake.send_text(USER, "hi");
    let done = fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .any(|m| m.text.contains("Hello from the agent"))
    });
    let stderr = stop(child);
    assert!(
        done,
        "no reply; bot stderr: {stderr}; calls: {:?}",
        fake.calls()
    );
    let reply = fake
        .messages(USER)
        .into_iter()
        .find(|m| m.text.contains("Hello from the agent"))
        .unwrap();
    assert_eq!(
        reply.text,
        "Hello from the agent. Here is <code>code</code> &amp; &lt;b&gt;no tags&lt;/b&gt;."
    );
    assert_eq!(reply.parse_mode.as_deref(), Some("HTML"));
    assert!(
        fake.calls_of("sendChatAction")
            .iter()
            .any(|c| c.str("action").as_deref() == Some("typing")),
        "typing… was shown"
    );
    // The stranger got exactly one refusal, naming their id, and reached no agent.
    let refusals = fake.messages(STRANGER);
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert!(refusals[0].text.contains("999"), "{}", refusals[0].text);
    assert!(refusals[0].text.contains("TOREN_TELEGRAM_USERS"));
    let all = runs(&toren);
    assert_eq!(
        all.len(),
        1,
        "only the allowed user's message made a run: {all:?}"
    );
    let run = all[0]["id"].as_str().unwrap();
    let events = toren.events(run);
    assert_eq!(events[0]["channel"]["kind"], "telegram");
    assert_eq!(events[0]["channel"]["address"], USER.to_string());
    assert_eq!(events[0]["input"], "hi");
    // Every update was handled once and confirmed.
    assert!(
        fake.handed().values().all(|n| *n == 1),
        "{:?}",
        fake.handed()
    );
    assert!(!stderr.contains(TOKEN), "the token is never logged");
}

const APPROVALS: &str = r##"
turns:
  - tool_calls:
      - bash: {command: "touch approved.txt && echo ran"}
  - text: "It ran."
  - tool_calls:
      - bash: {command: "touch denied.txt"}
  - text: "Understood, I did not run it."
"##;

#[test]
fn a_button_approves_a_command_before_it_runs_and_a_denial_reaches_the_model() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    toren.file("tg.script.yaml", APPROVALS);
    toren.agent(
        "tg",
        "name: tg\nmodel: scripted/tg.script.yaml\nsandbox:\n  approval: always\n",
    );
    let child = bot(&toren);
    fake.send_text(USER, "make the file");
    let asked = fake.wait_for(WAIT, |v| {
        v.messages(USER).iter().any(|m| !m.buttons().is_empty())
    });
    assert!(asked, "no approval was posted: {:?}", fake.calls());
    let ask = with_buttons(&fake.messages(USER)).remove(0);
    assert!(
        ask.text
            .contains("<pre>touch approved.txt &amp;&amp; echo ran</pre>"),
        "{}",
        ask.text
    );
    assert!(
        find(&toren.sandbox_root(), "approved.txt").is_none(),
        "not run before the press"
    );
    let data = button(&ask, "a:");
    assert!(data.len() <= 64);
    let press = fake.press(USER, ask.message_id, &data);
    let ran = fake.wait_for(WAIT, |v| {
        v.messages(USER).iter().any(|m| m.text.contains("It ran."))
    });
    assert!(ran, "{:?}", fake.calls());
    assert_eq!(fake.answer(press).as_deref(), Some("Approved."));
    let decided = fake.message(USER, ask.message_id).unwrap();
    assert!(
        decided
            .text
            .contains("Approved by telegram:111 via telegram"),
        "{}",
        decided.text
    );
    assert!(decided.buttons().is_empty(), "the buttons went");
    assert!(find(&toren.sandbox_root(), "approved.txt").is_some());
    let summary = fake.messages(USER).into_iter().any(|m| {
        m.text
            .contains("▸ bash: <code>touch approved.txt &amp;&amp; echo ran</code> → exit 0")
    });
    assert!(
        summary,
        "the tool call is summarised: {:?}",
        fake.messages(USER)
    );

    // The second turn: denied.
    fake.send_text(USER, "now the other one");
    let asked = fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .filter(|m| !m.buttons().is_empty())
            .count()
            == 1
            && v.messages(USER)
                .iter()
                .any(|m| m.text.contains("touch denied.txt") && !m.buttons().is_empty())
    });
    assert!(asked, "{:?}", fake.messages(USER));
    let ask = with_buttons(&fake.messages(USER)).remove(0);
    fake.press(USER, ask.message_id, &button(&ask, "d:"));
    let answered = fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .any(|m| m.text.contains("I did not run it"))
    });
    let stderr = stop(child);
    assert!(answered, "{stderr}");
    assert!(find(&toren.sandbox_root(), "denied.txt").is_none());
    let all = runs(&toren);
    assert_eq!(all.len(), 2);
    let first = toren.events(all[1]["id"].as_str().unwrap());
    let types: Vec<&str> = first.iter().map(|e| e["type"].as_str().unwrap()).collect();
    let decided_at = types.iter().position(|t| *t == "approval_decided").unwrap();
    let started_at = types.iter().position(|t| *t == "tool_started").unwrap();
    assert!(decided_at < started_at, "{types:?}");
    let decision = &first[decided_at];
    assert_eq!(decision["by"], "telegram:111");
    assert_eq!(decision["via"], "telegram");
    assert_eq!(decision["approved"], true);
    let second = toren.events(all[0]["id"].as_str().unwrap());
    let denial = second
        .iter()
        .find(|e| e["type"] == "tool_completed")
        .unwrap();
    assert_eq!(denial["is_error"], true, "{denial}");
    assert!(second.iter().all(|e| e["type"] != "tool_started"));
}

#[test]
fn a_bot_killed_while_a_turn_waits_for_approval_resumes_and_the_old_button_works() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    toren.file("tg.script.yaml", APPROVALS);
    toren.agent(
        "tg",
        "name: tg\nmodel: scripted/tg.script.yaml\nsandbox:\n  approval: always\n",
    );
    let mut child = bot(&toren);
    fake.send_text(USER, "make the file");
    assert!(fake.wait_for(WAIT, |v| {
        v.messages(USER).iter().any(|m| !m.buttons().is_empty())
    }));
    let old = with_buttons(&fake.messages(USER)).remove(0);
    // SIGKILL: no chance to clean up.
    child.kill().unwrap();
    child.wait().unwrap();
    let confirmed = fake.confirmed();
    let child = bot(&toren);
    // The restarted bot resumes the turn, which asks again; the old button still works.
    assert!(fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .filter(|m| !m.buttons().is_empty())
            .count()
            >= 2
    }));
    let press = fake.press(USER, old.message_id, &button(&old, "a:"));
    let ran = fake.wait_for(WAIT, |v| {
        v.messages(USER).iter().any(|m| m.text.contains("It ran."))
    });
    // The reply streams in before the run's end is journaled.
    let completed = newest_status_becomes(&toren, "completed");
    let stderr = stop(child);
    assert!(completed, "{stderr}");
    assert!(ran, "{stderr}");
    assert_eq!(fake.answer(press).as_deref(), Some("Approved."));
    assert!(find(&toren.sandbox_root(), "approved.txt").is_some());
    assert!(fake.confirmed() > confirmed);
    assert!(
        fake.handed().values().all(|n| *n == 1),
        "no update handled twice: {:?}",
        fake.handed()
    );
    let all = runs(&toren);
    assert_eq!(all.len(), 1, "one turn, resumed: {all:?}");
    assert_eq!(all[0]["status"], "completed");
    let events = toren.events(all[0]["id"].as_str().unwrap());
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "tool_started")
            .count(),
        1
    );
}

#[test]
fn a_decision_from_the_cli_updates_the_message_and_a_later_press_is_told() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    toren.file("tg.script.yaml", APPROVALS);
    toren.agent(
        "tg",
        "name: tg\nmodel: scripted/tg.script.yaml\nsandbox:\n  approval: always\n",
    );
    let toren = toren.env("USER", "alice");
    let child = bot(&toren);
    fake.send_text(USER, "make the file");
    assert!(fake.wait_for(WAIT, |v| {
        v.messages(USER).iter().any(|m| !m.buttons().is_empty())
    }));
    let ask = with_buttons(&fake.messages(USER)).remove(0);
    let run = toren.newest_run().unwrap();
    let out = toren.run(&["approve", &run, "call_1"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let updated = fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .any(|m| m.message_id == ask.message_id && m.text.contains("Approved by alice via cli"))
    });
    assert!(updated, "{:?}", fake.messages(USER));
    let press = fake.press(USER, ask.message_id, &button(&ask, "d:"));
    let told = fake.wait_for(WAIT, |v| v.answer(press).is_some());
    let ran = fake.wait_for(WAIT, |v| {
        v.messages(USER).iter().any(|m| m.text.contains("It ran."))
    });
    let stderr = stop(child);
    assert!(told && ran, "{stderr}");
    assert_eq!(
        fake.answer(press).as_deref(),
        Some("Already decided: approved by alice via cli.")
    );
    let events = toren.events(&run);
    let decisions: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "approval_decided")
        .collect();
    assert_eq!(decisions.len(), 1, "the first decision stands");
    assert_eq!(decisions[0]["via"], "cli");
}

#[test]
fn files_sent_with_send_to_channel_arrive_byte_for_byte_and_uploads_land_in_the_workspace() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    toren.file(
        "tg.script.yaml",
        r##"
turns:
  - tool_calls:
      - bash: {command: "printf '\\211PNG\\r\\n\\032\\n\\0\\0\\0\\rIHDR\\0\\0\\0\\1\\0\\0\\0\\1\\10\\6\\0\\0\\0\\37\\25\\304\\211' > chart.png && printf '# Notes\\n' > notes.md && ls uploads"}
  - tool_calls:
      - send_to_channel: {path: chart.png, caption: "the chart"}
      - send_to_channel: {path: notes.md, caption: "the notes"}
  - text: "Sent both."
"##,
    );
    toren.agent(
        "tg",
        "name: tg\nmodel: scripted/tg.script.yaml\nsandbox:\n  approval: never\n",
    );
    let child = bot(&toren);
    fake.send_file(
        USER,
        "data.csv",
        b"a,b\n1,2\n",
        Some("here is my data"),
        false,
    );
    let sent = fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .any(|m| m.text.contains("Sent both."))
    });
    let stderr = stop(child);
    assert!(sent, "{stderr} {:?}", fake.calls());
    let messages = fake.messages(USER);
    let photo = messages.iter().find(|m| m.kind == "photo").unwrap();
    let document = messages.iter().find(|m| m.kind == "document").unwrap();
    let workspace = find(&toren.sandbox_root(), "chart.png")
        .unwrap()
        .parent()
        .unwrap()
        .to_owned();
    assert_eq!(photo.text, "the chart");
    assert_eq!(
        photo.upload.as_ref().unwrap().bytes,
        std::fs::read(workspace.join("chart.png")).unwrap()
    );
    assert_eq!(document.text, "the notes");
    assert_eq!(document.upload.as_ref().unwrap().bytes, b"# Notes\n");
    assert_eq!(
        std::fs::read(workspace.join("uploads/data.csv")).unwrap(),
        b"a,b\n1,2\n"
    );
    let run = toren.newest_run().unwrap();
    let events = toren.events(&run);
    assert!(
        events[0]["input"]
            .as_str()
            .unwrap()
            .contains("uploads/data.csv"),
        "the turn says where the file is: {}",
        events[0]["input"]
    );
    let listing = events
        .iter()
        .find(|e| e["type"] == "tool_completed")
        .unwrap();
    assert!(
        listing["output"].as_str().unwrap().contains("data.csv"),
        "{listing}"
    );
    let delivered: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "message_delivered")
        .collect();
    assert_eq!(delivered.len(), 2);
    assert_eq!(delivered[0]["channel"], "telegram");
}

#[test]
fn the_token_never_reaches_the_event_log_the_logs_or_the_sandbox() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake).env("TOREN_LOG", "debug");
    toren.file(
        "tg.script.yaml",
        r##"
turns:
  - tool_calls:
      - bash: {command: "env; tr '\\0' '\\n' < /proc/self/environ; tr '\\0' '\\n' < /proc/1/environ; grep -rs telegram-can\"\"ary /workspace /tmp /home /etc 2>/dev/null | head -3; echo probed"}
  - text: "Probed."
"##,
    );
    toren.agent(
        "tg",
        "name: tg\nmodel: scripted/tg.script.yaml\nsandbox:\n  approval: never\n",
    );
    // An agent file may not grant the bot token.
    let greedy = toren.agent(
        "greedy",
        "name: greedy\nmodel: scripted/tg.script.yaml\nsandbox:\n  env: [TELEGRAM_BOT_TOKEN]\n",
    );
    let out = toren.run(&["check", greedy.to_str().unwrap()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    std::fs::remove_file(greedy).unwrap();
    let child = bot(&toren);
    fake.send_text(USER, "probe");
    let done = fake.wait_for(WAIT, |v| {
        v.messages(USER).iter().any(|m| m.text.contains("Probed."))
    });
    let stderr = stop(child);
    assert!(done, "{stderr}");
    let run = toren.newest_run().unwrap();
    let events = toren.events(&run);
    let output = events
        .iter()
        .find(|e| e["type"] == "tool_completed")
        .unwrap()["output"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(output.contains("probed"), "{output}");
    let log: String = events.iter().map(Value::to_string).collect();
    assert!(
        !log.contains("telegram-canary"),
        "the event log holds the token"
    );
    assert!(
        !output.contains("telegram-canary"),
        "the sandbox saw the token: {output}"
    );
    assert!(
        !stderr.contains("telegram-canary"),
        "a log line holds the token: {stderr}"
    );
    // Nor any file the runtime wrote.
    let mut stack = vec![toren.dir.path().join("toren")];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap().flatten() {
            let path = entry.path();
            if path.is_dir() {
                stack.push(path);
            } else {
                let bytes = std::fs::read(&path).unwrap_or_default();
                assert!(
                    !bytes.windows(15).any(|w| w == b"telegram-canary"),
                    "{} holds the token",
                    path.display()
                );
            }
        }
    }
}

#[test]
fn deny_with_reason_takes_the_next_message_and_commands_answer() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    toren.file(
        "tg.script.yaml",
        r##"
turns:
  - tool_calls:
      - bash: {command: "rm -rf build"}
  - text: "Fine, I kept the build."
"##,
    );
    toren.agent(
        "tg",
        "name: tg\nmodel: scripted/tg.script.yaml\nsandbox:\n  approval: always\n",
    );
    let child = bot(&toren);
    fake.send_text(USER, "/start");
    assert!(fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .any(|m| m.text.contains("Agent: <b>tg</b>"))
    }));
    let start = fake.messages(USER).remove(0);
    assert!(start.text.contains("Workspace: <code>"), "{}", start.text);
    fake.send_text(USER, "clean up");
    assert!(fake.wait_for(WAIT, |v| {
        v.messages(USER).iter().any(|m| !m.buttons().is_empty())
    }));
    let ask = with_buttons(&fake.messages(USER)).remove(0);
    fake.send_text(USER, "/status");
    assert!(fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .any(|m| m.text.contains("It waits for your approval."))
    }));
    let press = fake.press(USER, ask.message_id, &button(&ask, "r:"));
    assert!(fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .any(|m| m.text.contains("Send the reason for denying"))
    }));
    assert_eq!(
        fake.answer(press).as_deref(),
        Some("Send the reason as your next message.")
    );
    fake.send_text(USER, "we still need the build");
    let done = fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .any(|m| m.text.contains("Fine, I kept the build."))
    });
    let stderr = stop(child);
    assert!(done, "{stderr}");
    let decided = fake.message(USER, ask.message_id).unwrap();
    assert!(
        decided
            .text
            .contains("Denied by telegram:111 via telegram: we still need the build"),
        "{}",
        decided.text
    );
    let all = runs(&toren);
    assert_eq!(all.len(), 1, "the reason was not a turn of its own");
    let events = toren.events(all[0]["id"].as_str().unwrap());
    let decision = events
        .iter()
        .find(|e| e["type"] == "approval_decided")
        .unwrap();
    assert_eq!(decision["approved"], false);
    assert_eq!(decision["reason"], "we still need the build");
    let result = events
        .iter()
        .find(|e| e["type"] == "tool_completed")
        .unwrap();
    assert!(
        result["output"]
            .as_str()
            .unwrap()
            .contains("we still need the build"),
        "the model reads the reason: {result}"
    );
}

#[test]
fn telegram_out_of_reach_never_fails_the_run() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    toren.file(
        "tg.script.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"echo hi\"}\n  - text: \"Done anyway.\"\n",
    );
    toren.agent(
        "tg",
        "name: tg\nmodel: scripted/tg.script.yaml\nsandbox:\n  approval: never\n",
    );
    // Every message the bot sends or edits is refused for longer than it waits.
    for method in ["sendMessage", "editMessageText", "sendChatAction"] {
        fake.rate_limit(method, 3600, 1000);
    }
    let child = bot(&toren);
    fake.send_text(USER, "go");
    // The bot tried to answer and was refused.
    let tried = fake.wait_for(WAIT, |v| {
        v.calls()
            .iter()
            .any(|c| c.method == "sendMessage" && c.status == 429)
    });
    assert!(tried, "{:?}", fake.calls());
    let mut status = Value::Null;
    for _ in 0..600 {
        let all = runs(&toren);
        status = all[0]["status"].clone();
        if status == "completed" {
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let stderr = stop(child);
    assert_eq!(status, "completed", "{stderr}");
    assert!(!stderr.contains(TOKEN));
}

#[test]
fn toren_serve_runs_the_bot_unless_told_not_to() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake).env("TOREN_API_ADDR", "127.0.0.1:0");
    toren.file("tg.script.yaml", "turns:\n  - text: \"Served by serve.\"\n");
    toren.agent("tg", "name: tg\nmodel: scripted/tg.script.yaml\n");
    let off = toren.spawn(&["serve", "--no-telegram"]);
    let on = toren.spawn(&["serve"]);
    fake.send_text(USER, "hello");
    let answered = fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .any(|m| m.text.contains("Served by serve."))
    });
    let on_stderr = stop(on);
    let off_stderr = stop(off);
    assert!(answered, "{on_stderr}");
    assert!(on_stderr.contains("Telegram bot on"), "{on_stderr}");
    assert!(!off_stderr.contains("Telegram bot on"), "{off_stderr}");
    assert!(!on_stderr.contains(TOKEN) && !off_stderr.contains(TOKEN));
    assert_eq!(runs(&toren).len(), 1);
}

#[test]
fn the_reply_is_one_message_edited_as_it_streams_within_the_throttle() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    let words: Vec<String> = (1..=40).map(|i| format!("word{i}")).collect();
    toren.file(
        "tg.script.yaml",
        &format!(
            "turns:\n  - text: \"{}\"\n    delay_ms: 4000\n",
            words.join(" ")
        ),
    );
    toren.agent("tg", "name: tg\nmodel: scripted/tg.script.yaml\n");
    let child = bot(&toren);
    fake.send_text(USER, "talk");
    let done = fake.wait_for(WAIT, |v| {
        v.messages(USER).iter().any(|m| m.text.contains("word40"))
    });
    let stderr = stop(child);
    assert!(done, "{stderr}");
    let replies: Vec<BotMessage> = fake
        .messages(USER)
        .into_iter()
        .filter(|m| m.text.contains("word1"))
        .collect();
    assert_eq!(replies.len(), 1, "one message: {replies:?}");
    assert_eq!(replies[0].text, words.join(" "));
    let edits = replies[0].edits;
    // 40 words over about 2 s: edited as they come, at most once per 1.2 s.
    assert!((1..=3).contains(&edits), "{edits} edits");
}

/// Waits (a bounded poll of `toren runs list`) until the newest run has `status`.
fn newest_status_becomes(toren: &Toren, status: &str) -> bool {
    for _ in 0..600 {
        if runs(toren).first().is_some_and(|r| r["status"] == status) {
            return true;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    false
}

fn sessions(toren: &Toren) -> Vec<Value> {
    let out = toren.run(&["sessions", "list", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// Makes every write of the bot's offset fail (a trigger in the SQLite file), so each
/// update is handled and then not remembered, as when the process dies between handling
/// an update and storing its offset; `false` drops the trigger.
fn offsets_fail(toren: &Toren, fail: bool) {
    let sql = if fail {
        "CREATE TRIGGER offset_fails_i BEFORE INSERT ON chat_offsets \
         BEGIN SELECT RAISE(ABORT, 'injected: the offset is not stored'); END;\
         CREATE TRIGGER offset_fails_u BEFORE UPDATE ON chat_offsets \
         BEGIN SELECT RAISE(ABORT, 'injected: the offset is not stored'); END;"
    } else {
        "DROP TRIGGER offset_fails_i; DROP TRIGGER offset_fails_u;"
    };
    let db = toren.dir.path().join("toren/toren.db");
    let out = std::process::Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys\nc = sqlite3.connect(sys.argv[1], timeout=30)\nc.executescript(sys.argv[2])\nc.close()",
            db.to_str().unwrap(),
            sql,
        ])
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out.stderr));
}

fn count_with(messages: &[&BotMessage], needle: &str) -> usize {
    messages.iter().filter(|m| m.text.contains(needle)).count()
}

#[test]
fn an_update_handled_again_after_a_crash_makes_no_second_turn_session_or_upload() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    toren.file("tg.script.yaml", "turns:\n  - text: \"Reply.\"\n");
    toren.agent(
        "tg",
        "name: tg\nmodel: scripted/tg.script.yaml\nsandbox:\n  approval: never\n",
    );
    let child = bot(&toren);
    let hi = fake.send_text(USER, "hi");
    assert!(
        fake.wait_for(WAIT, |v| v.confirmed() > hi
            && count_with(&v.messages(USER), "Reply.") == 1),
        "{:?}",
        fake.calls()
    );
    // From here on the offset is never stored: every update is handed out again and again,
    // and handled again each time.
    offsets_fail(&toren, true);
    let new = fake.send_text(USER, "/new");
    let upload = fake.send_file(USER, "data.csv", b"a,b\n1,2\n", Some("my data"), false);
    let again = fake.wait_for(WAIT, |v| {
        v.handed(upload) >= 3 && v.handed(new) >= 3 && count_with(&v.messages(USER), "Reply.") >= 2
    });
    assert!(again, "{:?}", fake.handed());
    // Then the process dies (SIGKILL) before any of it was remembered, and starts again.
    let mut child = child;
    child.kill().unwrap();
    child.wait().unwrap();
    offsets_fail(&toren, false);
    let child = bot(&toren);
    let confirmed = fake.wait_for(WAIT, |v| v.confirmed() > upload);
    let stderr = stop(child);
    assert!(confirmed, "{stderr}");
    assert!(fake.handed()[&upload] >= 4, "{:?}", fake.handed());

    // One turn per message, one session per /new, one file per upload.
    let all = runs(&toren);
    assert_eq!(all.len(), 2, "{all:?}");
    let listed = sessions(&toren);
    assert_eq!(
        listed.len(),
        2,
        "the old session and the one /new made: {listed:?}"
    );
    assert_eq!(
        count_with(&fake.messages(USER).iter().collect::<Vec<_>>(), "Reply."),
        2,
        "one reply per turn"
    );
    let events = toren.events(all[0]["id"].as_str().unwrap());
    assert!(
        events[0]["input"]
            .as_str()
            .unwrap()
            .contains("uploads/data.csv"),
        "{}",
        events[0]["input"]
    );
    let uploads = find(&toren.sandbox_root(), "uploads").unwrap();
    let names: Vec<String> = std::fs::read_dir(&uploads)
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(names, ["data.csv"], "saved once");
    assert!(
        stderr.contains("handled before"),
        "the restarted bot saw the message was handled: {stderr}"
    );
}

#[test]
fn groups_are_refused_unless_listed_and_a_refusal_is_said_once_across_restarts() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake).env("TOREN_TELEGRAM_GROUPS", "-600");
    toren.file("tg.script.yaml", "turns:\n  - text: \"Reply.\"\n");
    toren.agent("tg", "name: tg\nmodel: scripted/tg.script.yaml\n");
    let child = bot(&toren);
    fake.send_text_in(-500, "group", USER, "hello group");
    fake.send_text_in(-500, "group", USER, "again");
    fake.send_text(STRANGER, "let me in");
    let listed = fake.send_text_in(-600, "supergroup", USER, "hi from the listed group");
    assert!(fake.wait_for(WAIT, |v| v.confirmed() > listed
        && count_with(&v.messages(-600), "Reply.") == 1));
    let refusals = fake.messages(-500);
    assert_eq!(refusals.len(), 1, "{refusals:?}");
    assert!(
        refusals[0].text.contains("-500") && refusals[0].text.contains("TOREN_TELEGRAM_GROUPS"),
        "{}",
        refusals[0].text
    );
    stop(child);
    // Started again, the bot remembers whom it told.
    let child = bot(&toren);
    fake.send_text_in(-500, "group", USER, "still here");
    fake.send_text(STRANGER, "hello?");
    let marker = fake.send_text(USER, "hi");
    let handled = fake.wait_for(WAIT, |v| {
        v.confirmed() > marker && count_with(&v.messages(USER), "Reply.") == 1
    });
    let stderr = stop(child);
    assert!(handled, "{stderr}");
    assert_eq!(fake.messages(-500).len(), 1, "one refusal per group");
    assert_eq!(fake.messages(STRANGER).len(), 1, "one refusal per stranger");
    let all = runs(&toren);
    assert_eq!(all.len(), 2, "the listed group's and the user's: {all:?}");
    let addresses: Vec<Value> = all
        .iter()
        .map(|r| toren.events(r["id"].as_str().unwrap())[0]["channel"]["address"].clone())
        .collect();
    assert!(addresses.contains(&Value::from("-600")), "{addresses:?}");
}

/// Sends `text` and waits for a message containing `expect`; returns that message.
fn ask(fake: &FakeTelegram, text: &str, expect: &str) -> BotMessage {
    let before = fake.messages(USER).len();
    fake.send_text(USER, text);
    let found = fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .skip(before)
            .any(|m| m.text.contains(expect))
    });
    assert!(found, "{text}: no {expect:?} in {:?}", fake.messages(USER));
    fake.messages(USER)
        .into_iter()
        .skip(before)
        .find(|m| m.text.contains(expect))
        .unwrap()
}

#[test]
fn agent_new_files_and_status_commands_answer() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    toren.file(
        "tg.script.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"echo hi > made.txt\"}\n  - text: \"Made it.\"\n",
    );
    toren.agent(
        "tg",
        "name: tg\nmodel: scripted/tg.script.yaml\nsandbox:\n  approval: never\n",
    );
    toren.file("other.script.yaml", "turns:\n  - text: \"Other here.\"\n");
    toren.agent(
        "other",
        "name: other\nmodel: scripted/other.script.yaml\nsandbox:\n  approval: never\n",
    );
    let child = bot(&toren);
    let unknown = ask(&fake, "/agent nope", "There is no agent");
    assert!(unknown.text.contains("nope"), "{}", unknown.text);
    let usage = ask(&fake, "/agent", "Usage: /agent NAME");
    assert!(
        usage.text.contains("other") && usage.text.contains("tg"),
        "{}",
        usage.text
    );
    ask(&fake, "/files", "The workspace is empty.");
    ask(&fake, "make it", "Made it.");
    let files = ask(&fake, "/files", "made.txt");
    assert_eq!(files.text, "<pre>made.txt (3 B)\n</pre>");
    let first = sessions(&toren);
    assert_eq!(first.len(), 1);
    let switched = ask(&fake, "/agent other", "with agent <b>other</b>");
    assert!(
        switched.text.starts_with("New session <code>telegram-111-"),
        "{}",
        switched.text
    );
    ask(&fake, "who is there", "Other here.");
    let fresh = ask(&fake, "/new", "New session");
    assert!(
        fresh.text.contains("with agent <b>other</b>; the old one"),
        "{}",
        fresh.text
    );
    let status = ask(&fake, "/status", "turns.");
    let stderr = stop(child);
    assert!(
        status.text.contains("agent <b>other</b>, 0 turns."),
        "{}",
        status.text
    );
    let listed = sessions(&toren);
    assert_eq!(
        listed.len(),
        3,
        "every session is kept: {listed:?} {stderr}"
    );
    let agents: Vec<&str> = listed
        .iter()
        .map(|s| s["agent"].as_str().unwrap())
        .collect();
    assert_eq!(
        agents.iter().filter(|a| **a == "other").count(),
        2,
        "{agents:?}"
    );
    assert_eq!(runs(&toren).len(), 2);
}

#[test]
fn cancel_stops_the_running_turn() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    toren.file(
        "tg.script.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"sleep 30; echo late > late.txt\"}\n  - text: \"Not reached.\"\n",
    );
    toren.agent(
        "tg",
        "name: tg\nmodel: scripted/tg.script.yaml\nsandbox:\n  approval: never\n",
    );
    let child = bot(&toren);
    ask(&fake, "/cancel", "No turn is running.");
    fake.send_text(USER, "go");
    // Wait for the command to be under way.
    let mut started = false;
    for _ in 0..600 {
        if let Some(run) = toren.newest_run()
            && toren.event_types(&run).iter().any(|t| t == "tool_started")
        {
            started = true;
            break;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(started, "the command never started");
    ask(&fake, "/cancel", "Cancelling turn 1.");
    let ended = fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .any(|m| m.text.contains("Turn cancelled; the session is kept."))
    });
    let stderr = stop(child);
    assert!(ended, "{stderr}");
    let run = toren.newest_run().unwrap();
    assert_eq!(runs(&toren)[0]["status"], "cancelled");
    let events = toren.events(&run);
    let cancelled = events
        .iter()
        .find(|e| e["type"] == "run_cancelled")
        .unwrap();
    assert_eq!(cancelled["by"], "telegram:111", "{cancelled}");
    assert_eq!(cancelled["via"], "telegram", "{cancelled}");
    assert!(
        find(&toren.sandbox_root(), "late.txt").is_none(),
        "the command was stopped"
    );
    assert!(
        !fake
            .messages(USER)
            .iter()
            .any(|m| m.text.contains("Not reached.")),
        "the model was not asked again"
    );
}

#[test]
fn a_long_command_is_shown_whole_on_request_and_a_late_press_is_told_what_stands() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    let long = format!("echo {}", "x".repeat(2000));
    toren.file(
        "tg.script.yaml",
        &format!(
            "turns:\n  - tool_calls:\n      - bash: {{command: \"{long}\"}}\n  - text: \"Not run, fine.\"\n"
        ),
    );
    toren.agent(
        "tg",
        "name: tg\nmodel: scripted/tg.script.yaml\nsandbox:\n  approval: always\n",
    );
    let child = bot(&toren);
    fake.send_text(USER, "go");
    assert!(fake.wait_for(WAIT, |v| {
        v.messages(USER).iter().any(|m| !m.buttons().is_empty())
    }));
    let asked = with_buttons(&fake.messages(USER)).remove(0);
    assert!(
        asked
            .text
            .contains("</pre>\n… (505 more characters not shown;"),
        "{}",
        asked.text
    );
    assert!(!asked.text.contains(&long));
    let labels: Vec<String> = asked.buttons().into_iter().map(|(l, _)| l).collect();
    assert_eq!(
        labels,
        [
            "✅ Approve",
            "❌ Deny",
            "✍️ Deny with reason",
            "📜 Show all"
        ]
    );
    fake.press(USER, asked.message_id, &button(&asked, "s:"));
    assert!(fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .any(|m| m.text == format!("📜 The whole command:\n<pre>{long}</pre>"))
    }));
    fake.press(USER, asked.message_id, &button(&asked, "d:"));
    assert!(fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .any(|m| m.text.contains("Not run, fine."))
    }));
    let late = fake.press(USER, asked.message_id, &button(&asked, "a:"));
    let told = fake.wait_for(WAIT, |v| v.answer(late).is_some());
    let stderr = stop(child);
    assert!(told, "{stderr}");
    assert_eq!(
        fake.answer(late).as_deref(),
        Some("Already decided: denied by telegram:111 via telegram.")
    );
    let shown = fake.message(USER, asked.message_id).unwrap();
    assert!(
        shown
            .text
            .contains("❌ Denied by telegram:111 via telegram"),
        "{}",
        shown.text
    );
    let run = toren.newest_run().unwrap();
    let events = toren.events(&run);
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "approval_decided")
            .count(),
        1
    );
    assert!(events.iter().all(|e| e["type"] != "tool_started"));
}

/// The text between `<pre>` and `</pre>` of `html`, unescaped: what Telegram shows in
/// the block (HTML mode reads only tags and entities, never backticks).
fn pre_text(html: &str) -> String {
    let start = html.find("<pre>").expect("a <pre> block") + "<pre>".len();
    let end = html.rfind("</pre>").expect("a closed <pre> block");
    let inner = &html[start..end];
    assert!(
        !inner.contains('<') && !inner.contains('>'),
        "no tag inside the block: {inner}"
    );
    inner
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&amp;", "&")
}

#[test]
fn what_is_approved_is_shown_exactly_in_the_preview_the_full_view_and_the_edited_message() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    // Past the preview: a line starting with ``` (valid bash; it runs `echo HIDDEN`) and a
    // `id` pair, which a Markdown renderer would drop as a fence and turn into code.
    let pad = "x".repeat(1600);
    let command =
        format!("echo {pad}\n``` ; echo HIDDEN > hidden.txt\necho `id` <b>&amp;\n```\necho end");
    let yaml = command
        .replace('\\', "\\\\")
        .replace('"', "\\\"")
        .replace('\n', "\\n");
    toren.file(
        "tg.script.yaml",
        &format!(
            "turns:\n  - tool_calls:\n      - bash: {{command: \"{yaml}\"}}\n  - text: \"Not run, fine.\"\n"
        ),
    );
    toren.agent(
        "tg",
        "name: tg\nmodel: scripted/tg.script.yaml\nsandbox:\n  approval: always\n",
    );
    let child = bot(&toren);
    fake.send_text(USER, "go");
    assert!(fake.wait_for(WAIT, |v| {
        v.messages(USER).iter().any(|m| !m.buttons().is_empty())
    }));
    let asked = with_buttons(&fake.messages(USER)).remove(0);
    assert_eq!(asked.parse_mode.as_deref(), Some("HTML"));
    let preview = pre_text(&asked.text);
    assert!(
        command.starts_with(&preview) && preview.len() == 1500,
        "the preview is the command's start, exactly: {preview}"
    );
    fake.press(USER, asked.message_id, &button(&asked, "s:"));
    assert!(fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .any(|m| m.text.starts_with("📜 The whole command"))
    }));
    let full: Vec<BotMessage> = fake
        .messages(USER)
        .into_iter()
        .filter(|m| m.text.starts_with("📜 The whole command"))
        .collect();
    assert_eq!(full.len(), 1, "{full:?}");
    assert_eq!(full[0].parse_mode.as_deref(), Some("HTML"));
    assert_eq!(pre_text(&full[0].text), command, "{}", full[0].text);
    assert!(
        full[0]
            .text
            .contains("\n``` ; echo HIDDEN &gt; hidden.txt\necho `id` &lt;b&gt;&amp;amp;\n```\n"),
        "{}",
        full[0].text
    );
    fake.press(USER, asked.message_id, &button(&asked, "d:"));
    assert!(fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .any(|m| m.text.contains("Not run, fine."))
    }));
    let stderr = stop(child);
    let edited = fake.message(USER, asked.message_id).unwrap();
    assert!(edited.edits > 0, "{stderr}");
    assert_eq!(edited.parse_mode.as_deref(), Some("HTML"));
    assert!(edited.text.contains("❌ Denied"), "{}", edited.text);
    assert_eq!(pre_text(&edited.text), preview, "{}", edited.text);
    // Every approval text the bot sent or edited went in HTML mode, never Markdown.
    for call in fake.calls() {
        if matches!(call.method.as_str(), "sendMessage" | "editMessageText") {
            let mode = call.str("parse_mode");
            assert!(
                mode.is_none() || mode.as_deref() == Some("HTML"),
                "{call:?}"
            );
        }
    }
    assert!(find(&toren.sandbox_root(), "hidden.txt").is_none());
}

#[test]
fn hostile_text_from_the_model_and_the_sandbox_reaches_telegram_escaped_and_visible() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    toren.file(
        "tg.script.yaml",
        r##"
turns:
  - tool_calls:
      - bash: {command: "printf 'x' > \"$(printf 'evil\\033[31m\\342\\200\\256name')\" && printf '# hi' > notes.md && echo '<b>&'"}
  - tool_calls:
      - send_to_channel: {path: notes.md, caption: "cap \u202e <i>x</i> & \e[2J"}
  - text: "Bidi \u202e evil, esc \e[31m red, <b>bold</b> & co"
"##,
    );
    toren.agent(
        "tg",
        "name: tg\nmodel: scripted/tg.script.yaml\nsandbox:\n  approval: never\n",
    );
    let child = bot(&toren);
    fake.send_text(USER, "go");
    assert!(fake.wait_for(WAIT, |v| {
        v.messages(USER).iter().any(|m| m.text.contains("Bidi"))
    }));
    let files = ask(&fake, "/files", "notes.md");
    let stderr = stop(child);
    let messages = fake.messages(USER);
    let reply = messages.iter().find(|m| m.text.contains("Bidi")).unwrap();
    assert!(
        reply
            .text
            .ends_with("\nBidi ⟨U+202E⟩ evil, esc ⟨ESC⟩[31m red, &lt;b&gt;bold&lt;/b&gt; &amp; co"),
        "{}\n{stderr}",
        reply.text
    );
    assert!(
        reply
            .text
            .contains("&amp;&amp; echo '&lt;b&gt;&amp;'</code> → exit 0"),
        "the tool line is escaped: {}",
        reply.text
    );
    let document = messages.iter().find(|m| m.kind == "document").unwrap();
    assert_eq!(document.text, "cap ⟨U+202E⟩ <i>x</i> & ⟨ESC⟩[2J");
    assert_eq!(document.parse_mode, None, "a caption is plain text");
    assert!(
        files.text.contains("evil⟨ESC⟩[31m⟨U+202E⟩name (1 B)"),
        "{}",
        files.text
    );
    for message in &messages {
        assert!(
            !message
                .text
                .chars()
                .any(|c| c.is_control() && c != '\n' || c == '\u{202e}'),
            "a raw control or bidi character reached Telegram: {:?}",
            message.text
        );
    }
}

#[test]
fn an_upload_is_never_written_through_a_symlink_out_of_the_workspace() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    let outside = toren.dir.path().join("outside");
    std::fs::create_dir_all(&outside).unwrap();
    toren.file(
        "tg.script.yaml",
        &format!(
            "turns:\n  - tool_calls:\n      - bash: {{command: \"ln -s {} uploads && echo linked\"}}\n  - text: \"Linked.\"\n",
            outside.display()
        ),
    );
    toren.agent(
        "tg",
        "name: tg\nmodel: scripted/tg.script.yaml\nsandbox:\n  approval: never\n",
    );
    let child = bot(&toren);
    ask(&fake, "link it", "Linked.");
    fake.send_file(USER, "data.csv", b"a,b\n", None, false);
    let refused = fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .any(|m| m.text.starts_with("Cannot save your file"))
    });
    let stderr = stop(child);
    assert!(refused, "{stderr} {:?}", fake.messages(USER));
    assert_eq!(
        std::fs::read_dir(&outside).unwrap().count(),
        0,
        "nothing was written outside the workspace"
    );
    assert_eq!(runs(&toren).len(), 1, "the upload made no turn");
}

#[test]
fn undo_takes_the_session_back_to_before_the_last_turn() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    toren.file(
        "tg.script.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"echo one > one.txt\"}\n  - text: \"Wrote one.\"\n",
    );
    toren.agent(
        "tg",
        "name: tg\nmodel: scripted/tg.script.yaml\nsandbox:\n  approval: never\n",
    );
    let child = bot(&toren);
    ask(&fake, "go", "Wrote one.");
    let file = find(&toren.sandbox_root(), "one.txt").expect("the turn wrote one.txt");
    ask(
        &fake,
        "/undo",
        "Back to before turn 1: the workspace is as it was then.",
    );
    assert!(!file.exists(), "one.txt is undone");
    ask(&fake, "/undo", "it has no turn to undo");
    let stderr = stop(child);
    assert!(!file.exists(), "{stderr}");
}

/// `/undo` while the bot's own turn is still at work: the turn is stopped (the bot drives
/// it, so no other process holds it) and taken back, instead of being refused as driven
/// elsewhere.
#[test]
fn undo_during_the_bots_own_turn_stops_it_and_takes_it_back() {
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake);
    toren.file(
        "tg.script.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"echo one > one.txt && sleep 120\"}\n  - text: \"Never reached.\"\n",
    );
    toren.agent(
        "tg",
        "name: tg\nmodel: scripted/tg.script.yaml\nsandbox:\n  approval: never\n",
    );
    let child = bot(&toren);
    fake.send_text(USER, "go");
    let deadline = std::time::Instant::now() + WAIT;
    let file = loop {
        if let Some(file) = find(&toren.sandbox_root(), "one.txt") {
            break file;
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the turn never wrote one.txt"
        );
        std::thread::sleep(std::time::Duration::from_millis(50));
    };
    ask(
        &fake,
        "/undo",
        "Back to before turn 1: the workspace is as it was then.",
    );
    assert!(!file.exists(), "one.txt is undone");
    let stderr = stop(child);
    assert!(
        !fake
            .messages(USER)
            .iter()
            .any(|m| m.text.contains("Never reached.")),
        "the stopped turn went on: {stderr}"
    );
}

/// A turn paused at its token budget offers a "Raise the budget" button: a press raises
/// it by the agent's budget once more and the turn completes; the offer then says who
/// raised it by what, and a later press is told the pause is over.
#[test]
fn a_turn_paused_at_its_budget_is_raised_by_a_button_and_completes() {
    let model = toren_test_support::FakeAnthropic::start([
        super::budget::answer("toolu_a", 1_200, 30),
        super::budget::answer("toolu_b", 100, 10),
        toren_test_support::Reply::text("all read"),
    ])
    .unwrap();
    let fake = FakeTelegram::start(TOKEN).unwrap();
    let toren = toren_for(&fake)
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", &model.base_url());
    toren.agent(
        "tg",
        "name: tg\nmodel: anthropic/claude-haiku-4-5\nsandbox:\n  approval: never\n\
         budget: {tokens: 1000}\n",
    );
    let child = bot(&toren);
    fake.send_text(USER, "look");
    let offered = fake.wait_for(WAIT, |v| {
        v.messages(USER)
            .iter()
            .any(|m| m.buttons().iter().any(|(_, d)| d.starts_with("b:")))
    });
    assert!(offered, "no raise was offered: {:?}", fake.calls());
    let offer = with_buttons(&fake.messages(USER)).remove(0);
    assert!(
        offer.text.contains("reached its budget (tokens)"),
        "{}",
        offer.text
    );
    assert_eq!(model.requests().len(), 1, "no call past the budget");
    let data = button(&offer, "b:");
    assert!(data.len() <= 64);

    let press = fake.press(USER, offer.message_id, &data);
    let done = fake.wait_for(WAIT, |v| {
        v.messages(USER).iter().any(|m| m.text.contains("all read"))
    });
    assert!(done, "{:?}", fake.calls());
    assert_eq!(
        fake.answer(press).as_deref(),
        Some("Raised by +1,000 tokens.")
    );
    let raised = fake.wait_for(WAIT, |v| {
        v.messages(USER).iter().any(|m| {
            m.message_id == offer.message_id && m.text.contains("Budget raised by +1,000 tokens")
        })
    });
    let shown = fake.message(USER, offer.message_id).unwrap();
    assert!(raised, "{}", shown.text);
    assert!(
        shown.text.contains("telegram:111 via telegram"),
        "{}",
        shown.text
    );
    assert!(shown.buttons().is_empty(), "the button went");
    let run = runs(&toren).remove(0);
    assert_eq!(run["status"], "completed", "{run}");

    let late = fake.press(USER, offer.message_id, &data);
    let told = fake.wait_for(WAIT, |v| v.answer(late).is_some());
    assert!(told);
    assert_eq!(
        fake.answer(late).as_deref(),
        Some("The turn is no longer paused at its budget.")
    );
    stop(child);
}
