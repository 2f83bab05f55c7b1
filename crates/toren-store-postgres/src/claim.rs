//! `EventLog::claim` on Postgres, as the job queues on Postgres claim (River, Oban,
//! graphile-worker): one transaction picks the oldest claimable run the request's filters
//! let through with `FOR UPDATE SKIP LOCKED` — a run another claimer is taking at this
//! moment is skipped, not waited for, so claimers never queue behind each other and never
//! get the same run — and writes its lease with a higher token.
//!
//! A per-agent limit needs one more step, since claimers of one agent skip each other's
//! rows and each would count the others' live leases without the run being claimed now:
//! after the pick, a transaction-scoped advisory lock on the agent's name serialises the
//! claimers of that agent, and the count of its live leases, read after the lock (read
//! committed: it sees every claim committed before), decides. An agent at its limit is
//! left out and the pick tried again.

use sqlx::{PgConnection, Postgres, QueryBuilder};
use toren_protocol::RunId;
use toren_store::backend::{claimed, rows::RUN_COLUMNS};
use toren_store::{ClaimRequest, Lease, Result, RunSummary};

use crate::rows::{self, RunRow, nanos};
use crate::state::store_lease;
use crate::store::{PostgresStore, finish};

/// How many agents at their limit one claim passes over before it gives up for now.
const MAX_PASSES: usize = 32;

impl PostgresStore {
    pub(crate) async fn claim_one(
        &self,
        request: &ClaimRequest,
    ) -> Result<Option<(RunSummary, Lease)>> {
        let now = self.clock.now();
        let mut tx = self.begin().await?;
        let result = claim_in(&mut tx, request, now).await;
        // An empty claim ends its transaction too: its pick locked rows it let go of.
        finish(tx, result).await
    }
}

/// The claim, inside `tx`.
async fn claim_in(
    tx: &mut PgConnection,
    request: &ClaimRequest,
    now: jiff::Timestamp,
) -> Result<Option<(RunSummary, Lease)>> {
    let mut full: Vec<String> = Vec::new();
    for _ in 0..MAX_PASSES {
        let Some((run, token)) = pick(&mut *tx, request, nanos(now), &full).await? else {
            return Ok(None);
        };
        if let Some(limit) = request.per_agent_limit
            && live_leases(&mut *tx, &run.agent, nanos(now)).await? >= i64::from(limit)
        {
            full.push(run.agent);
            continue;
        }
        let (summary, lease) = claimed(run, token, &request.holder, now, request.ttl);
        store_lease(&mut *tx, &lease).await?;
        return Ok(Some((summary, lease)));
    }
    Ok(None)
}

/// The oldest run `request` may claim at `now`, not of the agents in `full`, locked (rows
/// other transactions hold are skipped), with its current token.
async fn pick(
    tx: &mut PgConnection,
    request: &ClaimRequest,
    now: i64,
    full: &[String],
) -> Result<Option<(RunSummary, u64)>> {
    let mut sql = QueryBuilder::<Postgres>::new(format!(
        "SELECT {RUN_COLUMNS}, lease_token FROM runs
         WHERE status IN ('queued', 'running')
           AND (lease_expires_at IS NULL OR lease_expires_at <= "
    ));
    sql.push_bind(now).push(")");
    one_of(&mut sql, "volume", &request.volumes, true);
    one_of(&mut sql, "backend", &request.backends, true);
    one_of(&mut sql, "channel", &request.channels, true);
    if !request.agents.is_empty() {
        one_of(&mut sql, "agent", &request.agents, false);
    }
    if !full.is_empty() {
        sql.push(" AND agent <> ALL(")
            .push_bind(full.to_vec())
            .push(")");
    }
    if !request.skip.is_empty() {
        let skip: Vec<String> = request
            .skip
            .iter()
            .map(|id| RunId::as_str(id).to_owned())
            .collect();
        sql.push(" AND id <> ALL(").push_bind(skip).push(")");
    }
    sql.push(" ORDER BY created_at, id LIMIT 1 FOR UPDATE SKIP LOCKED");
    let Some(row) = sql
        .build_query_as::<ClaimRow>()
        .fetch_optional(&mut *tx)
        .await?
    else {
        return Ok(None);
    };
    let run = row.run.decode()?;
    let token = rows::unsigned(run.id.as_str(), "lease_token", row.lease_token)?;
    Ok(Some((run, token)))
}

/// How many runs of `agent` hold a live lease at `now`, counted once this transaction holds
/// the agent's advisory lock (released at commit or rollback).
async fn live_leases(tx: &mut PgConnection, agent: &str, now: i64) -> Result<i64> {
    sqlx::query("SELECT pg_advisory_xact_lock(hashtextextended($1, 7243))")
        .bind(agent)
        .execute(&mut *tx)
        .await?;
    let count = sqlx::query_scalar::<_, i64>(
        "SELECT COUNT(*) FROM runs
         WHERE agent = $1 AND lease_expires_at IS NOT NULL AND lease_expires_at > $2",
    )
    .bind(agent)
    .bind(now)
    .fetch_one(&mut *tx)
    .await?;
    Ok(count)
}

/// ` AND (column IS NULL OR column = ANY(values))` (`or_null`), else ` AND column =
/// ANY(values)`; an empty list lets only `NULL` through, or nothing.
fn one_of(sql: &mut QueryBuilder<Postgres>, column: &str, values: &[String], or_null: bool) {
    let null = if or_null {
        "IS NULL"
    } else {
        "IS NULL AND FALSE"
    };
    sql.push(format!(" AND ({column} {null} OR {column} = ANY("))
        .push_bind(values.to_vec())
        .push("))");
}

/// A run row with its lease token.
struct ClaimRow {
    run: RunRow,
    lease_token: i64,
}

impl<'r> sqlx::FromRow<'r, sqlx::postgres::PgRow> for ClaimRow {
    fn from_row(row: &'r sqlx::postgres::PgRow) -> sqlx::Result<Self> {
        use sqlx::Row as _;
        Ok(Self {
            run: RunRow::from_row(row)?,
            lease_token: row.try_get("lease_token")?,
        })
    }
}
