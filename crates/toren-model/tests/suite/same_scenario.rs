//! One script, three providers: the scripted provider and the real clients against the
//! fakes produce the same conversation.

use std::path::Path;

use pretty_assertions::assert_eq;
use toren_model::ModelProvider;
use toren_model::scripted::{Script, ScriptedProvider};
use toren_protocol::{AssistantMessage, Message, ToolResult};
use toren_test_support::{FakeAnthropic, FakeOpenAi, Reply};

use super::common::{anthropic, openai, request, user};

const SCRIPT: &str = r#"
turns:
  - text: "Let me look — ✓"
    tool_calls:
      - bash: {command: "ls -la"}
      - write_file: {path: "dir/notes.txt", content: "line 1\nline 2 ü\n"}
  - tool_calls:
      - read_file: {path: "dir/notes.txt", offset: 1, limit: 10}
  - text: "All done."
"#;

/// Runs the agent loop's shape: answer each turn's calls, ask again, until no calls.
async fn converse(provider: &dyn ModelProvider) -> Vec<AssistantMessage> {
    let mut messages = vec![user("do it")];
    let mut turns = Vec::new();
    loop {
        let response = provider
            .respond(&request(messages.clone()), &|_: &str| {})
            .await
            .unwrap();
        let message = response.message;
        turns.push(message.clone());
        messages.push(Message::Assistant(message.clone()));
        if message.tool_calls.is_empty() {
            return turns;
        }
        let results = message
            .tool_calls
            .iter()
            .map(|c| ToolResult {
                call_id: c.id.clone(),
                content: format!("ran {}", c.name),
                is_error: false,
            })
            .collect();
        messages.push(Message::ToolResults { results });
    }
}

#[tokio::test]
async fn scripted_anthropic_and_openai_agree() {
    let script = Script::parse(SCRIPT, Path::new("scenario.yaml")).unwrap();
    let fake_anthropic = FakeAnthropic::start(Reply::turns(script.turns().to_vec())).unwrap();
    let fake_openai = FakeOpenAi::start(Reply::turns(script.turns().to_vec())).unwrap();

    let scripted = converse(&ScriptedProvider::new(
        script.clone(),
        "scenario.yaml".into(),
    ))
    .await;
    let via_anthropic = converse(&anthropic(&fake_anthropic)).await;
    let via_openai = converse(&openai(&fake_openai)).await;

    assert_eq!(scripted, script.turns());
    assert_eq!(via_anthropic, scripted);
    assert_eq!(via_openai, scripted);
    // The last request carries the whole conversation, results included.
    let last = fake_anthropic.requests().pop().unwrap();
    assert_eq!(last.body["messages"].as_array().unwrap().len(), 5);
    assert_eq!(
        fake_openai.requests().pop().unwrap().body["messages"]
            .as_array()
            .unwrap()
            .len(),
        7
    );
}
