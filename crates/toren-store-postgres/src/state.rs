//! A run's row as a write transaction sees it, locked (`SELECT … FOR UPDATE`) so that no
//! other transaction changes it before this one commits, and the lease rules checked
//! against it, in the order `EventLog` documents.

use jiff::Timestamp;
use sqlx::PgConnection;
use toren_protocol::{RunId, RunStatus};
use toren_store::{Error, Lease, LeaseInfo, Result};

use crate::rows::{self, nanos, to_sql};

/// The run row's columns that writes check.
pub(crate) struct RunState {
    pub(crate) status: RunStatus,
    pub(crate) last_seq: u64,
    /// The token of the run's latest lease (`0` before the first); never decreases.
    pub(crate) token: u64,
    /// The current lease; `None` once released or ended.
    pub(crate) lease: Option<LeaseInfo>,
}

/// Locks the run's row until the transaction ends and reads it;
/// [`Error::RunNotFound`] if there is no such run.
pub(crate) async fn lock_run(conn: &mut PgConnection, run_id: &RunId) -> Result<RunState> {
    type Row = (String, i64, i64, Option<String>, Option<i64>);
    let row: Option<Row> = sqlx::query_as(
        "SELECT status, last_seq, lease_token, lease_holder, lease_expires_at
         FROM runs WHERE id = $1 FOR UPDATE",
    )
    .bind(run_id.as_str())
    .fetch_optional(conn)
    .await?;
    let (status, last_seq, token, holder, expires_at) =
        row.ok_or_else(|| Error::RunNotFound(run_id.clone()))?;
    let id = run_id.as_str();
    Ok(RunState {
        status: rows::status(id, &status)?,
        last_seq: rows::from_sql(id, "last_seq", last_seq)?,
        token: rows::from_sql(id, "lease_token", token)?,
        lease: rows::lease(id, holder, expires_at)?,
    })
}

impl RunState {
    /// [`Error::RunEnded`] if the run has ended.
    pub(crate) fn refuse_if_ended(&self, run_id: &RunId) -> Result<()> {
        if self.status.is_terminal() {
            return Err(Error::RunEnded {
                run_id: run_id.clone(),
                status: self.status,
            });
        }
        Ok(())
    }

    /// [`Error::LeaseLost`] unless `lease` is the run's current lease (expiry does not
    /// matter: while the token is current nobody else has acquired the run).
    pub(crate) fn fence(&self, lease: &Lease) -> Result<()> {
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
    pub(crate) fn refuse_if_leased(
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
pub(crate) async fn store_lease(conn: &mut PgConnection, lease: &Lease) -> Result<()> {
    sqlx::query(
        "UPDATE runs SET lease_token = $1, lease_holder = $2, lease_expires_at = $3
         WHERE id = $4",
    )
    .bind(to_sql(lease.token))
    .bind(&lease.holder)
    .bind(nanos(lease.expires_at))
    .bind(lease.run_id.as_str())
    .execute(conn)
    .await?;
    Ok(())
}

/// Clears the run's current lease, keeping its token so the next one is higher.
pub(crate) async fn clear_lease(conn: &mut PgConnection, run_id: &RunId) -> Result<()> {
    sqlx::query("UPDATE runs SET lease_holder = NULL, lease_expires_at = NULL WHERE id = $1")
        .bind(run_id.as_str())
        .execute(conn)
        .await?;
    Ok(())
}
