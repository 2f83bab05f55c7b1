//! Model providers.
//!
//! [`ModelProvider`] turns a provider-neutral [`ModelRequest`] into one assistant turn,
//! streaming text through a callback as it arrives. Implementations: [`anthropic`] (Messages
//! API), [`openai`] (Chat Completions, also used for `ollama`), and [`scripted`] (a YAML list
//! of turns, for tests and offline demos). [`build_provider`] picks one from an agent's
//! `model` string; it never reads the environment — the caller passes [`ProviderSettings`].
//! The HTTP clients retry transient failures themselves ([`RetryPolicy`]); an [`Error`] that
//! still comes out says with [`Error::is_retryable`] whether a later attempt may succeed.

pub mod anthropic;
mod arguments;
mod build;
mod error;
mod http;
pub mod openai;
mod provider;
mod refusal;
mod retry;
pub mod scripted;

pub use build::{ProviderSettings, build_provider};
pub use error::{Error, PROVIDERS, Result};
pub use provider::{ModelProvider, ModelRequest, ModelResponse, TextSink};
pub use retry::RetryPolicy;
