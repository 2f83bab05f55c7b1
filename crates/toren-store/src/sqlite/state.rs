//! A run's row as a write transaction sees it: read the state first (inside `BEGIN
//! IMMEDIATE`, so nobody changes it before the commit), check it with the rules of
//! [`RunState`] (`crate::backend`, shared with the Postgres backend), then write. Events are
//! written by `batch.rs`.

use sqlx::SqliteConnection;
use toren_protocol::RunId;

use super::rows::{self, stamp, to_sql};
pub(super) use crate::backend::RunState;
use crate::{Error, Lease, Result};

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
        last_seq: rows::unsigned(id, "last_seq", last_seq)?,
        token: rows::unsigned(id, "lease_token", token)?,
        lease: rows::lease(id, holder, expires_at)?,
    })
}

/// Writes `lease` as the run's current lease.
pub(super) async fn store_lease(conn: &mut SqliteConnection, lease: &Lease) -> Result<()> {
    sqlx::query(
        "UPDATE runs SET lease_token = ?, lease_holder = ?, lease_expires_at = ? WHERE id = ?",
    )
    .bind(to_sql(lease.token))
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
