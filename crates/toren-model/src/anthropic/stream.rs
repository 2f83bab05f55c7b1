//! Assembles one assistant turn from the Anthropic Messages event stream: text and
//! `tool_use` content blocks by index, tool input from `input_json_delta` fragments, stop
//! reason and usage from `message_start` / `message_delta`. An `error` event (which can
//! arrive after HTTP 200) becomes [`Error::Stream`]. The HTTP side lives in `super`.

use std::collections::BTreeMap;

use serde::Deserialize;
use serde_json::Value;
use toren_protocol::{AssistantMessage, ToolCall, Usage};

use crate::arguments::parse_arguments;
use crate::error::{Error, Result};
use crate::provider::{ModelResponse, TextSink};

use super::PROVIDER;

/// One event's `data`, keyed by its `type`. Unknown types and fields are ignored.
#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum StreamEvent {
    MessageStart {
        message: MessageStart,
    },
    ContentBlockStart {
        index: usize,
        content_block: BlockStart,
    },
    ContentBlockDelta {
        index: usize,
        delta: BlockDelta,
    },
    /// Tool input is decoded once the message is complete, so a block stop changes nothing.
    ContentBlockStop {},
    MessageDelta {
        #[serde(default)]
        delta: MessageDelta,
        #[serde(default)]
        usage: WireUsage,
    },
    MessageStop,
    Ping,
    Error {
        error: ApiError,
    },
    #[serde(other)]
    Unknown,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct MessageStart {
    #[serde(default)]
    model: String,
    #[serde(default)]
    usage: WireUsage,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct WireUsage {
    input_tokens: Option<u64>,
    output_tokens: Option<u64>,
    cache_creation_input_tokens: Option<u64>,
    cache_read_input_tokens: Option<u64>,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum BlockStart {
    Text {
        #[serde(default)]
        text: String,
    },
    ToolUse {
        id: String,
        name: String,
        #[serde(default)]
        input: Value,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
pub(crate) enum BlockDelta {
    TextDelta {
        text: String,
    },
    InputJsonDelta {
        partial_json: String,
    },
    #[serde(other)]
    Other,
}

#[derive(Debug, Default, Deserialize)]
pub(crate) struct MessageDelta {
    stop_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
pub(crate) struct ApiError {
    #[serde(rename = "type", default)]
    kind: String,
    #[serde(default)]
    message: String,
}

#[derive(Debug)]
enum Block {
    Text(String),
    Tool {
        id: String,
        name: String,
        json: String,
        start_input: Value,
    },
    /// Thinking, server tools and types this build does not know.
    Ignored,
}

/// The state of one streamed response.
#[derive(Debug, Default)]
pub(crate) struct Assembler {
    model: String,
    usage: Usage,
    stop_reason: Option<String>,
    blocks: BTreeMap<usize, Block>,
    finished: bool,
}

impl Assembler {
    pub(crate) fn is_finished(&self) -> bool {
        self.finished
    }

    pub(crate) fn feed(&mut self, event: StreamEvent, on_text: TextSink<'_>) -> Result<()> {
        match event {
            StreamEvent::MessageStart { message } => {
                self.model = message.model;
                self.add_usage(&message.usage);
            }
            StreamEvent::ContentBlockStart {
                index,
                content_block,
            } => {
                let block = match content_block {
                    BlockStart::Text { text } => {
                        if !text.is_empty() {
                            on_text(&text);
                        }
                        Block::Text(text)
                    }
                    BlockStart::ToolUse { id, name, input } => Block::Tool {
                        id,
                        name,
                        json: String::new(),
                        start_input: input,
                    },
                    BlockStart::Other => Block::Ignored,
                };
                self.blocks.insert(index, block);
            }
            StreamEvent::ContentBlockDelta { index, delta } => {
                match (self.blocks.get_mut(&index), delta) {
                    (Some(Block::Text(text)), BlockDelta::TextDelta { text: piece }) => {
                        on_text(&piece);
                        text.push_str(&piece);
                    }
                    (
                        Some(Block::Tool { json, .. }),
                        BlockDelta::InputJsonDelta { partial_json },
                    ) => {
                        json.push_str(&partial_json);
                    }
                    (None, _) => {
                        return Err(Error::Protocol {
                            provider: PROVIDER,
                            detail: format!(
                                "a delta for content block {index}, which never started"
                            ),
                        });
                    }
                    _ => {}
                }
            }
            StreamEvent::ContentBlockStop {} | StreamEvent::Ping | StreamEvent::Unknown => {}
            StreamEvent::MessageDelta { delta, usage } => {
                if delta.stop_reason.is_some() {
                    self.stop_reason = delta.stop_reason;
                }
                self.add_usage(&usage);
            }
            StreamEvent::MessageStop => self.finished = true,
            StreamEvent::Error { error } => {
                return Err(Error::Stream {
                    provider: PROVIDER,
                    kind: error.kind,
                    message: error.message,
                });
            }
        }
        Ok(())
    }

    /// `message_start` carries the input count; `message_delta` carries the cumulative
    /// output count (and, in newer API versions, input counts too). Cached prompt tokens
    /// count as input, and are also counted apart (read from, written to the cache).
    fn add_usage(&mut self, usage: &WireUsage) {
        let input = [
            usage.input_tokens,
            usage.cache_creation_input_tokens,
            usage.cache_read_input_tokens,
        ];
        if input.iter().any(Option::is_some) {
            self.usage.input_tokens = input.iter().flatten().sum();
            self.usage.cache_creation_input_tokens =
                usage.cache_creation_input_tokens.unwrap_or_default();
            self.usage.cache_read_input_tokens = usage.cache_read_input_tokens.unwrap_or_default();
        }
        if let Some(output) = usage.output_tokens {
            self.usage.output_tokens = output;
        }
    }

    pub(crate) fn finish(self, requested_model: &str) -> Result<ModelResponse> {
        if !self.finished {
            return Err(Error::Truncated { provider: PROVIDER });
        }
        let mut message = AssistantMessage::default();
        for block in self.blocks.into_values() {
            match block {
                Block::Text(text) => message.text.push_str(&text),
                Block::Tool {
                    id,
                    name,
                    json,
                    start_input,
                } => {
                    let arguments = match start_input {
                        Value::Object(map) if json.is_empty() && !map.is_empty() => {
                            Value::Object(map)
                        }
                        _ => parse_arguments(&json),
                    };
                    message.tool_calls.push(ToolCall {
                        id,
                        name,
                        arguments,
                        wire_id: None,
                    });
                }
                Block::Ignored => {}
            }
        }
        let stop_reason = self.stop_reason.unwrap_or_else(|| {
            if message.tool_calls.is_empty() {
                "end_turn"
            } else {
                "tool_use"
            }
            .to_owned()
        });
        let model = if self.model.is_empty() {
            requested_model.to_owned()
        } else {
            self.model
        };
        Ok(ModelResponse {
            message,
            stop_reason,
            usage: self.usage,
            model,
        })
    }
}
