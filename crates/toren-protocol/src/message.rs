//! The provider-neutral conversation: what the agent loop sends to a model and what it
//! gets back. Providers translate these to and from their wire formats.

use serde::{Deserialize, Serialize};
use serde_json::Value;

/// One tool call the model asked for.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolCall {
    /// The id the model gave the call (`toolu_…`, `call_…`).
    pub id: String,
    pub name: String,
    /// The arguments as the model sent them. Usually an object; a provider that received
    /// unparseable JSON passes it on as a string so the tool can say what is wrong.
    pub arguments: Value,
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

/// Token counts reported by the provider.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Usage {
    #[serde(default)]
    pub input_tokens: u64,
    #[serde(default)]
    pub output_tokens: u64,
}
