//! The SQLite backend of [`EventLog`]: the embedded default store, one database file.
//!
//! Settings and why:
//! - WAL journal, so readers (`toren events --follow`, the API) never block the writer.
//! - Every write runs in a `BEGIN IMMEDIATE` transaction: it takes the write lock before it
//!   reads `last_seq`, so the check-then-insert is atomic across connections and processes,
//!   and a waiting writer honours `busy_timeout` (5 s). A deferred transaction that upgrades
//!   from read to write would instead fail at once with `SQLITE_BUSY`.
//! - `synchronous = FULL`: every commit is fsynced before the call returns. In WAL mode
//!   `NORMAL` survives a process crash but may lose the last commits on power loss or an OS
//!   crash, and this log promises that an acknowledged event is durable: a worker starts a
//!   tool's side effect only after `tool_started` is acknowledged, and a human's approval must
//!   not silently vanish. Events arrive at the pace of model calls and tools, so one fsync
//!   per batch costs nothing that matters.
//! - Foreign keys on; migrations (`migrations/sqlite`) embedded and applied on open.
//!
//! Each event row stores the whole [`Event`] as JSON (serde of `toren_protocol::Event`, the
//! versioned format); the other columns repeat parts of it for queries. Decoding always goes
//! through the protocol's serde types. Row decoding lives in `sqlite/rows.rs`.

mod rows;

use std::path::{Path, PathBuf};
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use sqlx::SqliteConnection;
use sqlx::migrate::Migrator;
use sqlx::sqlite::{
    SqliteConnectOptions, SqliteJournalMode, SqlitePool, SqlitePoolOptions, SqliteSynchronous,
};
use toren_protocol::{
    ApprovalDecided, EVENT_FORMAT_VERSION, Event, EventKind, RunCreated, RunId, RunStatus,
};

use crate::{Error, EventLog, Result, RunSummary};
use rows::{EventRow, RunRow, seq_to_sql, stamp};

static MIGRATOR: Migrator = sqlx::migrate!("./migrations/sqlite");

const BUSY_TIMEOUT: Duration = Duration::from_secs(5);
const MAX_CONNECTIONS: u32 = 8;

/// The event log in one SQLite file. Cheap to clone (it is a connection pool).
#[derive(Clone, Debug)]
pub struct SqliteStore {
    pool: SqlitePool,
    path: PathBuf,
}

impl SqliteStore {
    /// Opens (creating the file and its parent directories if missing) the database at a
    /// `sqlite://PATH` URL (`sqlite:PATH` is accepted too) and brings its schema up to date.
    /// `sqlite:///var/lib/toren.db` is absolute, `sqlite://toren.db` relative to the current
    /// directory; `~` is not expanded (the caller resolves paths).
    pub async fn open(url: &str) -> Result<Self> {
        let path = parse_url(url)?;
        if let Some(dir) = path.parent().filter(|d| !d.as_os_str().is_empty()) {
            tokio::fs::create_dir_all(dir)
                .await
                .map_err(|source| Error::CreateDir {
                    path: dir.to_owned(),
                    source,
                })?;
        }
        let options = SqliteConnectOptions::new()
            .filename(&path)
            .create_if_missing(true)
            .journal_mode(SqliteJournalMode::Wal)
            .synchronous(SqliteSynchronous::Full)
            .busy_timeout(BUSY_TIMEOUT)
            .foreign_keys(true);
        let pool = SqlitePoolOptions::new()
            .max_connections(MAX_CONNECTIONS)
            .connect_with(options)
            .await
            .map_err(|source| Error::Open {
                path: path.clone(),
                source,
            })?;
        // Two processes opening a new database at once would both try to apply the first
        // migration; an exclusive advisory lock on the file (flock, which SQLite's own POSIX
        // locks do not see) lets one apply it and the other find it applied.
        let lock = lock_file(&path).await?;
        let migrated = MIGRATOR.run(&pool).await;
        drop(lock);
        migrated.map_err(|source| Error::Migrate {
            path: path.clone(),
            source,
        })?;
        tracing::debug!(path = %path.display(), "opened the SQLite event store");
        Ok(Self { pool, path })
    }

    /// The database file.
    pub fn path(&self) -> &Path {
        &self.path
    }

    /// Closes every connection, waiting for in-flight calls to finish. Calls made after
    /// this fail.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    async fn begin_write(&self) -> Result<sqlx::Transaction<'static, sqlx::Sqlite>> {
        Ok(self.pool.begin_with("BEGIN IMMEDIATE").await?)
    }
}

/// The path of a `sqlite://PATH` or `sqlite:PATH` URL.
fn parse_url(url: &str) -> Result<PathBuf> {
    let unsupported = |reason: &str| Error::UnsupportedUrl {
        url: url.to_owned(),
        reason: reason.to_owned(),
    };
    let Some(rest) = url
        .strip_prefix("sqlite://")
        .or_else(|| url.strip_prefix("sqlite:"))
    else {
        return Err(unsupported(
            "expected `sqlite://PATH`, e.g. `sqlite:///home/me/.toren/toren.db` \
             (three slashes for an absolute path)",
        ));
    };
    if rest.is_empty() {
        return Err(unsupported("the path is empty; expected `sqlite://PATH`"));
    }
    if rest.starts_with(":memory:") {
        return Err(unsupported(
            "an in-memory database would lose every run when the process exits; give a file path",
        ));
    }
    if rest.contains('?') {
        return Err(unsupported(
            "URL parameters are not supported (the store sets its own SQLite options); \
             give just the path",
        ));
    }
    Ok(PathBuf::from(rest))
}

#[async_trait]
impl EventLog for SqliteStore {
    async fn create_run(&self, run_id: &RunId, created: RunCreated) -> Result<Event> {
        let mut tx = self.begin_write().await?;
        let taken = sqlx::query_scalar::<_, i64>("SELECT 1 FROM runs WHERE id = ?")
            .bind(run_id.as_str())
            .fetch_optional(&mut *tx)
            .await?;
        if taken.is_some() {
            return Err(Error::RunExists(run_id.clone()));
        }
        let mut batch = Batch::new(run_id, 0, RunStatus::Queued);
        sqlx::query(
            "INSERT INTO runs (id, agent, status, created_at, updated_at, last_seq)
             VALUES (?, ?, ?, ?, ?, 0)",
        )
        .bind(run_id.as_str())
        .bind(&created.agent.name)
        .bind(RunStatus::Queued.as_str())
        .bind(stamp(batch.at))
        .bind(stamp(batch.at))
        .execute(&mut *tx)
        .await?;
        let event = batch.push(&mut tx, EventKind::RunCreated(created)).await?;
        batch.finish(&mut tx).await?;
        tx.commit().await?;
        Ok(event)
    }

    async fn append(
        &self,
        run_id: &RunId,
        after_seq: u64,
        kinds: Vec<EventKind>,
    ) -> Result<Vec<Event>> {
        let mut tx = self.begin_write().await?;
        let (status, last_seq) = run_state(&mut tx, run_id).await?;
        if status.is_terminal() {
            return Err(Error::RunEnded {
                run_id: run_id.clone(),
                status,
            });
        }
        if last_seq != after_seq {
            return Err(Error::Conflict {
                run_id: run_id.clone(),
                expected: after_seq,
                actual: last_seq,
            });
        }
        if kinds.is_empty() {
            return Ok(Vec::new());
        }
        let mut batch = Batch::new(run_id, last_seq, status);
        let mut events = Vec::with_capacity(kinds.len());
        for kind in kinds {
            events.push(batch.push(&mut tx, kind).await?);
        }
        batch.finish(&mut tx).await?;
        tx.commit().await?;
        Ok(events)
    }

    async fn read(&self, run_id: &RunId, after_seq: u64) -> Result<Vec<Event>> {
        let rows = sqlx::query_as::<_, EventRow>(
            "SELECT run_id, seq, payload FROM events WHERE run_id = ? AND seq > ? ORDER BY seq",
        )
        .bind(run_id.as_str())
        .bind(seq_to_sql(after_seq))
        .fetch_all(&self.pool)
        .await?;
        if rows.is_empty() {
            // Tell "no new events" from "no such run".
            self.run(run_id).await?;
        }
        rows.into_iter().map(EventRow::decode).collect()
    }

    async fn run(&self, run_id: &RunId) -> Result<RunSummary> {
        let row = sqlx::query_as::<_, RunRow>(
            "SELECT id, agent, status, created_at, updated_at, last_seq FROM runs WHERE id = ?",
        )
        .bind(run_id.as_str())
        .fetch_optional(&self.pool)
        .await?;
        row.ok_or_else(|| Error::RunNotFound(run_id.clone()))?
            .decode()
    }

    async fn list_runs(&self, limit: u32) -> Result<Vec<RunSummary>> {
        let rows = sqlx::query_as::<_, RunRow>(
            "SELECT id, agent, status, created_at, updated_at, last_seq FROM runs
             ORDER BY created_at DESC, id DESC LIMIT ?",
        )
        .bind(i64::from(limit))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(RunRow::decode).collect()
    }

    async fn decide_approval(&self, run_id: &RunId, decision: ApprovalDecided) -> Result<Event> {
        let mut tx = self.begin_write().await?;
        let (status, last_seq) = run_state(&mut tx, run_id).await?;
        let rows = sqlx::query_as::<_, EventRow>(
            "SELECT run_id, seq, payload FROM events
             WHERE run_id = ? AND kind IN ('approval_requested', 'approval_decided')
             ORDER BY seq",
        )
        .bind(run_id.as_str())
        .fetch_all(&mut *tx)
        .await?;
        let mut requested = false;
        for row in rows {
            match row.decode()?.kind {
                EventKind::ApprovalDecided(earlier) if earlier.call_id == decision.call_id => {
                    return Err(Error::AlreadyDecided {
                        run_id: run_id.clone(),
                        call_id: decision.call_id,
                        approved: earlier.approved,
                    });
                }
                EventKind::ApprovalRequested(request) if request.call_id == decision.call_id => {
                    requested = true;
                }
                _ => {}
            }
        }
        if !requested {
            return Err(Error::NoPendingApproval {
                run_id: run_id.clone(),
                call_id: decision.call_id,
            });
        }
        if status.is_terminal() {
            return Err(Error::RunEnded {
                run_id: run_id.clone(),
                status,
            });
        }
        let mut batch = Batch::new(run_id, last_seq, status);
        let event = batch
            .push(&mut tx, EventKind::ApprovalDecided(decision))
            .await?;
        batch.finish(&mut tx).await?;
        tx.commit().await?;
        Ok(event)
    }
}

/// The status and last seq of a run, read inside the caller's transaction.
async fn run_state(conn: &mut SqliteConnection, run_id: &RunId) -> Result<(RunStatus, u64)> {
    let row = sqlx::query_as::<_, (String, i64)>("SELECT status, last_seq FROM runs WHERE id = ?")
        .bind(run_id.as_str())
        .fetch_optional(conn)
        .await?;
    let (status, last_seq) = row.ok_or_else(|| Error::RunNotFound(run_id.clone()))?;
    Ok((
        rows::status(run_id.as_str(), &status)?,
        rows::last_seq(run_id.as_str(), last_seq)?,
    ))
}

/// Events being written to one run inside an open write transaction: assigns consecutive
/// seqs and one timestamp, tracks the status, and refuses events after a terminal one.
struct Batch<'a> {
    run_id: &'a RunId,
    at: Timestamp,
    last_seq: u64,
    status: RunStatus,
}

impl<'a> Batch<'a> {
    fn new(run_id: &'a RunId, last_seq: u64, status: RunStatus) -> Self {
        Self {
            run_id,
            at: Timestamp::now(),
            last_seq,
            status,
        }
    }

    async fn push(&mut self, conn: &mut SqliteConnection, kind: EventKind) -> Result<Event> {
        if self.status.is_terminal() {
            return Err(Error::RunEnded {
                run_id: self.run_id.clone(),
                status: self.status,
            });
        }
        let seq = self.last_seq + 1;
        let event = Event {
            run_id: self.run_id.clone(),
            seq,
            at: self.at,
            v: EVENT_FORMAT_VERSION,
            kind,
        };
        let payload = serde_json::to_string(&event).map_err(|source| Error::Encode {
            run_id: self.run_id.clone(),
            seq,
            source,
        })?;
        sqlx::query(
            "INSERT INTO events (run_id, seq, kind, v, at, payload) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(self.run_id.as_str())
        .bind(seq_to_sql(seq))
        .bind(event.kind.name())
        .bind(i64::from(event.v))
        .bind(stamp(self.at))
        .bind(payload)
        .execute(conn)
        .await?;
        self.last_seq = seq;
        self.status = event.kind.status_after().unwrap_or(self.status);
        Ok(event)
    }

    /// Brings the run row in step with what was pushed.
    async fn finish(self, conn: &mut SqliteConnection) -> Result<()> {
        sqlx::query("UPDATE runs SET status = ?, updated_at = ?, last_seq = ? WHERE id = ?")
            .bind(self.status.as_str())
            .bind(stamp(self.at))
            .bind(seq_to_sql(self.last_seq))
            .bind(self.run_id.as_str())
            .execute(conn)
            .await?;
        Ok(())
    }
}

/// Holds an exclusive `flock` on the database file until dropped.
async fn lock_file(path: &Path) -> Result<std::fs::File> {
    let owned = path.to_owned();
    let locked = tokio::task::spawn_blocking(move || {
        let file = std::fs::OpenOptions::new().read(true).open(&owned)?;
        file.lock()?;
        Ok::<_, std::io::Error>(file)
    })
    .await
    .map_err(std::io::Error::other)
    .and_then(|r| r);
    locked.map_err(|source| Error::Lock {
        path: path.to_owned(),
        source,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_name_a_file() {
        assert_eq!(
            parse_url("sqlite:///var/lib/toren.db").unwrap(),
            PathBuf::from("/var/lib/toren.db")
        );
        assert_eq!(
            parse_url("sqlite://data/toren.db").unwrap(),
            PathBuf::from("data/toren.db")
        );
        assert_eq!(
            parse_url("sqlite:toren.db").unwrap(),
            PathBuf::from("toren.db")
        );
        for bad in [
            "postgres://localhost/toren",
            "sqlite://",
            "sqlite::memory:",
            "sqlite://x.db?mode=ro",
            "/tmp/x.db",
        ] {
            let err = parse_url(bad).unwrap_err();
            assert!(
                matches!(err, Error::UnsupportedUrl { ref url, .. } if url == bad),
                "{bad}: {err}"
            );
        }
    }
}
