//! The helper's one error type: what stops it from serving at all. A command that cannot
//! start is not an error here; it is answered with a `failed` response.

use std::io;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error("no shell found: looked for /bin/bash and /bin/sh; the image needs at least /bin/sh")]
    NoShell,

    #[error("cannot {what}: {source}")]
    Setup {
        what: &'static str,
        #[source]
        source: io::Error,
    },

    #[error("cannot {what}: {source}")]
    Io {
        what: &'static str,
        #[source]
        source: io::Error,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;
