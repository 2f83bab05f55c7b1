//! The OpenAI Chat Completions client, also used for Ollama and other compatible servers.
//!
//! `base_url` **includes the API version** (`https://api.openai.com/v1`,
//! `http://localhost:11434/v1`), as in the official SDKs' `OPENAI_BASE_URL`; the client
//! posts to `{base_url}/chat/completions` with `stream: true` and
//! `stream_options.include_usage`, and feeds the chunks to [`stream::Assembler`]. Tool
//! results go out as one `tool` message per call; the API has no error flag, so a failed
//! tool's content is prefixed with `Error: `. Retries as in `anthropic`.

mod stream;

use std::fmt;

use async_trait::async_trait;
use futures::StreamExt;
use serde_json::{Map, Value, json};
use toren_protocol::Message;

use crate::build::redacted;
use crate::error::{Error, Result};
use crate::http::{client, parse_data, send_sse};
use crate::provider::{ModelProvider, ModelRequest, ModelResponse, TextSink};
use crate::retry::{RetryPolicy, with_retries};

/// Which body field carries the output limit: OpenAI's current models want
/// `max_completion_tokens`; Ollama and most compatible servers read `max_tokens`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum MaxTokensField {
    MaxTokens,
    MaxCompletionTokens,
}

impl MaxTokensField {
    fn key(self) -> &'static str {
        match self {
            MaxTokensField::MaxTokens => "max_tokens",
            MaxTokensField::MaxCompletionTokens => "max_completion_tokens",
        }
    }
}

/// Where and as whom to call a Chat Completions API. `Debug` hides the key.
#[derive(Clone)]
pub struct OpenAiConfig {
    /// Names the provider in errors: `openai`, `ollama`.
    pub provider: &'static str,
    /// Including `/v1`, e.g. `https://api.openai.com/v1`.
    pub base_url: String,
    /// Sent as `Authorization: Bearer …`; `None` sends no header (Ollama).
    pub api_key: Option<String>,
    /// The model id, e.g. `gpt-4.1` or `llama3.2`.
    pub model: String,
    pub max_tokens_field: MaxTokensField,
    pub retry: RetryPolicy,
}

impl fmt::Debug for OpenAiConfig {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("OpenAiConfig")
            .field("provider", &self.provider)
            .field("base_url", &self.base_url)
            .field("api_key", &redacted(&self.api_key))
            .field("model", &self.model)
            .field("max_tokens_field", &self.max_tokens_field)
            .field("retry", &self.retry)
            .finish()
    }
}

/// A [`ModelProvider`] speaking OpenAI Chat Completions.
#[derive(Debug)]
pub struct OpenAiProvider {
    http: reqwest::Client,
    url: String,
    config: OpenAiConfig,
}

impl OpenAiProvider {
    pub fn new(config: OpenAiConfig) -> Result<Self> {
        let url = format!("{}/chat/completions", config.base_url.trim_end_matches('/'));
        Ok(OpenAiProvider {
            http: client()?,
            url,
            config,
        })
    }

    async fn attempt(&self, body: &Value, on_text: TextSink<'_>) -> Result<ModelResponse> {
        let provider = self.config.provider;
        let mut request = self.http.post(&self.url).json(body);
        if let Some(key) = &self.config.api_key {
            request = request.bearer_auth(key);
        }
        let mut events = send_sse(provider, request).await?;
        let mut assembler = stream::Assembler::new(provider);
        let mut done = false;
        while let Some(event) = events.next().await {
            let data = event?.data;
            match data.trim() {
                "" => continue,
                "[DONE]" => {
                    done = true;
                    break;
                }
                data => assembler.feed(parse_data(provider, data)?, on_text)?,
            }
        }
        if !done && !assembler.has_finish_reason() {
            return Err(Error::Truncated { provider });
        }
        Ok(assembler.finish(&self.config.model))
    }
}

#[async_trait]
impl ModelProvider for OpenAiProvider {
    async fn respond(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelResponse> {
        let body = request_body(&self.config, request);
        with_retries(&self.config.retry, || self.attempt(&body, on_text)).await
    }
}

/// The JSON body of one Chat Completions call.
pub(crate) fn request_body(config: &OpenAiConfig, request: &ModelRequest) -> Value {
    let mut body = Map::new();
    body.insert("model".into(), json!(config.model));
    body.insert(
        "messages".into(),
        Value::Array(messages(&request.system, &request.messages)),
    );
    body.insert(
        config.max_tokens_field.key().into(),
        json!(request.max_tokens),
    );
    if !request.tools.is_empty() {
        let tools = request
            .tools
            .iter()
            .map(|t| {
                json!({"type": "function", "function": {
                    "name": t.name, "description": t.description, "parameters": t.input_schema,
                }})
            })
            .collect();
        body.insert("tools".into(), Value::Array(tools));
    }
    body.insert("stream".into(), json!(true));
    body.insert("stream_options".into(), json!({"include_usage": true}));
    Value::Object(body)
}

fn messages(system: &str, conversation: &[Message]) -> Vec<Value> {
    let mut out = Vec::new();
    if !system.is_empty() {
        out.push(json!({"role": "system", "content": system}));
    }
    let wire = toren_protocol::wire_ids(conversation);
    for message in conversation {
        match message {
            Message::User { text } => out.push(json!({"role": "user", "content": text})),
            Message::Assistant(assistant) => {
                let content = if assistant.text.is_empty() {
                    Value::Null
                } else {
                    json!(assistant.text)
                };
                let mut entry = json!({"role": "assistant", "content": content});
                if !assistant.tool_calls.is_empty() {
                    let calls = assistant
                        .tool_calls
                        .iter()
                        .map(|call| {
                            // Arguments that were not JSON were kept as the model's raw text.
                            let arguments = match &call.arguments {
                                Value::String(raw) => raw.clone(),
                                other => other.to_string(),
                            };
                            json!({"id": call.wire_id(), "type": "function", "function": {
                                "name": call.name, "arguments": arguments,
                            }})
                        })
                        .collect();
                    entry["tool_calls"] = Value::Array(calls);
                }
                out.push(entry);
            }
            Message::ToolResults { results } => {
                for result in results {
                    let content = if result.is_error {
                        format!("Error: {}", result.content)
                    } else {
                        result.content.clone()
                    };
                    out.push(json!({
                        "role": "tool", "content": content,
                        "tool_call_id": wire.get(result.call_id.as_str()).copied().unwrap_or(&result.call_id),
                    }));
                }
            }
        }
    }
    out
}
