//! The same work against fake Anthropic and OpenAI-compatible servers on loopback: the real
//! clients stream from servers that speak the documented wire protocols, and the run
//! completes with the same workspace and log as with the scripted model.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toren_protocol::{AssistantMessage, ToolCall};
use toren_test_support::{FakeAnthropic, FakeOpenAi, ReceivedRequest, Reply};

use super::common::{Toren, read, text};

fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: id.to_owned(),
        name: name.to_owned(),
        arguments,
        wire_id: None,
    }
}

/// Write, run, edit, read — with the provider's own style of call ids.
fn turns(prefix: &str) -> Vec<AssistantMessage> {
    let id = |n: u32| format!("{prefix}{n:02}");
    vec![
        AssistantMessage {
            text: "Writing a file and running a command. Ünïcode too.".into(),
            tool_calls: vec![
                call(
                    &id(1),
                    "write_file",
                    json!({"path": "src/app.txt", "content": "alpha\nbeta\n"}),
                ),
                call(
                    &id(2),
                    "bash",
                    json!({"command": "wc -l < src/app.txt > count.txt; echo counted"}),
                ),
            ],
        },
        AssistantMessage {
            text: String::new(),
            tool_calls: vec![
                call(
                    &id(3),
                    "edit_file",
                    json!({"path": "src/app.txt", "old_string": "beta", "new_string": "gamma"}),
                ),
                call(&id(4), "read_file", json!({"path": "src/app.txt"})),
            ],
        },
        AssistantMessage {
            text: "Finished: src/app.txt now ends with gamma.".into(),
            tool_calls: vec![],
        },
    ]
}

const AGENT: &str = "sandbox:\n  approval: never\n";

/// The tool results the model was sent, in order, as (call id, content) pairs.
fn results_sent(requests: &[ReceivedRequest], anthropic: bool) -> Vec<(String, String)> {
    let last = &requests.last().unwrap().body["messages"];
    let mut out = Vec::new();
    for message in last.as_array().unwrap() {
        if anthropic {
            for block in message["content"].as_array().into_iter().flatten() {
                if block["type"] == "tool_result" {
                    out.push((
                        block["tool_use_id"].as_str().unwrap().to_owned(),
                        block["content"].as_str().unwrap_or_default().to_owned(),
                    ));
                }
            }
        } else if message["role"] == "tool" {
            out.push((
                message["tool_call_id"].as_str().unwrap().to_owned(),
                message["content"].as_str().unwrap().to_owned(),
            ));
        }
    }
    out
}

fn check_outcome(toren: &Toren, out: &std::process::Output, prefix: &str) -> String {
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(
        text(&out.stdout),
        "Finished: src/app.txt now ends with gamma.\n"
    );
    assert!(
        stderr.contains("Ünïcode too."),
        "streamed text is shown on stderr: {stderr}"
    );
    let run = toren.newest_run().unwrap();
    let ws = toren.workspace(&run);
    assert_eq!(read(&ws.join("src/app.txt")), "alpha\ngamma\n");
    assert_eq!(read(&ws.join("count.txt")), "2\n");
    let events = toren.events(&run);
    let completed: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool_completed")
        .map(|e| e["call_id"].as_str().unwrap())
        .collect();
    let ids: Vec<String> = (1..=4).map(|n| format!("{prefix}{n:02}")).collect();
    assert_eq!(
        completed,
        ids.iter().map(String::as_str).collect::<Vec<_>>()
    );
    assert_eq!(
        events
            .iter()
            .filter(|e| e["type"] == "model_responded")
            .count(),
        3
    );
    assert_eq!(events.last().unwrap()["type"], "run_completed");
    run
}

#[test]
fn anthropic_streaming_with_a_rate_limit_completes() {
    let mut replies = vec![Reply::Status {
        status: 429,
        message: "slow down".into(),
        retry_after: Some(1),
    }];
    replies.extend(Reply::turns(turns("toolu_01A")));
    let fake = FakeAnthropic::start(replies).unwrap();
    let toren = Toren::new()
        .env("ANTHROPIC_API_KEY", "sk-ant-test-key")
        .env("ANTHROPIC_BASE_URL", &fake.base_url());
    toren.agent(
        "claude",
        &format!("name: claude\nmodel: anthropic/claude-sonnet-5\n{AGENT}"),
    );

    let out = toren.run(&["run", "claude", "--input", "build it"]);
    check_outcome(&toren, &out, "toolu_01A");

    let requests = fake.requests();
    assert_eq!(
        requests.len(),
        4,
        "one rate-limited attempt and three turns"
    );
    let first = &requests[1];
    assert_eq!(first.header("x-api-key"), Some("sk-ant-test-key"));
    assert_eq!(first.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(first.body["model"], "claude-sonnet-5");
    assert_eq!(first.body["stream"], true);
    let tools: Vec<&str> = first.body["tools"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap())
        .collect();
    assert_eq!(
        tools,
        vec![
            "bash",
            "read_file",
            "write_file",
            "edit_file",
            "send_to_channel"
        ]
    );
    let results = results_sent(&requests, true);
    assert_eq!(results.len(), 4);
    assert!(results[1].1.contains("counted"), "{results:?}");
    assert!(results[3].1.contains("gamma"), "{results:?}");
}

#[test]
fn openai_compatible_streaming_completes() {
    let fake = FakeOpenAi::start(Reply::turns(turns("call_x"))).unwrap();
    let toren = Toren::new()
        .env("OPENAI_API_KEY", "sk-openai-test")
        .env("OPENAI_BASE_URL", &fake.base_url());
    toren.agent("gpt", &format!("name: gpt\nmodel: openai/gpt-5\n{AGENT}"));

    let out = toren.run(&["run", "gpt", "--input", "build it"]);
    check_outcome(&toren, &out, "call_x");

    let requests = fake.requests();
    assert_eq!(requests.len(), 3);
    assert_eq!(
        requests[0].header("authorization"),
        Some("Bearer sk-openai-test")
    );
    assert_eq!(requests[0].body["model"], "gpt-5");
    assert_eq!(requests[0].body["messages"][0]["role"], "system");
    let results = results_sent(&requests, false);
    assert_eq!(results.len(), 4);
    assert!(results[3].1.contains("gamma"), "{results:?}");
}

#[test]
fn a_denial_reaches_the_model() {
    let fake = FakeAnthropic::start(Reply::turns(vec![
        AssistantMessage {
            text: String::new(),
            tool_calls: vec![call(
                "toolu_deny",
                "bash",
                json!({"command": "rm -rf build"}),
            )],
        },
        AssistantMessage {
            text: "Understood, I left it.".into(),
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
    let mut child = toren.spawn(&["run", "claude", "--input", "clean up"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    let denied = toren.run(&[
        "deny",
        &run,
        "toolu_deny",
        "--reason",
        "keep the build directory",
    ]);
    assert_eq!(denied.status.code(), Some(0), "{}", text(&denied.stderr));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let requests = fake.requests();
    assert_eq!(requests.len(), 2);
    let messages = requests[1].body["messages"].as_array().unwrap();
    let result = messages
        .iter()
        .flat_map(|m| m["content"].as_array().cloned().unwrap_or_default())
        .find(|b| b["type"] == "tool_result")
        .expect("the denial is sent as the tool result");
    assert_eq!(result["tool_use_id"], "toolu_deny");
    assert_eq!(result["is_error"], true);
    assert!(
        result["content"]
            .as_str()
            .unwrap()
            .contains("keep the build directory"),
        "{result}"
    );
}

#[test]
fn a_model_outage_leaves_the_run_resumable_and_a_bad_key_fails_it() {
    let overloaded = || Reply::Status {
        status: 529,
        message: "Overloaded".into(),
        retry_after: Some(0),
    };
    let fake =
        FakeAnthropic::start(vec![overloaded(), overloaded(), overloaded(), overloaded()]).unwrap();
    let toren = Toren::new()
        .env("ANTHROPIC_API_KEY", "k")
        .env("ANTHROPIC_BASE_URL", &fake.base_url());
    toren.agent("claude", "name: claude\nmodel: anthropic/claude-sonnet-5\n");
    let out = toren.run(&["run", "claude", "--input", "hello", "--json"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["status"], "running");
    assert!(stderr.contains("toren resume"), "{stderr}");
    assert_eq!(
        fake.requests().len(),
        4,
        "the provider retried before giving up"
    );
    let run = result["run_id"].as_str().unwrap().to_owned();
    let list: Value =
        serde_json::from_slice(&toren.run(&["runs", "list", "--json"]).stdout).unwrap();
    assert_eq!(list[0]["resumable"], true);
    assert_eq!(
        toren.event_types(&run),
        vec!["run_created"],
        "nothing was recorded as failed"
    );

    // The provider is back: the run goes on where it stopped.
    fake.push(Reply::text("Hello again."));
    let out = toren.run(&["resume", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "Hello again.\n");

    // A bad key is not going to pass: the run fails for good.
    fake.push(Reply::Status {
        status: 401,
        message: "invalid x-api-key".into(),
        retry_after: None,
    });
    let out = toren.run(&["run", "claude", "--input", "hello", "--json"]);
    assert_eq!(out.status.code(), Some(1));
    let result: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(result["status"], "failed");
    assert!(
        result["output"].as_str().unwrap().contains("401"),
        "{result}"
    );
}
