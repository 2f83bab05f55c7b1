//! Events being written to one run inside an open write transaction: consecutive seqs, one
//! timestamp per batch, the run's status kept in step, and nothing after a terminal event.
//! A batch that ends the run also releases its lease. The checks before writing (ended,
//! fenced, conflicting) are the caller's, in `sqlite.rs`, against `state.rs`.

use jiff::Timestamp;
use sqlx::SqliteConnection;
use toren_protocol::{EVENT_FORMAT_VERSION, Event, EventKind, RunId, RunStatus};

use super::rows::{seq_to_sql, stamp};
use crate::{Error, Result};

pub(super) struct Batch<'a> {
    run_id: &'a RunId,
    at: Timestamp,
    last_seq: u64,
    status: RunStatus,
}

impl<'a> Batch<'a> {
    /// A batch stamped `at`, going on after `last_seq` of a run in `status`.
    pub(super) fn new(run_id: &'a RunId, at: Timestamp, last_seq: u64, status: RunStatus) -> Self {
        Self {
            run_id,
            at,
            last_seq,
            status,
        }
    }

    pub(super) async fn push(
        &mut self,
        conn: &mut SqliteConnection,
        kind: EventKind,
    ) -> Result<Event> {
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

    /// Brings the run row in step with what was pushed; an ended run's lease is released.
    pub(super) async fn finish(self, conn: &mut SqliteConnection) -> Result<()> {
        let ended = self.status.is_terminal();
        sqlx::query(
            "UPDATE runs SET status = ?1, updated_at = ?2, last_seq = ?3,
                 lease_holder = IIF(?4, NULL, lease_holder),
                 lease_expires_at = IIF(?4, NULL, lease_expires_at)
             WHERE id = ?5",
        )
        .bind(self.status.as_str())
        .bind(stamp(self.at))
        .bind(seq_to_sql(self.last_seq))
        .bind(ended)
        .bind(self.run_id.as_str())
        .execute(conn)
        .await?;
        Ok(())
    }
}
