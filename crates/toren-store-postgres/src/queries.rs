//! The queries over many runs on Postgres: a filtered, keyset-paged listing and the claim
//! query (`EventLog::query_runs`, `EventLog::claimable_runs`), built by
//! `toren_store::backend::queries` (shared with the SQLite backend). Plain reads: each is
//! one statement, so it sees one snapshot. The indexes are in the migration.

use sqlx::Postgres;
use toren_store::backend::queries::{claimable_query, run_page, run_query};
use toren_store::{ClaimQuery, Result, RunPage, RunQuery, RunSummary};

use crate::rows::{RunRow, nanos};
use crate::store::PostgresStore;

impl PostgresStore {
    pub(crate) async fn select_runs(&self, query: &RunQuery) -> Result<RunPage> {
        let Some(mut sql) = run_query::<Postgres, _>(query, nanos) else {
            return Ok(run_page(query, Vec::new()));
        };
        let rows = sql.build_query_as::<RunRow>().fetch_all(&self.pool).await?;
        let runs = rows
            .into_iter()
            .map(RunRow::decode)
            .collect::<Result<Vec<RunSummary>>>()?;
        Ok(run_page(query, runs))
    }

    pub(crate) async fn select_claimable(&self, query: &ClaimQuery) -> Result<Vec<RunSummary>> {
        let mut sql = claimable_query::<Postgres, _>(query, nanos(self.clock.now()));
        let rows = sql.build_query_as::<RunRow>().fetch_all(&self.pool).await?;
        rows.into_iter().map(RunRow::decode).collect()
    }
}
