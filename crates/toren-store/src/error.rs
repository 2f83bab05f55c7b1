//! The store's one error type. Every variant is something a caller matches on (the CLI maps
//! them to exit codes, the worker re-reads on [`Error::Conflict`]) and every message tells a
//! person what happened and what to do next.

use std::path::PathBuf;

use toren_protocol::{RunId, RunStatus};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `create_run` with an id that is already taken.
    #[error("run {0} already exists; pick a new run id")]
    RunExists(RunId),

    #[error("no run {0} in this store; `toren runs list` shows the known runs")]
    RunNotFound(RunId),

    /// The log moved on since the caller last read it; nothing was written.
    #[error(
        "run {run_id} moved on: the append expected event #{expected} to be the last, \
         but the last is #{actual}; nothing was written, re-read the run and decide again"
    )]
    Conflict {
        run_id: RunId,
        expected: u64,
        actual: u64,
    },

    /// The run is completed, failed or cancelled (or the batch ended it and went on).
    #[error("run {run_id} has ended ({status}) and takes no more events")]
    RunEnded { run_id: RunId, status: RunStatus },

    #[error(
        "run {run_id} has no call {call_id} waiting for approval; \
         run `toren events {run_id}` to see pending calls"
    )]
    NoPendingApproval { run_id: RunId, call_id: String },

    #[error(
        "call {call_id} of run {run_id} was already {}; a decision cannot be changed",
        if *approved { "approved" } else { "denied" }
    )]
    AlreadyDecided {
        run_id: RunId,
        call_id: String,
        approved: bool,
    },

    /// A stored event does not decode with this build's event format.
    #[error(
        "event #{seq} of run {run_id} cannot be read: {reason}; the database was written by \
         a newer Toren or was damaged, so upgrade Toren or restore the database from a backup"
    )]
    CorruptEvent {
        run_id: String,
        seq: u64,
        reason: String,
    },

    /// A run's row holds a value this build cannot interpret.
    #[error(
        "the record of run {run_id} cannot be read: {reason}; the database was written by a \
         newer Toren or was damaged, so upgrade Toren or restore the database from a backup"
    )]
    CorruptRun { run_id: String, reason: String },

    #[error("cannot encode event #{seq} of run {run_id} as JSON: {source}")]
    Encode {
        run_id: RunId,
        seq: u64,
        #[source]
        source: serde_json::Error,
    },

    #[error("`{url}` is not a database URL this store can open: {reason}")]
    UnsupportedUrl { url: String, reason: String },

    #[error("cannot create the directory {} for the database: {source}", path.display())]
    CreateDir {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error("cannot open the database {}: {source}; check the path and its permissions", path.display())]
    Open {
        path: PathBuf,
        #[source]
        source: sqlx::Error,
    },

    #[error("cannot lock the database {} to update its schema: {source}", path.display())]
    Lock {
        path: PathBuf,
        #[source]
        source: std::io::Error,
    },

    #[error(
        "cannot bring the database schema of {} up to date: {source}; if a newer Toren \
         used this database, use that version",
        path.display()
    )]
    Migrate {
        path: PathBuf,
        #[source]
        source: sqlx::migrate::MigrateError,
    },

    #[error("the event database failed: {0}")]
    Database(#[from] sqlx::Error),
}

impl Error {
    /// Whether the same call may succeed if simply tried again later: the database was busy
    /// or briefly unreachable. A [`Error::Conflict`] is not retryable as is: the caller must
    /// re-read the log first.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Database(e) => is_transient(e),
            Self::RunExists(_)
            | Self::RunNotFound(_)
            | Self::Conflict { .. }
            | Self::RunEnded { .. }
            | Self::NoPendingApproval { .. }
            | Self::AlreadyDecided { .. }
            | Self::CorruptEvent { .. }
            | Self::CorruptRun { .. }
            | Self::Encode { .. }
            | Self::UnsupportedUrl { .. }
            | Self::CreateDir { .. }
            | Self::Open { .. }
            | Self::Lock { .. }
            | Self::Migrate { .. } => false,
        }
    }
}

/// SQLITE_BUSY / SQLITE_LOCKED (after `busy_timeout` ran out) and pool exhaustion.
fn is_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut => true,
        sqlx::Error::Database(db) => {
            let code = db.code();
            let primary = code
                .as_deref()
                .and_then(|c| c.parse::<i64>().ok())
                .map(|c| c & 0xff);
            matches!(primary, Some(5 | 6))
        }
        _ => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn decision_messages_say_what_was_decided() {
        let run_id: RunId = "run_abc".parse().unwrap();
        let denied = Error::AlreadyDecided {
            run_id: run_id.clone(),
            call_id: "toolu_1".into(),
            approved: false,
        };
        assert_eq!(
            denied.to_string(),
            "call toolu_1 of run run_abc was already denied; a decision cannot be changed"
        );
        let missing = Error::NoPendingApproval {
            run_id,
            call_id: "toolu_9".into(),
        };
        assert_eq!(
            missing.to_string(),
            "run run_abc has no call toolu_9 waiting for approval; \
             run `toren events run_abc` to see pending calls"
        );
    }
}
