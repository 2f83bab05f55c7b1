//! The crate's error. No variant carries a URL: every Bot API URL holds the bot token, so
//! transport errors are kept without theirs (`reqwest::Error::without_url`).

/// Why a Bot API call failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Telegram could not be reached (connection refused, reset, timed out).
    #[error("cannot reach the Telegram Bot API: {0}")]
    Unreachable(#[source] reqwest::Error),
    /// Telegram answered with an error.
    #[error("the Telegram Bot API refused {method}: {description} ({code})")]
    Api {
        method: &'static str,
        code: u16,
        description: String,
    },
    /// Telegram kept answering 429 beyond what the client waits for.
    #[error("the Telegram Bot API rate-limited {method} (retry after {retry_after} s)")]
    RateLimited {
        method: &'static str,
        retry_after: u64,
    },
    /// An answer that is not what the Bot API documents.
    #[error("the Telegram Bot API answered {method} with something unexpected: {why}")]
    Unexpected { method: &'static str, why: String },
    #[error(transparent)]
    Store(#[from] toren_store::Error),
    #[error(transparent)]
    Runtime(#[from] toren_runtime::Error),
}

impl Error {
    /// Whether a later try may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Unreachable(_) | Self::RateLimited { .. } => true,
            Self::Api { code, .. } => *code >= 500,
            Self::Store(e) => e.is_retryable(),
            Self::Unexpected { .. } | Self::Runtime(_) => false,
        }
    }

    /// A bad token (401) or a bot removed (404 on every method).
    pub fn is_unauthorized(&self) -> bool {
        matches!(
            self,
            Self::Api {
                code: 401 | 404,
                ..
            }
        )
    }

    pub(crate) fn transport(e: reqwest::Error) -> Self {
        Self::Unreachable(e.without_url())
    }
}

pub type Result<T, E = Error> = std::result::Result<T, E>;
