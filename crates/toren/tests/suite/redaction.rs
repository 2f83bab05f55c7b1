//! Redaction by value through the real binary: a granted variable's value
//! that a command prints is journaled as `[redacted:NAME]`, so `toren events`, the next
//! model request (the fake Anthropic server records it) and the debug log never hold it,
//! while the command did see the real value (the file it wrote has it); the value in the
//! person's input is journaled redacted as well. A value that is too short to redact
//! (under 4 bytes) is left as it is. An injected secret unset in the environment is
//! refused by `toren run` and `toren chat` before anything is made.

use pretty_assertions::assert_eq;
use serde_json::json;
use toren_protocol::{AssistantMessage, ToolCall};
use toren_test_support::{FakeAnthropic, Reply};

use super::common::{Toren, read, text};

const VALUE: &str = "tok-9f3a6c1e-granted-value";

#[test]
fn a_granted_value_printed_by_a_command_is_redacted_in_the_journal_and_the_model_request() {
    let command = "echo \"token=$MY_TOKEN short=$SHORT\"; printf '%s' \"$MY_TOKEN\" > seen.txt";
    let fake = FakeAnthropic::start(vec![
        Reply::Turn(AssistantMessage {
            text: String::new(),
            tool_calls: vec![ToolCall::new("c1", "bash", json!({ "command": command }))],
        }),
        Reply::text("printed it"),
    ])
    .unwrap();
    let toren = Toren::new()
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", &fake.base_url())
        .env("MY_TOKEN", VALUE)
        .env("SHORT", "ab1")
        .env("TOREN_LOG", "debug");
    toren.agent(
        "printer",
        "name: printer\nmodel: anthropic/claude-sonnet-5\nsandbox:\n  approval: never\n  \
         env: [MY_TOKEN, SHORT]\n",
    );
    // The person's input holds the value too: journaled (and so sent) redacted.
    let input = format!("print the token (it is {VALUE})");
    let out = toren.run(&["run", "printer", "--input", &input]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let run = toren.newest_run().unwrap();
    assert_eq!(
        toren.events(&run)[0]["input"],
        "print the token (it is [redacted:MY_TOKEN])"
    );

    // The command saw the real value.
    assert_eq!(read(&toren.workspace(&run).join("seen.txt")), VALUE);

    // The journal has it redacted, the short value as it is.
    let events = toren.events(&run);
    let completed: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool_completed")
        .map(|e| e["output"].as_str().unwrap())
        .collect();
    assert_eq!(
        completed,
        vec!["token=[redacted:MY_TOKEN] short=ab1\n[exit code: 0]"]
    );
    let journal = serde_json::to_string(&events).unwrap();
    assert!(!journal.contains(VALUE), "the journal holds the value");

    // So does what the model was sent next.
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let second = String::from_utf8_lossy(&requests[1].raw_body);
    assert!(
        second.contains("token=[redacted:MY_TOKEN] short=ab1"),
        "{second}"
    );
    for request in &requests {
        assert!(
            !String::from_utf8_lossy(&request.raw_body).contains(VALUE),
            "a model request holds the value"
        );
    }

    // And no log line, at debug.
    assert!(
        !stderr.contains(VALUE),
        "the log holds the value:\n{stderr}"
    );
    assert!(!text(&out.stdout).contains(VALUE));
}

#[test]
fn a_run_whose_injected_secret_is_unset_is_not_created_and_the_error_names_it() {
    let toren = Toren::new().env("ANTHROPIC_API_KEY", "sk-ant-test");
    toren.agent(
        "injector",
        "name: injector\nmodel: anthropic/claude-sonnet-5\nsandbox:\n  network: [api.github.com]\n  \
         secrets:\n    GITHUB_TOKEN: {hosts: [api.github.com], header: \"Authorization: Bearer ${value}\"}\n",
    );
    let out = toren.run(&["run", "injector", "--input", "hi"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("agent `injector` injects GITHUB_TOKEN through its egress proxy")
            && stderr.contains("set it in the environment of the process that drives"),
        "{stderr}"
    );
    assert_eq!(toren.newest_run(), None, "no run was created");
    // `toren chat` refuses it when the session would be made, before any message.
    let out = toren.run(&["chat", "work", "--agent", "injector"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("agent `injector` injects GITHUB_TOKEN"),
        "{stderr}"
    );
    let out = toren.run(&["sessions", "show", "work", "--json"]);
    assert!(!out.status.success(), "no session was made");
    // The pinned policy of a run that does start names the secret and its host only.
    let out = toren.run(&[
        "check",
        toren.agents().join("injector.yaml").to_str().unwrap(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

/// The model can only hold a value it was given some other way (here: the person's
/// input), but what Toren shows or keeps of its answer is redacted as well: the streamed
/// text (split across deltas by the fake server, five bytes each), the journaled text and
/// tool arguments, and so the conversation sent next.
#[test]
fn a_value_in_the_models_answer_is_redacted_in_the_stream_the_journal_and_the_next_request() {
    let fake = FakeAnthropic::start(vec![
        Reply::Turn(AssistantMessage {
            text: format!("I was told {VALUE}."),
            tool_calls: vec![ToolCall::new(
                "c1",
                "bash",
                json!({ "command": format!("echo {VALUE}") }),
            )],
        }),
        Reply::text(&format!("done with {VALUE}")),
    ])
    .unwrap();
    let toren = Toren::new()
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", &fake.base_url())
        .env("MY_TOKEN", VALUE)
        .env("TOREN_LOG", "trace");
    toren.agent(
        "printer",
        "name: printer\nmodel: anthropic/claude-sonnet-5\nsandbox:\n  approval: never\n  \
         env: [MY_TOKEN]\n",
    );
    let out = toren.run(&["run", "printer", "--input", "go"]);
    let (stdout, stderr) = (text(&out.stdout), text(&out.stderr));
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let shown = format!("{stdout}{stderr}");
    assert!(!shown.contains(VALUE), "shown:\n{shown}");
    // Log lines (trace) may come between two deltas on stderr, so only the marker, which
    // one delta carries whole, is looked for here; the texts are checked in the journal.
    assert!(shown.matches("[redacted:MY_TOKEN]").count() >= 2, "{shown}");

    let run = toren.newest_run().unwrap();
    let events = toren.events(&run);
    let answered: Vec<(&str, String)> = events
        .iter()
        .filter(|e| e["type"] == "model_responded")
        .map(|e| {
            let calls = e["message"]["tool_calls"]
                .as_array()
                .map(|c| {
                    c.iter()
                        .map(|c| c["arguments"]["command"].to_string())
                        .collect()
                })
                .unwrap_or_default();
            (e["message"]["text"].as_str().unwrap(), calls)
        })
        .collect();
    assert_eq!(
        answered,
        vec![
            (
                "I was told [redacted:MY_TOKEN].",
                "\"echo [redacted:MY_TOKEN]\"".to_owned()
            ),
            ("done with [redacted:MY_TOKEN]", String::new()),
        ]
    );
    let journal = serde_json::to_string(&events).unwrap();
    assert!(!journal.contains(VALUE), "the journal holds the value");
    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    assert!(
        !String::from_utf8_lossy(&requests[1].raw_body).contains(VALUE),
        "the next model request holds the value"
    );
}

#[test]
fn a_value_in_a_field_no_output_holds_is_redacted_in_every_event_too() {
    // The model names its call with the value (ids are the provider's): the call id is in
    // model_responded, tool_started and tool_completed, none of them an output or text.
    let id = format!("toolu_{VALUE}");
    let fake = FakeAnthropic::start(vec![
        Reply::Turn(AssistantMessage {
            text: String::new(),
            tool_calls: vec![ToolCall::new(&id, "bash", json!({ "command": "echo hi" }))],
        }),
        Reply::text("done"),
    ])
    .unwrap();
    let toren = Toren::new()
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", &fake.base_url())
        .env("MY_TOKEN", VALUE);
    toren.agent(
        "namer",
        "name: namer\nmodel: anthropic/claude-sonnet-5\nsandbox:\n  approval: never\n  \
         env: [MY_TOKEN]\n",
    );
    let out = toren.run(&["run", "namer", "--input", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run = toren.newest_run().unwrap();
    let events = toren.events(&run);
    let ids: Vec<&str> = events
        .iter()
        .filter_map(|e| e["call_id"].as_str())
        .collect();
    assert_eq!(
        ids,
        vec!["toolu_[redacted:MY_TOKEN]", "toolu_[redacted:MY_TOKEN]"],
        "tool_started and tool_completed"
    );
    let journal = serde_json::to_string(&events).unwrap();
    assert!(
        !journal.contains(VALUE),
        "the journal holds the value: {journal}"
    );
    let shown = text(&toren.run(&["runs", "show", &run]).stdout);
    assert!(!shown.contains(VALUE), "{shown}");
}

#[test]
fn a_value_in_a_persons_reason_is_redacted_in_the_journal_and_what_the_model_is_told() {
    let fake = FakeAnthropic::start(vec![
        Reply::Turn(AssistantMessage {
            text: String::new(),
            tool_calls: vec![ToolCall::new(
                "c1",
                "bash",
                json!({ "command": "rm -rf db" }),
            )],
        }),
        Reply::text("not deleting"),
    ])
    .unwrap();
    let toren = Toren::new()
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", &fake.base_url())
        .env("MY_TOKEN", VALUE);
    toren.agent(
        "careful",
        "name: careful\nmodel: anthropic/claude-sonnet-5\nsandbox:\n  approval: always\n  \
         env: [MY_TOKEN]\n",
    );
    let mut child = toren.spawn(&["run", "careful", "--input", "clean up"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    let reason = format!("that db holds {VALUE}");
    let out = toren.run(&["deny", &run, "c1", "--reason", &reason]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let events = toren.events(&run);
    let decided = events
        .iter()
        .find(|e| e["type"] == "approval_decided")
        .unwrap();
    assert_eq!(decided["reason"], "that db holds [redacted:MY_TOKEN]");
    let journal = serde_json::to_string(&events).unwrap();
    assert!(!journal.contains(VALUE), "the journal holds the value");
    for request in fake.requests() {
        assert!(
            !String::from_utf8_lossy(&request.raw_body).contains(VALUE),
            "a model request holds the value"
        );
    }
}
