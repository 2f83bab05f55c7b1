//! The Anthropic Messages API client: maps a [`ModelRequest`] to
//! `POST {base_url}/v1/messages` with `stream: true`, and feeds the event stream to
//! [`stream::Assembler`]. Transient failures (429, 5xx, 529, broken connections, an
//! overloaded error in the stream) are retried per [`RetryPolicy`]; a retried call streams
//! its text again from the start.

mod stream;

use std::fmt;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Map, Value, json};
use toren_protocol::{AssistantMessage, Message};

use crate::error::Result;
use crate::http::{client, parse_data, send_sse};
use crate::provider::{ModelProvider, ModelRequest, ModelResponse, TextSink};
use crate::retry::{RetryPolicy, with_retries};

pub(crate) const PROVIDER: &str = "anthropic";
const API_VERSION: &str = "2023-06-01";

/// Where and as whom to call the Messages API. `Debug` hides the key.
#[derive(Clone)]
pub struct AnthropicConfig {
    /// Without `/v1`, e.g. `https://api.anthropic.com`.
    pub base_url: String,
    pub api_key: String,
    /// The model id, e.g. `claude-sonnet-4-5`.
    pub model: String,
    pub retry: RetryPolicy,
}

impl fmt::Debug for AnthropicConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("AnthropicConfig")
            .field("base_url", &self.base_url)
            .field("api_key", &"<redacted>")
            .field("model", &self.model)
            .field("retry", &self.retry)
            .finish()
    }
}

/// A [`ModelProvider`] speaking the Anthropic Messages API.
#[derive(Debug)]
pub struct AnthropicProvider {
    http: reqwest::Client,
    url: String,
    config: AnthropicConfig,
}

impl AnthropicProvider {
    pub fn new(config: AnthropicConfig) -> Result<Self> {
        let url = format!("{}/v1/messages", config.base_url.trim_end_matches('/'));
        Ok(AnthropicProvider {
            http: client()?,
            url,
            config,
        })
    }

    async fn attempt(&self, body: &Value, on_text: TextSink<'_>) -> Result<ModelResponse> {
        let request = self
            .http
            .post(&self.url)
            .header("x-api-key", &self.config.api_key)
            .header("anthropic-version", API_VERSION)
            .json(body);
        let mut events = send_sse(PROVIDER, request).await?;
        let mut assembler = stream::Assembler::default();
        while let Some(event) = events.next().await {
            let event = event?;
            if event.data.trim().is_empty() {
                continue;
            }
            assembler.feed(parse_data(PROVIDER, &event.data)?, on_text)?;
            if assembler.is_finished() {
                break;
            }
        }
        assembler.finish(&self.config.model)
    }
}

#[async_trait]
impl ModelProvider for AnthropicProvider {
    async fn respond(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelResponse> {
        let body = request_body(&self.config.model, request);
        with_retries(&self.config.retry, || self.attempt(&body, on_text)).await
    }
}

/// The JSON body of one Messages call.
pub(crate) fn request_body(model: &str, request: &ModelRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(model));
    body.insert("max_tokens".into(), json!(request.max_tokens));
    if !request.system.is_empty() {
        body.insert("system".into(), json!(request.system));
    }
    body.insert("messages".into(), Value::Array(messages(&request.messages)));
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| json!({"name": t.name, "description": t.description, "input_schema": t.input_schema}))
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), json!(true));
    Value::Object(body)
}

/// Maps the conversation to Messages API turns. Content is always a block list, so that
/// consecutive user-side entries (tool results, then a new user text) merge into one user
/// message with the `tool_result` blocks first, as the API requires. An assistant entry
/// with neither text nor tool calls is dropped: the API refuses empty content.
fn messages(conversation: &[Message]) -> Vec<Value> {
    let mut out: Vec<(&'static str, Vec<Value>)> = Vec::new();
    let wire = toren_protocol::wire_ids(conversation);
    for message in conversation {
        let (role, blocks) = match message {
            Message::User { text } => ("user", vec![json!({"type": "text", "text": text})]),
            Message::Assistant(assistant) => ("assistant", assistant_blocks(assistant)),
            Message::ToolResults { results } => (
                "user",
                results
                    .iter()
                    .map(|r| {
                        json!({
                            "type": "tool_result",
                            "tool_use_id": wire.get(r.call_id.as_str()).copied().unwrap_or(&r.call_id),
                            "content": r.content,
                            "is_error": r.is_error,
                        })
                    })
                    .collect(),
            ),
        };
        if blocks.is_empty() {
            continue;
        }
        match out.last_mut() {
            Some((last_role, last_blocks)) if *last_role == role => last_blocks.extend(blocks),
            _ => out.push((role, blocks)),
        }
    }
    out.into_iter()
        .map(|(role, content)| json!({"role": role, "content": content}))
        .collect()
}

fn assistant_blocks(message: &AssistantMessage) -> Vec<Value> {
    let mut blocks = Vec::new();
    if !message.text.is_empty() {
        blocks.push(json!({"type": "text", "text": message.text}));
    }
    for call in &message.tool_calls {
        // The API takes only an object; arguments that were not JSON (kept as a string so
        // the tool could report them) go back as `{}` — the tool result says what was wrong.
        let input = match &call.arguments {
            Value::Object(_) => call.arguments.clone(),
            _ => json!({}),
        };
        blocks.push(
            json!({"type": "tool_use", "id": call.wire_id(), "name": call.name, "input": input}),
        );
    }
    blocks
}
