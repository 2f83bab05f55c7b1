//! Model providers.
//!
//! [`ModelProvider`] turns a provider-neutral [`ModelRequest`] into one assistant turn,
//! streaming text through a callback as it arrives. Implementations: `anthropic` (Messages
//! API), `openai` (Chat Completions, also used for `ollama`), and `scripted` (a YAML list
//! of turns, for tests and offline demos). [`build_provider`] picks one from an agent's
//! `model` string; it never reads the environment — the caller passes [`ProviderSettings`].

use async_trait::async_trait;
use toren_protocol::{AssistantMessage, Message, ToolSpec, Usage};

/// What the agent loop asks a model.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelRequest {
    pub system: String,
    pub messages: Vec<Message>,
    pub tools: Vec<ToolSpec>,
    pub max_tokens: u32,
}

/// One complete assistant turn.
#[derive(Clone, Debug, PartialEq)]
pub struct ModelResponse {
    pub message: AssistantMessage,
    pub stop_reason: String,
    pub usage: Usage,
    /// The model id as the provider reported it.
    pub model: String,
}

/// Receives streamed text as it arrives. Streaming is for display only; the final
/// [`ModelResponse`] is what counts.
pub type TextSink<'a> = &'a (dyn Fn(&str) + Send + Sync);

#[async_trait]
pub trait ModelProvider: Send + Sync {
    /// One model call. Retries transient failures internally.
    async fn respond(&self, request: &ModelRequest, on_text: TextSink<'_>)
    -> Result<ModelResponse, Error>;
}
