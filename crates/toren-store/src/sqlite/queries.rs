//! The queries over many runs on SQLite: a filtered, keyset-paged listing and the claim
//! query (`EventLog::query_runs`, `EventLog::claimable_runs`), built by
//! `crate::backend::queries` (shared with the Postgres backend). Plain reads, no
//! transaction: each is one statement, so it sees one snapshot. The indexes are in
//! migration 0004; times compare as text because stamps sort in time order (`rows.rs`).

use sqlx::Sqlite;

use super::SqliteStore;
use super::rows::{RunRow, stamp};
use crate::backend::queries::{claimable_query, run_page, run_query};
use crate::{ClaimQuery, Result, RunPage, RunQuery, RunSummary};

impl SqliteStore {
    pub(super) async fn select_runs(&self, query: &RunQuery) -> Result<RunPage> {
        let Some(mut sql) = run_query::<Sqlite, _>(query, stamp) else {
            return Ok(run_page(query, Vec::new()));
        };
        let rows = sql.build_query_as::<RunRow>().fetch_all(&self.pool).await?;
        let runs = rows
            .into_iter()
            .map(RunRow::decode)
            .collect::<Result<Vec<RunSummary>>>()?;
        Ok(run_page(query, runs))
    }

    pub(super) async fn select_claimable(&self, query: &ClaimQuery) -> Result<Vec<RunSummary>> {
        let mut sql = claimable_query::<Sqlite, _>(query, stamp(self.clock.now()));
        let rows = sql.build_query_as::<RunRow>().fetch_all(&self.pool).await?;
        rows.into_iter().map(RunRow::decode).collect()
    }
}
