//! The contract every model provider implements: a provider-neutral [`ModelRequest`] in,
//! one complete assistant turn ([`ModelResponse`]) out, with text streamed to a
//! [`TextSink`] along the way.

use async_trait::async_trait;
use toren_protocol::{AssistantMessage, Message, ToolSpec, Usage};

use crate::error::Error;

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
    /// Why the model stopped, in the Anthropic vocabulary whatever the provider:
    /// `end_turn`, `tool_use`, `max_tokens`, or a provider's own word for anything else.
    /// A response with tool calls always says `tool_use`.
    pub stop_reason: String,
    pub usage: Usage,
    /// The model id as the provider reported it.
    pub model: String,
}

/// Receives streamed text as it arrives. Streaming is for display only; the final
/// [`ModelResponse`] is what counts. When a call is retried after part of its text was
/// streamed, the retry streams its text again from the start.
pub type TextSink<'a> = &'a (dyn Fn(&str) + Send + Sync);

#[async_trait]
pub trait ModelProvider: Send + Sync {
    /// One model call. Retries transient failures internally.
    async fn respond(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelResponse, Error>;
}
