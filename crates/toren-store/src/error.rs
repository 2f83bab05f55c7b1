//! The store's one error type. Every variant is something a caller matches on (the CLI maps
//! them to exit codes, the worker re-reads on [`Error::Conflict`] and stops driving a run on
//! [`Error::LeaseLost`]) and every message tells a person what happened and what to do next.

use std::path::PathBuf;
use std::time::Duration;

use jiff::Timestamp;
use toren_protocol::{RunId, RunStatus};

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// `create_run` with an id that is already taken.
    #[error("run {0} already exists; pick a new run id")]
    RunExists(RunId),

    #[error("no run {0} in this store; `toren runs list` shows the known runs")]
    RunNotFound(RunId),

    #[error(
        "a session named `{0}` already exists; continue it with `toren chat {0}` or pick another name"
    )]
    SessionExists(String),

    #[error("no session named `{0}`; `toren sessions list` shows the known ones")]
    SessionNotFound(String),

    /// A turn of the session has not ended: turns never interleave.
    #[error(
        "turn {turn} of session `{session}` (run {run_id}) has not ended; wait for it, or          cancel it with `toren cancel {run_id}`"
    )]
    TurnInProgress {
        session: String,
        turn: u32,
        run_id: RunId,
    },

    /// A chat front door's message was taken already (a turn or the queue has it): it was
    /// handled before, and is not handled again.
    #[error("message {key} was handled already; it makes no second turn")]
    MessageTaken { key: String },

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

    /// `acquire_lease` while another holder's lease is live.
    #[error(
        "run {run_id} is being driven by {holder} until {expires_at:.0} ({} from now); if \
         that process has died, try again once its lease has expired",
        whole_seconds(*expires_in)
    )]
    Leased {
        run_id: RunId,
        holder: String,
        expires_at: Timestamp,
        /// How long the lease had left when the store refused.
        expires_in: Duration,
    },

    /// The caller's lease was taken over or released: it must stop driving the run.
    /// Nothing was written.
    #[error(
        "this process no longer holds run {run_id} (its lease #{token} {}); nothing was \
         written and it must stop driving the run",
        match now_held_by {
            Some(holder) => format!("was taken over by {holder}"),
            None => "was released or taken over".to_owned(),
        }
    )]
    LeaseLost {
        run_id: RunId,
        token: u64,
        /// The holder of the run's current lease, if anyone holds one.
        now_held_by: Option<String>,
    },

    #[error(
        "run {run_id} has no call {call_id} waiting for approval; \
         run `toren events {run_id}` to see pending calls"
    )]
    NoPendingApproval { run_id: RunId, call_id: String },

    /// A decision on a request that a rewind left behind: the run went back to a step
    /// before it, so its call is not on the run's current line.
    #[error(
        "call {call_id} of run {run_id} was left behind by a rewind (step {to}); it can no \
         longer be decided: run `toren runs show {run_id}` to see what the run waits for now"
    )]
    LeftBehind {
        run_id: RunId,
        call_id: String,
        /// The step the rewind went back to.
        to: u64,
    },

    /// A decision on a host's network request whose tool call has completed: the command
    /// that asked is over, and the next connection to the host asks again.
    #[error(
        "{call_id} of run {run_id} was asked for by call {call}, which has ended; it can no \
         longer be decided: when the sandbox reaches the host again it is asked about anew \
         (see `toren runs show {run_id}`)"
    )]
    CallEnded {
        run_id: RunId,
        /// The request's id (`host:<name>`).
        call_id: String,
        /// The tool call it was made in.
        call: String,
    },

    /// `raise_budget` on a run that is not paused at its budget.
    #[error(
        "run {run_id} is not waiting for its budget to be raised (it is {status}); a budget \
         is raised once the run has paused at it"
    )]
    NotAwaitingBudget { run_id: RunId, status: RunStatus },

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

    /// A stored session row that does not decode.
    #[error("the stored session `{session}` is unreadable ({reason}); the database is damaged")]
    CorruptSession { session: String, reason: String },

    /// A stored worker registration that does not decode.
    #[error("the registration of worker `{id}` is unreadable ({reason}); the database is damaged")]
    CorruptWorker { id: String, reason: String },

    /// A page cursor that this store's [`RunCursor::encode`](crate::RunCursor::encode) did
    /// not make (or made in another version).
    #[error("the cursor is not valid ({reason}); start again from the first page")]
    BadCursor { reason: String },

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

    #[error(
        "cannot create or lock the database {} to open it: {source}; check the path and its \
         permissions",
        path.display()
    )]
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

    /// The transaction that a write shared with others (group commit) could not begin or
    /// commit: nothing of it was written. Every write of the batch gets the same error.
    #[error("the event database failed: {0}")]
    Batch(std::sync::Arc<sqlx::Error>),
}

impl Error {
    /// Whether the same call may succeed if simply tried again later: the database was busy
    /// or briefly unreachable. A [`Error::Conflict`] is not retryable as is: the caller must
    /// re-read the log first.
    pub fn is_retryable(&self) -> bool {
        match self {
            Self::Database(e) => is_transient(e),
            Self::Batch(e) => is_transient(e),
            Self::RunExists(_)
            | Self::RunNotFound(_)
            | Self::SessionExists(_)
            | Self::SessionNotFound(_)
            | Self::TurnInProgress { .. }
            | Self::MessageTaken { .. }
            | Self::Conflict { .. }
            | Self::RunEnded { .. }
            | Self::Leased { .. }
            | Self::LeaseLost { .. }
            | Self::NoPendingApproval { .. }
            | Self::LeftBehind { .. }
            | Self::CallEnded { .. }
            | Self::NotAwaitingBudget { .. }
            | Self::AlreadyDecided { .. }
            | Self::CorruptEvent { .. }
            | Self::CorruptRun { .. }
            | Self::CorruptSession { .. }
            | Self::CorruptWorker { .. }
            | Self::BadCursor { .. }
            | Self::Encode { .. }
            | Self::UnsupportedUrl { .. }
            | Self::CreateDir { .. }
            | Self::Open { .. }
            | Self::Lock { .. }
            | Self::Migrate { .. } => false,
        }
    }
}

/// `3 s`: a duration rounded up to whole seconds, for people.
fn whole_seconds(d: Duration) -> String {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    format!("{secs} s")
}

/// A failure that may pass if the call is simply made again later: SQLITE_BUSY /
/// SQLITE_LOCKED (after `busy_timeout` ran out); pool exhaustion; a connection that could
/// not be made or broke (the database server restarting or unreachable: sqlx's I/O
/// errors); and on Postgres the SQLSTATEs that say the same (connection exceptions,
/// serialization failures and deadlocks, lock and statement timeouts, the server shutting
/// down or starting, too many connections).
fn is_transient(e: &sqlx::Error) -> bool {
    match e {
        sqlx::Error::PoolTimedOut | sqlx::Error::Io(_) => true,
        sqlx::Error::Database(db) => {
            let code = db.code();
            let code = code.as_deref().unwrap_or_default();
            let sqlite_primary = code.parse::<i64>().ok().map(|c| c & 0xff);
            let sqlite_busy = code.len() < 5 && matches!(sqlite_primary, Some(5 | 6));
            sqlite_busy || is_postgres_transient(code)
        }
        _ => false,
    }
}

/// Postgres SQLSTATEs (always five characters) of failures that pass on their own.
fn is_postgres_transient(code: &str) -> bool {
    code.len() == 5
        && (code.starts_with("08")
            || matches!(
                code,
                "40001" | "40P01" | "55P03" | "57014" | "57P01" | "57P02" | "57P03" | "53300"
            ))
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

    #[test]
    fn lease_messages_name_the_holder_and_the_wait() {
        let run_id: RunId = "run_abc".parse().unwrap();
        let leased = Error::Leased {
            run_id: run_id.clone(),
            holder: "build-box:4242".into(),
            expires_at: "2026-03-14T09:27:00.25Z".parse().unwrap(),
            expires_in: Duration::from_millis(29_250),
        };
        assert_eq!(
            leased.to_string(),
            "run run_abc is being driven by build-box:4242 until 2026-03-14T09:27:00Z \
             (30 s from now); if that process has died, try again once its lease has expired"
        );
        let lost = Error::LeaseLost {
            run_id,
            token: 3,
            now_held_by: Some("laptop:77".into()),
        };
        assert_eq!(
            lost.to_string(),
            "this process no longer holds run run_abc (its lease #3 was taken over by \
             laptop:77); nothing was written and it must stop driving the run"
        );
    }
}
