//! The queries over many runs on Postgres: a filtered, keyset-paged listing and the claim
//! query (`EventLog::query_runs`, `EventLog::claimable_runs`). Plain reads: each is one
//! statement, so it sees one snapshot. The indexes are in the migration.

use sqlx::{Postgres, QueryBuilder};
use toren_protocol::RunStatus;
use toren_store::{ClaimLeases, ClaimQuery, Result, RunCursor, RunPage, RunQuery, RunSummary};

use crate::rows::{RUN_COLUMNS, RunRow, nanos};
use crate::store::PostgresStore;

/// The statuses a claimable run may have.
const CLAIMABLE: [RunStatus; 2] = [RunStatus::Queued, RunStatus::Running];

impl PostgresStore {
    pub(crate) async fn select_runs(&self, query: &RunQuery) -> Result<RunPage> {
        if query.limit == 0 {
            return Ok(RunPage {
                runs: Vec::new(),
                next: None,
            });
        }
        let mut sql = QueryBuilder::<Postgres>::new(format!("SELECT {RUN_COLUMNS} FROM runs"));
        sql.push(" WHERE TRUE");
        if !query.statuses.is_empty() {
            push_statuses(&mut sql, &query.statuses);
        }
        if let Some(agent) = &query.agent {
            sql.push(" AND agent = ").push_bind(agent.clone());
        }
        if let Some(after) = &query.after {
            sql.push(" AND (created_at, id) < (")
                .push_bind(nanos(after.created_at))
                .push(", ")
                .push_bind(after.id.as_str().to_owned())
                .push(")");
        }
        // One more than asked says whether a next page exists.
        sql.push(" ORDER BY created_at DESC, id DESC LIMIT ")
            .push_bind(i64::from(query.limit) + 1);
        let rows = sql.build_query_as::<RunRow>().fetch_all(&self.pool).await?;
        let mut runs = rows
            .into_iter()
            .map(RunRow::decode)
            .collect::<Result<Vec<RunSummary>>>()?;
        let more = runs.len() > query.limit as usize;
        runs.truncate(query.limit as usize);
        let next = more.then(|| runs.last().map(RunCursor::after)).flatten();
        Ok(RunPage { runs, next })
    }

    pub(crate) async fn select_claimable(&self, query: &ClaimQuery) -> Result<Vec<RunSummary>> {
        let now = nanos(self.clock.now());
        let mut sql = QueryBuilder::<Postgres>::new(format!("SELECT {RUN_COLUMNS} FROM runs"));
        sql.push(" WHERE TRUE");
        push_statuses(&mut sql, &CLAIMABLE);
        match &query.leases {
            ClaimLeases::Free => {
                sql.push(" AND (lease_expires_at IS NULL OR lease_expires_at <= ")
                    .push_bind(now)
                    .push(")");
            }
            ClaimLeases::LiveHeldBySuffix(suffix) => {
                sql.push(" AND lease_expires_at > ")
                    .push_bind(now)
                    .push(" AND char_length(lease_holder) >= char_length(")
                    .push_bind(suffix.clone())
                    .push(") AND right(lease_holder, char_length(")
                    .push_bind(suffix.clone())
                    .push(")) = ")
                    .push_bind(suffix.clone());
            }
        }
        sql.push(" ORDER BY created_at, id LIMIT ")
            .push_bind(i64::from(query.limit));
        let rows = sql.build_query_as::<RunRow>().fetch_all(&self.pool).await?;
        rows.into_iter().map(RunRow::decode).collect()
    }
}

/// ` AND status IN (…)` for a non-empty set of statuses.
pub(crate) fn push_statuses(sql: &mut QueryBuilder<Postgres>, statuses: &[RunStatus]) {
    sql.push(" AND status IN (");
    let mut list = sql.separated(", ");
    for status in statuses {
        list.push_bind(status.as_str());
    }
    list.push_unseparated(")");
}
