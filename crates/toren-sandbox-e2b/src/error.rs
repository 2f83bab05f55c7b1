//! The crate's one error type. Each variant names the fix an operator applies; the
//! classifiers say which are worth retrying (`is_retryable`) and which mean the sandbox is
//! gone (`is_gone`: a new one is made and the run told its files were lost), and which the
//! model can fix (`is_model_fixable`: a path or a size, reported back as the tool's result).
//! Converted into `toren_sandbox::Error` at the `Sandbox` seam.

use std::io;

/// Everything that can go wrong talking to E2B.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "E2B_API_KEY is not set; the e2b sandbox backend needs it: get a key at \
         https://e2b.dev/dashboard and set E2B_API_KEY, or pick another backend with \
         TOREN_SANDBOX=docker|local"
    )]
    MissingKey,

    #[error(
        "E2B_API_KEY does not look like an E2B key (`e2b_` followed by hex digits); copy it \
         again from https://e2b.dev/dashboard"
    )]
    MalformedKey,

    #[error(
        "E2B refused the API key (401 from {url}): {message}\nhint: check E2B_API_KEY (and \
         E2B_API_URL / E2B_DOMAIN if you run a self-hosted E2B)"
    )]
    Unauthorized { url: String, message: String },

    #[error(
        "E2B has no template `{template}` (the agent's `sandbox.image`): {message}\nhint: \
         build it with `e2b template build`, or leave `sandbox.image` out for the default \
         `base` template"
    )]
    UnknownTemplate { template: String, message: String },

    #[error(
        "E2B refused to start another sandbox (429): {message}\nhint: the team's concurrency \
         or rate limit is reached; Toren retried with backoff. Wait for runs to finish, kill \
         stray sandboxes (`toren sandbox reap`), or raise the plan's limit"
    )]
    RateLimited { message: String },

    #[error(
        "E2B has no capacity for a sandbox right now ({status}): {message}\nhint: Toren \
         retried with backoff; try again later"
    )]
    Capacity { status: u16, message: String },

    #[error(
        "cannot reach E2B at {url}: {detail}\nhint: check the network, and E2B_API_URL, \
         E2B_DOMAIN or E2B_SANDBOX_URL if set"
    )]
    Network { url: String, detail: String },

    /// The sandbox is gone (killed, expired): 404 on the control plane, 502 from envd.
    #[error("the E2B sandbox `{id}` is gone ({why})")]
    Gone { id: String, why: String },

    /// Any other answer E2B gave.
    #[error("E2B answered {status} to {what}: {message}")]
    Api {
        what: String,
        status: u16,
        message: String,
    },

    /// envd's Connect protocol was broken (a frame too large, JSON that does not decode).
    #[error("envd in sandbox `{id}` {why}")]
    Protocol { id: String, why: String },

    /// The agent's host list cannot be kept by E2B's firewall as it stands (`network`).
    #[error("E2B cannot keep this agent's network policy: {why}")]
    NetworkPolicy { why: String },

    /// The workspace, a variable that cannot be passed, or a path the file tools refuse.
    #[error(transparent)]
    Sandbox(#[from] toren_sandbox::Error),
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    /// Whether trying again later may succeed.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::RateLimited { .. } | Self::Capacity { .. } | Self::Network { .. } => true,
            Self::Api { status, .. } => matches!(status, 500 | 502 | 503 | 504 | 409),
            Self::MissingKey
            | Self::MalformedKey
            | Self::Unauthorized { .. }
            | Self::UnknownTemplate { .. }
            | Self::Gone { .. }
            | Self::Protocol { .. }
            | Self::NetworkPolicy { .. }
            | Self::Sandbox(_) => false,
        }
    }

    /// Whether the model can fix this by calling the tool differently (another path, less
    /// content): only the workspace errors a file tool reports back to the model. Every
    /// fault of E2B itself (the key, the service, the protocol) is the host's, and fails
    /// the run once retries are spent.
    pub fn is_model_fixable(&self) -> bool {
        match self {
            Self::Sandbox(inner) => inner.is_model_fixable(),
            Self::MissingKey
            | Self::MalformedKey
            | Self::Unauthorized { .. }
            | Self::UnknownTemplate { .. }
            | Self::RateLimited { .. }
            | Self::Capacity { .. }
            | Self::Network { .. }
            | Self::Gone { .. }
            | Self::Api { .. }
            | Self::Protocol { .. }
            | Self::NetworkPolicy { .. } => false,
        }
    }

    /// Whether the sandbox is gone for good.
    pub fn is_gone(&self) -> bool {
        matches!(self, Self::Gone { .. })
    }
}

/// At the `Sandbox` seam: workspace errors keep their kind (some are the model's to fix);
/// what stays retryable once the backoff is spent (429, capacity, the network, 5xx) is the
/// service being unavailable, which the run waits out; everything else is a host fault.
impl From<Error> for toren_sandbox::Error {
    fn from(err: Error) -> Self {
        match err {
            Error::Sandbox(inner) => inner,
            other if other.is_retryable() => Self::Unavailable {
                backend: "e2b",
                why: other.to_string(),
            },
            other => Self::Io {
                context: "e2b sandbox".to_owned(),
                source: io::Error::other(other),
            },
        }
    }
}

/// Checks a key's shape as the SDKs do (`^e2b_[0-9a-f]+$`).
pub fn check_key(key: &str) -> Result<()> {
    if key.is_empty() {
        return Err(Error::MissingKey);
    }
    let hex = key.strip_prefix("e2b_").unwrap_or_default();
    if hex.is_empty() || !hex.bytes().all(|b| b.is_ascii_hexdigit()) {
        return Err(Error::MalformedKey);
    }
    Ok(())
}
