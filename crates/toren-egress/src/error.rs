//! The crate's one error type: failures of the proxy itself (binding, accepting), never a
//! refused request, which is a [`crate::Decision`] and an HTTP answer to the client.

/// What can fail when running the proxy.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("the egress proxy could not accept a connection: {0}")]
    Accept(#[source] std::io::Error),
}

impl Error {
    /// Whether trying again may help.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Accept(_) => true,
        }
    }
}
