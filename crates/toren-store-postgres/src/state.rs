//! A run's row as a write transaction sees it, locked (`SELECT … FOR UPDATE`) so that no
//! other transaction changes it before this one commits; the lease rules checked against
//! it are [`RunState`]'s (`toren_store::backend`, shared with the SQLite backend).

use sqlx::PgConnection;
use toren_protocol::RunId;
pub(crate) use toren_store::backend::RunState;
use toren_store::{Error, Lease, Result};

use crate::rows::{self, nanos, to_sql};

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
        last_seq: rows::unsigned(id, "last_seq", last_seq)?,
        token: rows::unsigned(id, "lease_token", token)?,
        lease: rows::lease(id, holder, expires_at)?,
    })
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
