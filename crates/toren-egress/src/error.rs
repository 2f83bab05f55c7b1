//! The crate's one error type: failures of the proxy itself (binding, accepting, making
//! its TLS material), never a refused request, which is a [`crate::Decision`] and an HTTP
//! answer to the client.

use std::fmt::Display;

/// What can fail when running the proxy.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the egress proxy could not accept a connection: {0}")]
    Accept(#[source] std::io::Error),
    /// Making the run's CA or a TLS configuration failed.
    #[error("the egress proxy's TLS setup failed: {0}")]
    Tls(String),
    /// A secret the policy injects was not given to the proxy (its variable is unset).
    #[error(
        "the secret `{0}` has no value: set it in the environment of the process driving the run"
    )]
    MissingSecret(String),
    /// A secret's value cannot be sent in its header (control characters, say). The value
    /// itself is never in the message.
    #[error(
        "the secret `{0}` cannot be sent as a header value (it holds a control character or non-ASCII text)"
    )]
    BadSecret(String),
}

impl Error {
    pub(crate) fn tls(error: impl Display) -> Self {
        Self::Tls(error.to_string())
    }

    /// Whether trying again may help.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Accept(_) => true,
            Self::Tls(_) | Self::MissingSecret(_) | Self::BadSecret(_) => false,
        }
    }
}
