//! A run's row as a write transaction sees it, and the lease rules checked against it:
//! read the state first (inside `BEGIN IMMEDIATE`, so nobody changes it before the commit),
//! check, then write. Events are written by `batch.rs`.

use jiff::Timestamp;
use sqlx::SqliteConnection;
use toren_protocol::{RunId, RunStatus};

use super::rows::{self, stamp};
use crate::{Error, Lease, LeaseInfo, Result};

/// The run row's columns that writes check.
pub(super) struct RunState {
    pub(super) status: RunStatus,
    pub(super) last_seq: u64,
    /// The token of the run's latest lease (`0` before the first); never decreases.
    pub(super) token: u64,
    /// The current lease; `None` once released or ended.
    pub(super) lease: Option<LeaseInfo>,
}

/// The state of a run, read inside the caller's transaction; [`Error::RunNotFound`] if there
/// is no such run.
pub(super) async fn run_state(conn: &mut SqliteConnection, run_id: &RunId) -> Result<RunState> {
    type Row = (String, i64, i64, Option<String>, Option<String>);
    let row: Option<Row> = sqlx::query_as(
        "SELECT status, last_seq, lease_token, lease_holder, lease_expires_at
         FROM runs WHERE id = ?",
    )
    .bind(run_id.as_str())
    .fetch_optional(conn)
    .await?;
    let (status, last_seq, token, holder, expires_at) =
        row.ok_or_else(|| Error::RunNotFound(run_id.clone()))?;
    let id = run_id.as_str();
    Ok(RunState {
        status: rows::status(id, &status)?,
        last_seq: rows::last_seq(id, last_seq)?,
        token: rows::token(id, token)?,
        lease: rows::lease(id, holder, expires_at)?,
    })
}

impl RunState {
    /// [`Error::RunEnded`] if the run has ended.
    pub(super) fn refuse_if_ended(&self, run_id: &RunId) -> Result<()> {
        if self.status.is_terminal() {
            return Err(Error::RunEnded {
                run_id: run_id.clone(),
                status: self.status,
            });
        }
        Ok(())
    }

    /// [`Error::LeaseLost`] unless `lease` is the run's current lease. Expiry does not
    /// matter here: while the token is current nobody else has acquired the run.
    pub(super) fn fence(&self, lease: &Lease) -> Result<()> {
        match &self.lease {
            Some(_) if self.token == lease.token => Ok(()),
            current => Err(Error::LeaseLost {
                run_id: lease.run_id.clone(),
                token: lease.token,
                now_held_by: current.as_ref().map(|c| c.holder.clone()),
            }),
        }
    }

    /// [`Error::Leased`] if someone other than `holder` holds a live lease at `now`.
    pub(super) fn refuse_if_leased(
        &self,
        run_id: &RunId,
        holder: &str,
        now: Timestamp,
    ) -> Result<()> {
        match &self.lease {
            Some(current) if current.holder != holder && current.is_live(now) => {
                Err(Error::Leased {
                    run_id: run_id.clone(),
                    holder: current.holder.clone(),
                    expires_at: current.expires_at,
                    expires_in: now.duration_until(current.expires_at).unsigned_abs(),
                })
            }
            _ => Ok(()),
        }
    }
}

/// Writes `lease` as the run's current lease.
pub(super) async fn store_lease(conn: &mut SqliteConnection, lease: &Lease) -> Result<()> {
    sqlx::query(
        "UPDATE runs SET lease_token = ?, lease_holder = ?, lease_expires_at = ? WHERE id = ?",
    )
    .bind(rows::token_to_sql(lease.token))
    .bind(&lease.holder)
    .bind(stamp(lease.expires_at))
    .bind(lease.run_id.as_str())
    .execute(conn)
    .await?;
    Ok(())
}

/// Clears the run's current lease, keeping its token so the next one is higher.
pub(super) async fn clear_lease(conn: &mut SqliteConnection, run_id: &RunId) -> Result<()> {
    sqlx::query("UPDATE runs SET lease_holder = NULL, lease_expires_at = NULL WHERE id = ?")
        .bind(run_id.as_str())
        .execute(conn)
        .await?;
    Ok(())
}
