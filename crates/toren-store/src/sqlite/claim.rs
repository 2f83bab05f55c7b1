//! `EventLog::claim` on SQLite: one job of the store's writer, so the pick and the lease
//! are one `BEGIN IMMEDIATE` transaction — no other writer, in this process or another,
//! can lease the run between them. The pick is one `SELECT` over the `runs` row's columns
//! (status, lease, and the `volume`, `backend` and `channel` copied from `run_created`,
//! migration 0005), oldest first; the lease is written as `acquire_lease` writes it.

use sqlx::{QueryBuilder, Sqlite};
use toren_protocol::RunId;

use super::SqliteStore;
use super::rows::{RunRow, stamp};
use super::state::store_lease;
use crate::backend::claimed;
use crate::{ClaimRequest, Lease, Result, RunSummary};

impl SqliteStore {
    pub(super) async fn claim_one(
        &self,
        request: &ClaimRequest,
    ) -> Result<Option<(RunSummary, Lease)>> {
        let (request, clock) = (request.clone(), self.clock.clone());
        self.write(move |tx| {
            Box::pin(async move {
                let now = clock.now();
                let mut sql = pick(&request, &stamp(now));
                let row = sql
                    .build_query_as::<ClaimRow>()
                    .fetch_optional(&mut *tx)
                    .await?;
                let Some(ClaimRow { run, token }) = row else {
                    return Ok(None);
                };
                let run = run.decode()?;
                let token = super::rows::unsigned(run.id.as_str(), "lease_token", token)?;
                let (summary, lease) = claimed(run, token, &request.holder, now, request.ttl);
                store_lease(tx, &lease).await?;
                Ok(Some((summary, lease)))
            })
        })
        .await
    }
}

/// The oldest run `request` may claim at `now`, with its current token.
fn pick(request: &ClaimRequest, now: &str) -> QueryBuilder<Sqlite> {
    let mut sql = QueryBuilder::<Sqlite>::new(
        "SELECT id, agent, status, created_at, updated_at, last_seq, lease_holder,
                lease_expires_at, lease_token FROM runs AS r
         WHERE status IN ('queued', 'running')
           AND (lease_expires_at IS NULL OR lease_expires_at <= ",
    );
    sql.push_bind(now.to_owned()).push(")");
    one_of(&mut sql, "volume", &request.volumes, true);
    one_of(&mut sql, "backend", &request.backends, true);
    one_of(&mut sql, "channel", &request.channels, true);
    if !request.agents.is_empty() {
        one_of(&mut sql, "agent", &request.agents, false);
    }
    if !request.skip.is_empty() {
        sql.push(" AND id NOT IN (");
        let mut list = sql.separated(", ");
        for id in &request.skip {
            list.push_bind(RunId::as_str(id).to_owned());
        }
        list.push_unseparated(")");
    }
    if let Some(limit) = request.per_agent_limit {
        sql.push(
            " AND (SELECT COUNT(*) FROM runs AS o
                  WHERE o.agent = r.agent AND o.lease_expires_at IS NOT NULL
                    AND o.lease_expires_at > ",
        )
        .push_bind(now.to_owned())
        .push(") < ")
        .push_bind(i64::from(limit));
    }
    sql.push(" ORDER BY created_at, id LIMIT 1");
    sql
}

/// ` AND (column IS NULL OR column IN (values))` (`or_null`), else ` AND (column IN
/// (values))`; an empty list lets only `NULL` through, or nothing.
fn one_of(sql: &mut QueryBuilder<Sqlite>, column: &str, values: &[String], or_null: bool) {
    let null = if or_null { "IS NULL" } else { "IS NULL AND 0" };
    sql.push(format!(" AND ({column} {null}"));
    if !values.is_empty() {
        sql.push(format!(" OR {column} IN ("));
        let mut list = sql.separated(", ");
        for value in values {
            list.push_bind(value.clone());
        }
        list.push_unseparated(")");
    }
    sql.push(")");
}

/// A run row with its lease token.
struct ClaimRow {
    run: RunRow,
    token: i64,
}

impl<'r> sqlx::FromRow<'r, sqlx::sqlite::SqliteRow> for ClaimRow {
    fn from_row(row: &'r sqlx::sqlite::SqliteRow) -> sqlx::Result<Self> {
        use sqlx::Row as _;
        Ok(Self {
            run: RunRow::from_row(row)?,
            token: row.try_get("lease_token")?,
        })
    }
}
