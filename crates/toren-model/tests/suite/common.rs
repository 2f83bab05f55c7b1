//! Shared builders for the suite: requests, tool specs, a text collector, fast retries.

use std::sync::Mutex;
use std::time::Duration;

use serde_json::{Value, json};
use toren_model::anthropic::{AnthropicConfig, AnthropicProvider};
use toren_model::openai::{MaxTokensField, OpenAiConfig, OpenAiProvider};
use toren_model::{ModelRequest, RetryPolicy};
use toren_protocol::{AssistantMessage, Message, ToolCall, ToolSpec};
use toren_test_support::{FakeAnthropic, FakeOpenAi};

pub(super) fn tools() -> Vec<ToolSpec> {
    vec![
        ToolSpec {
            name: "bash".into(),
            description: "Run a command.".into(),
            input_schema: json!({"type": "object", "properties": {"command": {"type": "string"}},
                "required": ["command"]}),
        },
        ToolSpec {
            name: "write_file".into(),
            description: "Write a file.".into(),
            input_schema: json!({"type": "object", "properties": {
                "path": {"type": "string"}, "content": {"type": "string"}}}),
        },
    ]
}

pub(super) fn request(messages: Vec<Message>) -> ModelRequest {
    ModelRequest {
        system: "You are a test.".into(),
        messages,
        tools: tools(),
        max_tokens: 1024,
    }
}

pub(super) fn user(text: &str) -> Message {
    Message::User { text: text.into() }
}

pub(super) fn call(id: &str, name: &str, arguments: Value) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments,
        wire_id: None,
    }
}

pub(super) fn turn(text: &str, tool_calls: Vec<ToolCall>) -> AssistantMessage {
    AssistantMessage {
        text: text.into(),
        tool_calls,
    }
}

/// Collects what a provider streams.
#[derive(Default)]
pub(super) struct Collected(Mutex<Vec<String>>);

impl Collected {
    pub(super) fn sink(&self) -> impl Fn(&str) + Send + Sync + '_ {
        |piece: &str| self.0.lock().unwrap().push(piece.to_owned())
    }

    pub(super) fn pieces(&self) -> Vec<String> {
        self.0.lock().unwrap().clone()
    }

    pub(super) fn text(&self) -> String {
        self.pieces().concat()
    }
}

pub(super) fn fast_retry() -> RetryPolicy {
    RetryPolicy {
        max_attempts: 4,
        base_delay: Duration::from_millis(5),
        max_delay: Duration::from_millis(20),
        max_retry_after: Duration::from_secs(5),
    }
}

pub(super) fn anthropic(fake: &FakeAnthropic) -> AnthropicProvider {
    AnthropicProvider::new(AnthropicConfig {
        base_url: fake.base_url(),
        api_key: "sk-ant-test".into(),
        model: "claude-test".into(),
        retry: fast_retry(),
    })
    .unwrap()
}

pub(super) fn openai(fake: &FakeOpenAi) -> OpenAiProvider {
    OpenAiProvider::new(OpenAiConfig {
        provider: "openai",
        base_url: fake.base_url(),
        api_key: Some("sk-test".into()),
        model: "gpt-test".into(),
        max_tokens_field: MaxTokensField::MaxCompletionTokens,
        retry: fast_retry(),
    })
    .unwrap()
}

/// A URL on which nothing listens.
pub(super) fn dead_url() -> String {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    let url = format!("http://{}", listener.local_addr().unwrap());
    drop(listener);
    url
}
