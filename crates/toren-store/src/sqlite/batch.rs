//! Events being written to one run inside an open write transaction: consecutive seqs, one
//! timestamp per batch, the run's status kept in step, and nothing after a terminal event.
//! A batch that ends the run also releases its lease. The numbering and encoding are
//! `crate::backend::Sequence`'s; the checks before writing (ended, fenced, conflicting) are
//! the caller's, in `log.rs`, against `state.rs`.

use jiff::Timestamp;
use sqlx::SqliteConnection;
use toren_protocol::{Event, EventKind, RunId, RunStatus};

use super::rows::{stamp, to_sql};
use crate::Result;
use crate::backend::Sequence;

pub(super) struct Batch {
    sequence: Sequence,
}

impl Batch {
    /// A batch stamped `at`, going on after `last_seq` of a run in `status`.
    pub(super) fn new(run_id: &RunId, at: Timestamp, last_seq: u64, status: RunStatus) -> Self {
        Self {
            sequence: Sequence::new(run_id, at, last_seq, status),
        }
    }

    /// The same batch, to a run whose current wait has `waiting` open
    /// ([`Sequence::waiting_on`]).
    pub(super) fn waiting_on(self, waiting: toren_protocol::Waiting) -> Self {
        Self {
            sequence: self.sequence.waiting_on(waiting),
        }
    }

    pub(super) async fn push(
        &mut self,
        conn: &mut SqliteConnection,
        kind: EventKind,
    ) -> Result<Event> {
        let (event, payload) = self.sequence.next(kind)?;
        sqlx::query(
            "INSERT INTO events (run_id, seq, kind, v, at, payload) VALUES (?, ?, ?, ?, ?, ?)",
        )
        .bind(event.run_id.as_str())
        .bind(to_sql(event.seq))
        .bind(event.kind.name())
        .bind(i64::from(event.v))
        .bind(stamp(event.at))
        .bind(payload)
        .execute(conn)
        .await?;
        Ok(event)
    }

    /// Brings the run row in step with what was pushed; an ended run's lease is released.
    pub(super) async fn finish(self, conn: &mut SqliteConnection) -> Result<()> {
        let sequence = &self.sequence;
        sqlx::query(
            "UPDATE runs SET status = ?1, updated_at = ?2, last_seq = ?3,
                 lease_holder = IIF(?4, NULL, lease_holder),
                 lease_expires_at = IIF(?4, NULL, lease_expires_at)
             WHERE id = ?5",
        )
        .bind(sequence.status().as_str())
        .bind(stamp(sequence.at()))
        .bind(to_sql(sequence.last_seq()))
        .bind(sequence.ended())
        .bind(sequence.run_id().as_str())
        .execute(conn)
        .await?;
        Ok(())
    }
}
