//! The crate's error type: host faults only. Whatever the model can fix (bad arguments, a
//! path outside the workspace, a failing command) is not an error here but a
//! [`ToolOutcome`](crate::ToolOutcome) with `is_error: true`.

/// A failure the model cannot fix; the run should fail and an operator look at it.
#[derive(Debug, thiserror::Error)]
pub enum ToolError {
    #[error(transparent)]
    Sandbox(#[from] toren_sandbox::Error),

    #[error("the `{tool}` tool stopped unexpectedly: {source}")]
    Crashed {
        tool: &'static str,
        #[source]
        source: tokio::task::JoinError,
    },
}

/// `Result` with this crate's [`ToolError`].
pub type Result<T, E = ToolError> = std::result::Result<T, E>;
