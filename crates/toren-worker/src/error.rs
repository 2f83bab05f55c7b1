//! Worker errors: faults that stop driving a run. Problems the model can fix never get
//! here; they go back to the model as tool results.

/// A fault that stopped the worker.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(transparent)]
    Store(#[from] toren_store::Error),
    #[error(transparent)]
    CorruptLog(#[from] toren_agent::Error),
    #[error(
        "another process took over run {run} while this one drove it; this process stopped without writing anything more"
    )]
    LeaseLost { run: String },
    #[error(
        "the model is unavailable ({error}); run {run} stopped and is kept as it is: resume it \
         with `toren resume {run}` when the provider is back"
    )]
    ModelUnavailable {
        run: String,
        #[source]
        error: toren_model::Error,
    },
    #[error(
        "run {run} needs a sandbox but this process has no sandbox backend; set TOREN_SANDBOX=local"
    )]
    NoSandbox { run: String },
}
