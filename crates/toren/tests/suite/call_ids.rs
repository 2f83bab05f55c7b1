//! Tool calls through the real binary when the provider's ids are missing, repeated across
//! turns or repeated within one answer (defects seen in real providers), arguments encoded twice, and a
//! log that cannot be replayed: every call gets an id unique within the run, approvals
//! address it unambiguously, what is approved is what runs, and a corrupt log is a failed
//! run, never a resumable one.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toren_protocol::{AssistantMessage, ToolCall};
use toren_test_support::{FakeAnthropic, FakeOpenAi, Reply};

use super::common::{Toren, read, text};

fn bash_turn(id: &str, command: &str) -> AssistantMessage {
    AssistantMessage {
        text: String::new(),
        tool_calls: vec![ToolCall::new(id, "bash", json!({ "command": command }))],
    }
}

/// Waits until the run waits for a call other than `previous`, and returns that call's id.
fn next_pending(
    toren: &Toren,
    child: &mut std::process::Child,
    run: &str,
    previous: Option<&str>,
) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let shown = toren.show(run);
        if let Some(call) = shown["pending_approval"]["call_id"].as_str()
            && Some(call) != previous
        {
            return call.to_owned();
        }
        if let Some(exit) = child.try_wait().unwrap() {
            panic!("toren run exited ({exit}) while a call should wait: {shown}");
        }
        assert!(Instant::now() < deadline, "no new pending call: {shown}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn ids_of(events: &[Value], kind: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == kind)
        .map(|e| e["call_id"].as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn calls_without_ids_get_unique_ones_and_every_approval_reaches_its_call() {
    // Ollama's OpenAI-compatible stream sends no ids: each turn's call used to be `call_1`,
    // and turn 2's approval was refused as "already approved", leaving the run stuck.
    let fake = FakeOpenAi::start(Reply::turns(vec![
        bash_turn("", "echo one >> log.txt"),
        bash_turn("", "echo two >> log.txt"),
        bash_turn("", "echo three >> log.txt"),
        AssistantMessage {
            text: "logged".into(),
            tool_calls: vec![],
        },
    ]))
    .unwrap();
    let toren = Toren::new().env("OLLAMA_HOST", &fake.host_url());
    toren.agent(
        "llama",
        "name: llama\nmodel: ollama/llama3.2\nsandbox: true\n",
    );
    let mut child = toren.spawn(&["run", "llama", "--input", "log three lines"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");

    let mut approved: Vec<String> = Vec::new();
    for _ in 0..3 {
        let call = next_pending(
            &toren,
            &mut child,
            &run,
            approved.last().map(String::as_str),
        );
        let out = toren.run(&["approve", &run, &call]);
        assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
        approved.push(call);
    }
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "logged\n");
    assert_eq!(
        read(&toren.workspace(&run).join("log.txt")),
        "one\ntwo\nthree\n"
    );

    let events = toren.events(&run);
    let started = ids_of(&events, "tool_started");
    assert_eq!(started, approved, "each approval ran its own call");
    let mut unique = started.clone();
    unique.sort();
    unique.dedup();
    assert_eq!(
        unique.len(),
        3,
        "ids are unique within the run: {started:?}"
    );

    // The model was sent tool results that answer the calls it was sent, id for id.
    let last = fake.requests().last().unwrap().body["messages"].clone();
    let mut sent_calls = Vec::new();
    let mut sent_results = Vec::new();
    for m in last.as_array().unwrap() {
        for c in m["tool_calls"].as_array().into_iter().flatten() {
            sent_calls.push(c["id"].as_str().unwrap().to_owned());
        }
        if m["role"] == "tool" {
            sent_results.push(m["tool_call_id"].as_str().unwrap().to_owned());
        }
    }
    assert_eq!(sent_calls, approved);
    assert_eq!(sent_results, approved);
}

#[test]
fn ids_repeated_across_turns_keep_the_providers_id_on_the_wire() {
    let fake = FakeOpenAi::start(Reply::turns(vec![
        bash_turn("call_1", "echo one >> log.txt"),
        bash_turn("call_1", "echo two >> log.txt"),
        AssistantMessage {
            text: "done".into(),
            tool_calls: vec![],
        },
    ]))
    .unwrap();
    let toren = Toren::new()
        .env("OPENAI_API_KEY", "k")
        .env("OPENAI_BASE_URL", &fake.base_url());
    toren.agent(
        "gpt",
        "name: gpt\nmodel: openai/gpt-5\nsandbox:\n  approval: never\n",
    );
    let out = toren.run(&["run", "gpt", "--input", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run = toren.newest_run().unwrap();
    let completed = ids_of(&toren.events(&run), "tool_completed");
    assert_eq!(completed.len(), 2);
    assert_ne!(completed[0], completed[1], "{completed:?}");
    assert_eq!(completed[0], "call_1");

    // Each turn goes back to the provider under the id the provider gave it.
    let last = fake.requests().last().unwrap().body["messages"].clone();
    let results: Vec<&str> = last
        .as_array()
        .unwrap()
        .iter()
        .filter(|m| m["role"] == "tool")
        .map(|m| m["tool_call_id"].as_str().unwrap())
        .collect();
    assert_eq!(results, vec!["call_1", "call_1"]);
}

#[test]
fn duplicate_ids_in_one_answer_are_repaired_and_the_run_stays_readable() {
    let write = |path: &str| {
        ToolCall::new(
            "toolu_dup",
            "write_file",
            json!({"path": path, "content": path}),
        )
    };
    let fake = FakeAnthropic::start(Reply::turns(vec![
        AssistantMessage {
            text: String::new(),
            tool_calls: vec![write("a.txt"), write("b.txt")],
        },
        AssistantMessage {
            text: "both written".into(),
            tool_calls: vec![],
        },
    ]))
    .unwrap();
    let toren = Toren::new()
        .env("ANTHROPIC_API_KEY", "k")
        .env("ANTHROPIC_BASE_URL", &fake.base_url());
    toren.agent(
        "claude",
        "name: claude\nmodel: anthropic/claude-sonnet-5\nsandbox: true\n",
    );
    let out = toren.run(&["run", "claude", "--input", "write two files"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run = toren.newest_run().unwrap();
    let ws = toren.workspace(&run);
    assert_eq!(read(&ws.join("a.txt")), "a.txt");
    assert_eq!(read(&ws.join("b.txt")), "b.txt");
    assert_eq!(toren.show(&run)["status"], "completed");
    let completed = ids_of(&toren.events(&run), "tool_completed");
    assert_eq!(completed.len(), 2);
    assert_ne!(completed[0], completed[1]);

    // The next request carries two distinct tool_use ids, each answered once.
    let messages = fake.requests()[1].body["messages"].clone();
    let mut uses = Vec::new();
    let mut results = Vec::new();
    for m in messages.as_array().unwrap() {
        for block in m["content"].as_array().into_iter().flatten() {
            match block["type"].as_str() {
                Some("tool_use") => uses.push(block["id"].as_str().unwrap().to_owned()),
                Some("tool_result") => {
                    results.push(block["tool_use_id"].as_str().unwrap().to_owned());
                }
                _ => {}
            }
        }
    }
    assert_eq!(uses, completed);
    assert_eq!(results, completed);
}

#[test]
fn a_command_encoded_twice_is_shown_decoded_as_it_runs() {
    let toren = Toren::new();
    // The arguments are a JSON string holding an object whose command is \u-escaped.
    let arguments = r#"{"command": "\u0065\u0063\u0068\u006f PWNED > pwned.txt"}"#;
    let script = json!({"turns": [
        {"tool_calls": [{"bash": arguments}]},
        {"text": "done"},
    ]});
    toren.file("s.yaml", &script.to_string());
    toren.agent("enc", "name: enc\nmodel: scripted/s.yaml\nsandbox: true\n");
    let mut child = toren.spawn(&["run", "enc", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    let shown = toren.show(&run);
    assert_eq!(
        shown["pending_approval"]["command"],
        "echo PWNED > pwned.txt"
    );
    let requested: Vec<Value> = toren
        .events(&run)
        .into_iter()
        .filter(|e| e["type"] == "approval_requested")
        .collect();
    assert_eq!(requested[0]["command"], "echo PWNED > pwned.txt");

    let call = shown["pending_approval"]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = toren.run(&["approve", &run, &call]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(read(&toren.workspace(&run).join("pwned.txt")), "PWNED\n");
}

#[test]
fn a_log_that_cannot_be_replayed_is_a_failed_run_not_a_resumable_one() {
    let toren = Toren::new();
    let script = json!({"turns": [
        {"tool_calls": [{"bash": {"command": "true"}}]},
        {"text": "done"},
    ]});
    toren.file("s.yaml", &script.to_string());
    toren.agent("c", "name: c\nmodel: scripted/s.yaml\nsandbox: true\n");
    let mut child = toren.spawn(&["run", "c", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    child.kill().unwrap();
    child.wait().unwrap();

    // Corrupt the log the way an unvalidated answer once did: a second model answer while
    // the first one's tool call is unanswered cannot be folded.
    let db = toren.dir.path().join("toren").join("toren.db");
    let runtime = tokio::runtime::Runtime::new().unwrap();
    runtime.block_on(async {
        use toren_store::EventLog;
        let store = toren_store::SqliteStore::open(&format!("sqlite://{}", db.display()))
            .await
            .unwrap();
        let run_id: toren_protocol::RunId = run.parse().unwrap();
        let summary = store.run(&run_id).await.unwrap();
        let dead = summary.lease.unwrap().holder;
        let lease = store
            .take_over_lease(&run_id, &dead, "test/1/1", Duration::from_secs(1))
            .await
            .unwrap();
        let answer = toren_protocol::EventKind::ModelResponded(toren_protocol::ModelResponded {
            message: bash_turn("x", "ls"),
            stop_reason: "tool_use".into(),
            usage: Default::default(),
            model: "m".into(),
        });
        store
            .append(&lease, summary.last_seq, vec![answer])
            .await
            .unwrap();
        store.release_lease(&lease).await.unwrap();
    });

    let list: Value =
        serde_json::from_slice(&toren.run(&["runs", "list", "--json"]).stdout).unwrap();
    assert_eq!(list[0]["id"], run.as_str());
    assert_eq!(list[0]["status"], "failed", "{list}");
    assert_eq!(list[0]["resumable"], false, "{list}");
    let shown = toren.show(&run);
    assert_eq!(shown["status"], "failed");
    assert!(
        shown["error"]
            .as_str()
            .unwrap()
            .contains("cannot be replayed"),
        "{shown}"
    );
    let out = toren.run(&["resume", &run]);
    assert_eq!(out.status.code(), Some(1));
    assert!(
        text(&out.stderr).contains("failed"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(
        toren.event_types(&run).last().map(String::as_str),
        Some("run_failed")
    );
}
