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
        "could not renew the lease of run {run} ({error}), and it would have expired before \
         the next try; this process stopped the run's work (its running command was killed) \
         so that no process taking the run over overlaps with it. The run is kept as it is: \
         resume it with `toren resume {run}` once the database answers again"
    )]
    LeaseExpiring { run: String, error: String },
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
        "{cause}; run {run} stopped and is kept as it is: resume it with `toren resume {run}` \
         when the service is back"
    )]
    SandboxUnavailable {
        run: String,
        /// Said in the message, not chained: it is the whole reason.
        cause: toren_sandbox::Error,
    },
    #[error(
        "run {run} needs the `{backend}` sandbox backend, which this process does not serve; run it where that backend is set up (TOREN_SANDBOX={backend})"
    )]
    NoSandbox { run: String, backend: String },
    #[error("run {run} is a session turn whose conversation cannot be read: {why}")]
    NoHistory { run: String, why: String },
    #[error("run {run} is bound to a channel this process cannot reach ({source}); {}", source.hint())]
    NoChannel {
        run: String,
        #[source]
        source: toren_channel::ChannelError,
    },
    #[error("run {run} cannot be driven here: {source}")]
    NoModel {
        run: String,
        #[source]
        source: toren_model::Error,
    },
    #[error("run {run} cannot be rewound: {why}")]
    Rewind { run: String, why: String },
    /// A new run's workspace could not be filled with what it was to start from (nothing
    /// was created).
    #[error("the run was not created: {why}")]
    Seed { why: String },
    #[error("run {run}'s workspace cannot be compared: {why}")]
    Diff { run: String, why: String },
    /// What may still run in the run's sandbox could not be ended before a restore: the
    /// workspace is left alone (a restore already recorded stays due).
    #[error(
        "run {run} was not rewound: what may still run in its `{backend}` sandbox cannot be stopped before the restore ({why}); fix that and rewind again"
    )]
    SandboxUnreachable {
        run: String,
        backend: String,
        why: String,
    },
    #[error(
        "run {run} was rewound, and its workspace could not be restored ({source}); it was left as it is: resume it again once the checkpoint store is readable"
    )]
    Restore {
        run: String,
        #[source]
        source: toren_checkpoint::Error,
    },
    #[error("run {run} cannot go on: {source}; it was left as it is")]
    WorkspaceMissing {
        run: String,
        #[source]
        source: toren_sandbox::Error,
    },
}
