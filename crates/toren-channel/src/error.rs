//! The crate's error: why a channel could not be found for a run or could not deliver a
//! file. The tool turns a failed delivery into a tool error for the model (which can then
//! tell the person where the file is in the workspace); a channel that cannot be found
//! stops driving the run, which stays resumable.

use std::io;
use std::path::PathBuf;

/// A channel could not be found or could not deliver.
#[derive(Debug, thiserror::Error)]
pub enum ChannelError {
    /// The run is bound to a kind of channel this process does not serve.
    #[error("this process has no `{kind}` channel")]
    Unavailable { kind: String },

    /// The binding's address means nothing to its channel.
    #[error("`{address}` is not a valid address on the {kind} channel: {why}")]
    BadAddress {
        kind: String,
        address: String,
        why: &'static str,
    },

    /// A file or directory of the channel's own could not be written.
    #[error("could not {what} `{}`: {source}", path.display())]
    Io {
        what: &'static str,
        path: PathBuf,
        #[source]
        source: io::Error,
    },

    /// The channel's service would not take the file (too large, a bad format, …).
    #[error("the {channel} channel refused the file: {why}")]
    Refused { channel: String, why: String },

    /// The channel's service could not be reached; a later try may succeed.
    #[error("the {channel} channel is unreachable: {why}")]
    Unreachable { channel: String, why: String },
}

impl ChannelError {
    /// What to do about it, for the person (or, in a tool result, the model).
    pub fn hint(&self) -> &'static str {
        match self {
            Self::Unavailable { .. } => {
                "drive the run where its channel is set up (a chat session's turns from \
                 `toren chat`)"
            }
            Self::BadAddress { .. } => {
                "the binding is made by the front door that created the run; create the \
                 session again with a plain name"
            }
            Self::Io { .. } => {
                "check that TOREN_DOWNLOADS names a directory you can write to and that its \
                 disk has room"
            }
            Self::Refused { .. } => "send a smaller file, or the file in another format",
            Self::Unreachable { .. } => "try again later",
        }
    }

    /// Whether the same delivery may succeed if tried again later.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Unreachable { .. } | Self::Io { .. } => true,
            Self::Unavailable { .. } | Self::BadAddress { .. } | Self::Refused { .. } => false,
        }
    }

    pub(crate) fn io(what: &'static str, path: impl Into<PathBuf>, source: io::Error) -> Self {
        Self::Io {
            what,
            path: path.into(),
            source,
        }
    }
}
