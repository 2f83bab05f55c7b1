//! The crate's one error type. Every message says what went wrong and what to do about it;
//! [`Error::is_retryable`] tells the retry loop (and the worker) whether trying the same
//! call again can help.

use std::path::PathBuf;
use std::time::Duration;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The providers `build_provider` knows, as written before the `/` of a model string.
pub const PROVIDERS: &str = "anthropic, openai, ollama, scripted";

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The provider needs an API key and the settings carry none.
    #[error(
        "model `{model}` needs an API key: set the environment variable {var} \
         (for example `export {var}=...`) and try again"
    )]
    MissingKey { model: String, var: &'static str },

    /// The model string does not have the `provider/model-id` shape.
    #[error(
        "invalid model `{model}`: write it as `provider/model-id`, for example \
         `anthropic/claude-sonnet-4-5` or `ollama/llama3.2` (providers: {PROVIDERS})"
    )]
    InvalidModel { model: String },

    #[error("unknown model provider `{provider}` in `{model}`; valid providers are {PROVIDERS}")]
    UnknownProvider { model: String, provider: String },

    /// The scripted provider's file could not be read or is not a valid script.
    #[error("scripted model file {}: {message}", path.display())]
    Script { path: PathBuf, message: String },

    /// The HTTP client could not be built (TLS setup).
    #[error("cannot set up the HTTP client: {detail}")]
    Client { detail: String },

    /// The API answered with an HTTP error status.
    #[error("{provider} API returned HTTP {status}: {message}")]
    Api {
        provider: &'static str,
        status: u16,
        message: String,
        /// How long the server asked us to wait (`retry-after`, `retry-after-ms`).
        retry_after: Option<Duration>,
    },

    /// The API reported an error inside a stream that had started with HTTP 200.
    #[error("{provider} stream failed with {kind}: {message}")]
    Stream {
        provider: &'static str,
        kind: String,
        message: String,
    },

    /// The connection failed or broke: refused, reset, timed out.
    #[error("cannot talk to the {provider} API: {detail}; check the network and the base URL")]
    Transport {
        provider: &'static str,
        detail: String,
    },

    /// The stream ended before the response was complete.
    #[error("the {provider} stream ended before the response was complete")]
    Truncated { provider: &'static str },

    /// The server sent something that is not the documented wire format.
    #[error("{provider} sent a response Toren cannot read: {detail}")]
    Protocol {
        provider: &'static str,
        detail: String,
    },
}

impl Error {
    /// Whether repeating the same request may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Error::Api { status, .. } => matches!(status, 408 | 429 | 500 | 502 | 503 | 504 | 529),
            Error::Stream { kind, .. } => matches!(
                kind.as_str(),
                "overloaded_error" | "api_error" | "rate_limit_error" | "server_error"
            ),
            Error::Transport { .. } | Error::Truncated { .. } => true,
            Error::MissingKey { .. }
            | Error::InvalidModel { .. }
            | Error::UnknownProvider { .. }
            | Error::Script { .. }
            | Error::Client { .. }
            | Error::Protocol { .. } => false,
        }
    }

    /// A next step for the person reading the error, when the message alone is not enough.
    pub fn hint(&self) -> Option<&'static str> {
        match self {
            Error::Api {
                status: 401 | 403, ..
            } => Some("the API key was refused; check ANTHROPIC_API_KEY / OPENAI_API_KEY"),
            Error::Api { status: 404, .. } => {
                Some("check the model id after the `/` and the provider's base URL")
            }
            Error::Api { .. }
            | Error::Stream { .. }
            | Error::Transport { .. }
            | Error::Truncated { .. }
            | Error::Protocol { .. }
            | Error::MissingKey { .. }
            | Error::InvalidModel { .. }
            | Error::UnknownProvider { .. }
            | Error::Script { .. }
            | Error::Client { .. } => None,
        }
    }

    /// The wait the server asked for, if any.
    pub(crate) fn retry_after(&self) -> Option<Duration> {
        match self {
            Error::Api { retry_after, .. } => *retry_after,
            _ => None,
        }
    }
}
