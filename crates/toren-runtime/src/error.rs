//! The run service's errors, each with what to do about it.

use toren_protocol::RunId;

pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Why a request to the run service was refused or failed.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    #[error(
        "agent `{agent}` has a sandbox, but sandboxes are disabled (TOREN_SANDBOX=none); set \
         TOREN_SANDBOX=local to run it on this machine with bubblewrap"
    )]
    SandboxesDisabled { agent: String },
    #[error(
        "agent `{agent}` asks about hosts outside its network list (`network: {{allow: [...], \
         ask: true}}`), and the {backend} sandbox backend cannot hold a connection while a \
         person decides (E2B's own firewall decides there); list every host the agent needs \
         (`network: [...]`), or run it with TOREN_SANDBOX=local or TOREN_SANDBOX=docker"
    )]
    HostAskUnsupported { agent: String, backend: String },
    #[error(
        "agent `{agent}` injects {list} through its egress proxy (`sandbox.secrets`), but \
         this process's environment does not set {it}: set {it} in the environment of the \
         process that drives the agent's runs (its value is read there, never stored)",
        list = .names.join(", "),
        it = if .names.len() == 1 { "it" } else { "them" },
    )]
    SecretsUnset { agent: String, names: Vec<String> },
    #[error(
        "`{name}` is not a session name: use 1 to 64 letters, digits, `-`, `_` or `.`, not \
         starting with `.`"
    )]
    BadSessionName { name: String },
    #[error("`{name}` cannot be a session's name: {why}; choose another name")]
    ReservedSessionName { name: String, why: String },
    #[error("this process has no session store")]
    NoSessions,
    #[error("this process has no worker registry")]
    NoWorkers,
    #[error("cannot create the run's workspace: {0}")]
    Workspace(#[source] toren_sandbox::Error),
    #[error(
        "no run is `{given}`: give a run id, a prefix of one (`toren runs list` lists them) or \
         `last` for the newest"
    )]
    NoRunMatches { given: String },
    #[error(
        "`{given}` is the start of more than one run's id ({}, …): give more of the id",
        some.join(", ")
    )]
    AmbiguousRun { given: String, some: Vec<String> },
    #[error("run {run} has no call {call} waiting for a decision")]
    NoPendingApproval { run: RunId, call: String },
    #[error(
        "run {run} has no {limit} budget to raise; raise one of the limits its agent file sets \
         (`toren runs show {run}` shows them)"
    )]
    NoSuchLimit {
        run: RunId,
        limit: toren_protocol::BudgetLimit,
    },
    #[error("nothing to raise for run {run}: give an amount of tokens, dollars or wall time")]
    NothingToRaise { run: RunId },
    #[error(
        "run {run} is restoring the workspace to checkpoint {checkpoint} for a rewind, which \
         is not cancelled half done: it finishes when the run is driven (the process that \
         rewound it, the next `toren chat` of its session, `toren resume`, or a worker), and \
         then a session's rewind turn has ended; to undo the rewind, rewind again"
    )]
    RestoreUnfinished { run: RunId, checkpoint: String },
    #[error("session `{session}` cannot be rewound: {why}")]
    SessionRewind { session: String, why: String },
    #[error(transparent)]
    Store(#[from] toren_store::Error),
    #[error(transparent)]
    Worker(#[from] toren_worker::Error),
}

impl Error {
    /// Whether the request itself was wrong (a usage error), as opposed to a fault.
    pub fn is_refusal(&self) -> bool {
        match self {
            Self::SandboxesDisabled { .. }
            | Self::HostAskUnsupported { .. }
            | Self::SecretsUnset { .. }
            | Self::NoPendingApproval { .. }
            | Self::NoRunMatches { .. }
            | Self::AmbiguousRun { .. }
            | Self::NoSuchLimit { .. }
            | Self::NothingToRaise { .. }
            | Self::SessionRewind { .. }
            | Self::RestoreUnfinished { .. }
            | Self::BadSessionName { .. }
            | Self::ReservedSessionName { .. } => true,
            Self::Store(e) => matches!(
                e,
                toren_store::Error::RunNotFound(_)
                    | toren_store::Error::RunEnded { .. }
                    | toren_store::Error::AlreadyDecided { .. }
                    | toren_store::Error::NoPendingApproval { .. }
                    | toren_store::Error::LeftBehind { .. }
                    | toren_store::Error::CallEnded { .. }
                    | toren_store::Error::NotAwaitingBudget { .. }
                    | toren_store::Error::SessionExists(_)
                    | toren_store::Error::SessionNotFound(_)
                    | toren_store::Error::TurnInProgress { .. }
                    | toren_store::Error::BadCursor { .. }
            ),
            // A rewind refused (a step it cannot go back to, no checkpoint), or a run that a
            // live process drives.
            Self::Worker(toren_worker::Error::Rewind { .. }) => true,
            // A workspace that cannot start as what was asked (too large, a link out, a
            // repository the agent may not reach).
            Self::Worker(toren_worker::Error::Seed { .. }) => true,
            // A workspace that is not on this host, or has no checkpoint to compare with.
            Self::Worker(toren_worker::Error::Diff { .. }) => true,
            Self::Worker(toren_worker::Error::Store(toren_store::Error::Leased { .. })) => true,
            Self::Workspace(_) | Self::Worker(_) | Self::NoSessions | Self::NoWorkers => false,
        }
    }
}
