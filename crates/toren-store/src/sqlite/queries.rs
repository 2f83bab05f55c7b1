//! The queries over many runs on SQLite: a filtered, keyset-paged listing and the claim
//! query (`EventLog::query_runs`, `EventLog::claimable_runs`). Plain reads, no
//! transaction: each is one statement, so it sees one snapshot. The indexes are in
//! migration 0004; times compare as text because stamps sort in time order (`rows.rs`).

use sqlx::{QueryBuilder, Sqlite};
use toren_protocol::RunStatus;

use super::SqliteStore;
use super::rows::{RunRow, stamp};
use crate::{ClaimLeases, ClaimQuery, Result, RunCursor, RunPage, RunQuery, RunSummary};

/// The columns [`RunRow`] decodes.
const RUN_COLUMNS: &str = "SELECT id, agent, status, created_at, updated_at, last_seq,
        lease_holder, lease_expires_at FROM runs";

/// The statuses a claimable run may have.
const CLAIMABLE: [RunStatus; 2] = [RunStatus::Queued, RunStatus::Running];

impl SqliteStore {
    pub(super) async fn select_runs(&self, query: &RunQuery) -> Result<RunPage> {
        if query.limit == 0 {
            return Ok(RunPage {
                runs: Vec::new(),
                next: None,
            });
        }
        let mut sql = QueryBuilder::<Sqlite>::new(RUN_COLUMNS);
        sql.push(" WHERE 1 = 1");
        if !query.statuses.is_empty() {
            push_statuses(&mut sql, &query.statuses);
        }
        if let Some(agent) = &query.agent {
            sql.push(" AND agent = ").push_bind(agent.clone());
        }
        if let Some(after) = &query.after {
            sql.push(" AND (created_at, id) < (")
                .push_bind(stamp(after.created_at))
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

    pub(super) async fn select_claimable(&self, query: &ClaimQuery) -> Result<Vec<RunSummary>> {
        let now = stamp(self.clock.now());
        let mut sql = QueryBuilder::<Sqlite>::new(RUN_COLUMNS);
        sql.push(" WHERE 1 = 1");
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
                    .push(" AND length(lease_holder) >= length(")
                    .push_bind(suffix.clone())
                    .push(") AND substr(lease_holder, length(lease_holder) - length(")
                    .push_bind(suffix.clone())
                    .push(") + 1) = ")
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
fn push_statuses(sql: &mut QueryBuilder<Sqlite>, statuses: &[RunStatus]) {
    sql.push(" AND status IN (");
    let mut list = sql.separated(", ");
    for status in statuses {
        list.push_bind(status.as_str());
    }
    list.push_unseparated(")");
}
