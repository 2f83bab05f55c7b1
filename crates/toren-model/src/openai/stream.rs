//! Assembles one assistant turn from a Chat Completions stream, tolerating what
//! OpenAI-compatible servers actually send: every field optional, `null` anywhere, unknown
//! fields, tool-call fragments keyed by `index` with Ollama's fallbacks (no index; the same
//! index reused with a new id; an index whose first fragment has no id), interleaved
//! fragments, whole calls in one delta, a usage chunk with `choices: []`, and an `error`
//! object in place of a chunk. The HTTP side lives in `super`.

use std::collections::HashMap;

use serde::Deserialize;
use serde_json::Value;
use toren_protocol::{AssistantMessage, ToolCall, Usage};

use crate::arguments::parse_arguments;
use crate::error::{Error, Result};
use crate::provider::{ModelResponse, TextSink};

/// One `chat.completion.chunk` (or an error object standing in for one).
#[derive(Debug, Default, Deserialize)]
pub(crate) struct Chunk {
    model: Option<String>,
    choices: Option<Vec<Choice>>,
    usage: Option<WireUsage>,
    error: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct Choice {
    index: Option<u64>,
    delta: Option<Delta>,
    finish_reason: Option<String>,
}

#[derive(Debug, Deserialize)]
struct Delta {
    content: Option<String>,
    refusal: Option<String>,
    tool_calls: Option<Vec<Fragment>>,
}

#[derive(Debug, Deserialize)]
struct Fragment {
    index: Option<u64>,
    id: Option<String>,
    function: Option<FunctionFragment>,
}

#[derive(Debug, Deserialize)]
struct FunctionFragment {
    name: Option<String>,
    /// A JSON text (fragment) per the spec; some servers send the decoded object.
    arguments: Option<Value>,
}

#[derive(Debug, Deserialize)]
struct WireUsage {
    prompt_tokens: Option<u64>,
    completion_tokens: Option<u64>,
    /// `cached_tokens`: the part of `prompt_tokens` read from the prompt cache.
    prompt_tokens_details: Option<PromptTokensDetails>,
}

#[derive(Debug, Deserialize)]
struct PromptTokensDetails {
    cached_tokens: Option<u64>,
}

#[derive(Debug, Default)]
struct Slot {
    id: Option<String>,
    name: String,
    arguments: String,
}

/// The state of one streamed response.
#[derive(Debug)]
pub(crate) struct Assembler {
    provider: &'static str,
    model: Option<String>,
    text: String,
    slots: Vec<Slot>,
    /// The slot each wire `index` currently feeds.
    by_index: HashMap<u64, usize>,
    finish_reason: Option<String>,
    usage: Usage,
}

fn non_empty(value: Option<String>) -> Option<String> {
    value.filter(|s| !s.is_empty())
}

impl Assembler {
    pub(crate) fn new(provider: &'static str) -> Self {
        Assembler {
            provider,
            model: None,
            text: String::new(),
            slots: Vec::new(),
            by_index: HashMap::new(),
            finish_reason: None,
            usage: Usage::default(),
        }
    }

    pub(crate) fn feed(&mut self, chunk: Chunk, on_text: TextSink<'_>) -> Result<()> {
        if let Some(error) = chunk.error {
            return Err(stream_error(self.provider, &error));
        }
        if self.model.is_none() {
            self.model = non_empty(chunk.model);
        }
        if let Some(usage) = chunk.usage {
            self.usage.input_tokens = usage.prompt_tokens.unwrap_or(self.usage.input_tokens);
            self.usage.output_tokens = usage.completion_tokens.unwrap_or(self.usage.output_tokens);
            if let Some(cached) = usage.prompt_tokens_details.and_then(|d| d.cached_tokens) {
                self.usage.cache_read_input_tokens = cached;
            }
        }
        // Only the first choice counts; Toren never asks for `n > 1`.
        for choice in chunk.choices.unwrap_or_default() {
            if choice.index.unwrap_or(0) != 0 {
                continue;
            }
            if let Some(reason) = non_empty(choice.finish_reason) {
                self.finish_reason = Some(reason);
            }
            let Some(delta) = choice.delta else { continue };
            for piece in [delta.content, delta.refusal].into_iter().flatten() {
                if !piece.is_empty() {
                    on_text(&piece);
                    self.text.push_str(&piece);
                }
            }
            for fragment in delta.tool_calls.unwrap_or_default() {
                self.add_fragment(fragment);
            }
        }
        Ok(())
    }

    fn add_fragment(&mut self, fragment: Fragment) {
        let id = non_empty(fragment.id);
        let slot = match fragment.index {
            Some(index) => match self.by_index.get(&index) {
                // Ollama reuses index 0 for every call of a turn: a new id is a new call.
                Some(&slot) if !self.is_other_call(slot, id.as_deref()) => slot,
                _ => {
                    let slot = self.new_slot();
                    self.by_index.insert(index, slot);
                    slot
                }
            },
            // Old Ollama sends no index: a new id starts a call, no id continues the last.
            None => match self.slots.len().checked_sub(1) {
                Some(last) if !self.is_other_call(last, id.as_deref()) => last,
                _ => self.new_slot(),
            },
        };
        let slot = &mut self.slots[slot];
        if slot.id.is_none() {
            slot.id = id;
        }
        if let Some(function) = fragment.function {
            if let Some(name) = non_empty(function.name)
                && slot.name.is_empty()
            {
                slot.name = name;
            }
            match function.arguments {
                Some(Value::String(piece)) => slot.arguments.push_str(&piece),
                Some(Value::Null) | None => {}
                Some(object) => slot.arguments.push_str(&object.to_string()),
            }
        }
    }

    /// Whether a fragment carrying `id` belongs to a different call than `slot`.
    fn is_other_call(&self, slot: usize, id: Option<&str>) -> bool {
        match (self.slots[slot].id.as_deref(), id) {
            (Some(current), Some(new)) => current != new,
            _ => false,
        }
    }

    fn new_slot(&mut self) -> usize {
        self.slots.push(Slot::default());
        self.slots.len() - 1
    }

    pub(crate) fn has_finish_reason(&self) -> bool {
        self.finish_reason.is_some()
    }

    /// Builds the turn. Stop reasons use the Anthropic vocabulary (`end_turn`, `tool_use`,
    /// `max_tokens`); a turn with tool calls is a tool turn whatever the server said.
    pub(crate) fn finish(self, requested_model: &str) -> ModelResponse {
        let tool_calls: Vec<ToolCall> = self
            .slots
            .into_iter()
            .map(|slot| ToolCall {
                // No id at all (Ollama): the run assigns one unique within the run.
                id: slot.id.unwrap_or_default(),
                name: slot.name,
                arguments: parse_arguments(&slot.arguments),
                wire_id: None,
            })
            .collect();
        let stop_reason = match self.finish_reason.as_deref() {
            _ if !tool_calls.is_empty() => "tool_use".to_owned(),
            Some("stop") | None => "end_turn".to_owned(),
            Some("length") => "max_tokens".to_owned(),
            Some(other) => other.to_owned(),
        };
        ModelResponse {
            message: AssistantMessage {
                text: self.text,
                tool_calls,
            },
            stop_reason,
            usage: self.usage,
            model: self.model.unwrap_or_else(|| requested_model.to_owned()),
        }
    }
}

/// `{"error": {"message", "type", "code"}}` or `{"error": "text"}`.
fn stream_error(provider: &'static str, error: &Value) -> Error {
    let text = |key: &str| error.get(key).and_then(Value::as_str).map(str::to_owned);
    let message = error
        .as_str()
        .map(str::to_owned)
        .or_else(|| text("message"))
        .unwrap_or_else(|| error.to_string());
    let kind = text("type")
        .or_else(|| text("code"))
        .unwrap_or_else(|| "error".to_owned());
    Error::Stream {
        provider,
        kind,
        message,
    }
}
