//! The provider-neutral conversation: what the agent loop sends to a model and what it
//! gets back. Providers translate these to and from their wire formats.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool call the model asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The call's id, unique within the run: the id the model gave it (`toolu_…`,
    /// `call_…`) unless that was missing or already used, in which case Toren assigned one.
    /// Every event about the call and every approval names it by this id.
    pub id: String,
    pub name: String,
    /// The arguments as the model sent them. Usually an object; a provider that received
    /// unparseable JSON passes it on as a string so the tool can say what is wrong.
    pub arguments: Value,
    /// The id the provider gave the call, when Toren had to assign another `id` because
    /// the provider's repeated an earlier turn's. Sent back to the provider in its place.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub wire_id: Option<String>,
}

impl ToolCall {
    /// A call whose id is the provider's own.
    pub fn new(id: impl Into<String>, name: impl Into<String>, arguments: Value) -> Self {
        Self {
            id: id.into(),
            name: name.into(),
            arguments,
            wire_id: None,
        }
    }

    /// The id to use on the provider's wire.
    pub fn wire_id(&self) -> &str {
        self.wire_id.as_deref().unwrap_or(&self.id)
    }
}

/// The provider's id for each call id of the conversation that has one of its own
/// (see [`ToolCall::wire_id`]), for providers that must answer tool results by it.
pub fn wire_ids(conversation: &[Message]) -> std::collections::HashMap<&str, &str> {
    conversation
        .iter()
        .filter_map(|m| match m {
            Message::Assistant(a) => Some(&a.tool_calls),
            _ => None,
        })
        .flatten()
        .filter_map(|c| c.wire_id.as_deref().map(|w| (c.id.as_str(), w)))
        .collect()
}

/// What the model said in one turn.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct AssistantMessage {
    #[serde(default)]
    pub text: String,
    #[serde(default)]
    pub tool_calls: Vec<ToolCall>,
}

/// The answer to one tool call, as the model will see it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolResult {
    pub call_id: String,
    pub content: String,
    #[serde(default)]
    pub is_error: bool,
}

/// One entry of the conversation sent to a model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "role", rename_all = "snake_case")]
pub enum Message {
    User {
        text: String,
    },
    Assistant(AssistantMessage),
    /// The results of every tool call of the preceding assistant message, in call order.
    ToolResults {
        results: Vec<ToolResult>,
    },
}

/// A tool offered to the model.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSpec {
    pub name: String,
    pub description: String,
    /// A JSON Schema object describing the arguments.
    pub input_schema: Value,
}

/// Token counts reported by the provider. Sums add field by field (`+`, `+=`, `.sum()`), so
/// a run's usage is the sum of its answers' and a session's the sum of its turns'.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    /// Every input token, cached or not.
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
    /// Of `input_tokens`, those read from the provider's prompt cache (Anthropic
    /// `cache_read_input_tokens`, OpenAI `cached_tokens`); 0 when not reported.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_read_input_tokens: u64,
    /// Of `input_tokens`, those written to the provider's prompt cache (Anthropic
    /// `cache_creation_input_tokens`); 0 when not reported.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cache_creation_input_tokens: u64,
}

fn is_zero(value: &u64) -> bool {
    *value == 0
}

impl Usage {
    /// Counts without a cache breakdown.
    pub const fn new(input_tokens: u64, output_tokens: u64) -> Self {
        Self {
            input_tokens,
            output_tokens,
            cache_read_input_tokens: 0,
            cache_creation_input_tokens: 0,
        }
    }
}

impl std::ops::AddAssign for Usage {
    fn add_assign(&mut self, other: Self) {
        self.input_tokens = self.input_tokens.saturating_add(other.input_tokens);
        self.output_tokens = self.output_tokens.saturating_add(other.output_tokens);
        self.cache_read_input_tokens = self
            .cache_read_input_tokens
            .saturating_add(other.cache_read_input_tokens);
        self.cache_creation_input_tokens = self
            .cache_creation_input_tokens
            .saturating_add(other.cache_creation_input_tokens);
    }
}

impl std::ops::Add for Usage {
    type Output = Self;

    fn add(mut self, other: Self) -> Self {
        self += other;
        self
    }
}

impl std::iter::Sum for Usage {
    fn sum<I: Iterator<Item = Self>>(iter: I) -> Self {
        iter.fold(Self::default(), |sum, usage| sum + usage)
    }
}

impl<'a> std::iter::Sum<&'a Usage> for Usage {
    fn sum<I: Iterator<Item = &'a Self>>(iter: I) -> Self {
        iter.copied().sum()
    }
}
