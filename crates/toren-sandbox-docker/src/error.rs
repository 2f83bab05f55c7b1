//! The crate's one error type. Every variant is a host fault an operator fixes (start the
//! daemon, build the helper or the image); each message names the fix. Converted into
//! `toren_sandbox::Error` at the `Sandbox` seam, where it fails the run.

use std::io;

/// Everything that can go wrong with the docker backend.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "cannot reach the Docker daemon at `{host}`: {source}\nhint: start it (`sudo systemctl \
         start docker`), or set DOCKER_HOST to the address it listens on"
    )]
    DaemonUnreachable {
        host: String,
        #[source]
        source: bollard::errors::Error,
    },

    #[error(
        "the sandbox helper `{path}` does not exist; build it with `scripts/build-exec-helper`, \
         which prints the path to use"
    )]
    HelperMissing { path: String },

    #[error(
        "the sandbox helper `{path}` is not a statically linked executable, so it cannot run in \
         every image; build it with `scripts/build-exec-helper`"
    )]
    HelperNotStatic { path: String },

    #[error(
        "the sandbox image `{image}` is not in the Docker daemon; build it with \
         `scripts/build-sandbox-image` (or, with a registry: `docker build -t {image} -f \
         docker/sandbox.Dockerfile docker`)"
    )]
    DefaultImageMissing { image: String },

    #[error(
        "the sandbox image `{image}` (the agent's `sandbox.image`) is not in the Docker daemon; \
         pull it with `docker pull {image}`, or build it"
    )]
    ImageMissing { image: String },

    #[error(
        "`{instance}` cannot name a Toren instance in container labels: use 1 to 64 letters, \
         digits, `_`, `.` or `-`"
    )]
    InvalidInstance { instance: String },

    /// A call to the Docker daemon failed.
    #[error("cannot {what}: {source}")]
    Docker {
        what: String,
        #[source]
        source: bollard::errors::Error,
    },

    /// The helper in a container misbehaved (answered nonsense, or refused a request).
    #[error("the sandbox helper in container `{container}` {why}")]
    Helper { container: String, why: String },

    /// The workspace (creating or opening it), or a variable that cannot be passed.
    #[error(transparent)]
    Workspace(#[from] toren_sandbox::Error),

    #[error("{context}: {source}")]
    Io {
        context: String,
        #[source]
        source: io::Error,
    },
}

/// `Result` with this crate's [`Error`].
pub type Result<T, E = Error> = std::result::Result<T, E>;

impl Error {
    pub(crate) fn docker(what: impl Into<String>, source: bollard::errors::Error) -> Self {
        Self::Docker {
            what: what.into(),
            source,
        }
    }
}

/// At the `Sandbox` seam: workspace errors keep their kind (some are the model's to fix);
/// everything else is a host fault, carried whole as the source of an I/O error.
impl From<Error> for toren_sandbox::Error {
    fn from(err: Error) -> Self {
        match err {
            Error::Workspace(inner) => inner,
            other => Self::Io {
                context: "docker sandbox".to_owned(),
                source: io::Error::other(other),
            },
        }
    }
}

/// Whether a daemon error means "no such container / image".
pub(crate) fn is_not_found(err: &bollard::errors::Error) -> bool {
    matches!(
        err,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 404,
            ..
        }
    )
}

/// Whether a daemon error means "that name is taken" (or a removal is in progress).
pub(crate) fn is_conflict(err: &bollard::errors::Error) -> bool {
    matches!(
        err,
        bollard::errors::Error::DockerResponseServerError {
            status_code: 409,
            ..
        }
    )
}
