//! The queries over many runs, built for any sqlx database: the filtered, keyset-paged
//! listing of [`EventLog::query_runs`](crate::EventLog::query_runs) and the claim query of
//! [`EventLog::claimable_runs`](crate::EventLog::claimable_runs). Each is one statement,
//! so it sees one snapshot; times are bound in the backend's own form, which must compare
//! in time order.

use sqlx::{Database, Encode, QueryBuilder, Type};
use toren_protocol::RunStatus;

use super::rows::RUN_COLUMNS;
use crate::{ClaimLeases, ClaimQuery, RunCursor, RunPage, RunQuery, RunSummary};

/// The statuses a claimable run may have.
const CLAIMABLE: [RunStatus; 2] = [RunStatus::Queued, RunStatus::Running];

/// The statement of [`EventLog::query_runs`](crate::EventLog::query_runs) for `query`, with
/// its times bound as `time` gives them; it selects [`RUN_COLUMNS`], newest first, one row
/// more than the page holds ([`run_page`] makes the page). `None`: a page of no runs, no
/// statement needed.
pub fn run_query<DB, T>(
    query: &RunQuery,
    time: impl Fn(jiff::Timestamp) -> T,
) -> Option<QueryBuilder<DB>>
where
    DB: Database,
    <DB as Database>::Arguments: Default,
    T: for<'t> Encode<'t, DB> + Type<DB>,
    String: for<'t> Encode<'t, DB> + Type<DB>,
    i64: for<'t> Encode<'t, DB> + Type<DB>,
    &'static str: for<'t> Encode<'t, DB> + Type<DB>,
{
    if query.limit == 0 {
        return None;
    }
    let mut sql = QueryBuilder::<DB>::new(format!("SELECT {RUN_COLUMNS} FROM runs WHERE 1 = 1"));
    if !query.statuses.is_empty() {
        push_statuses(&mut sql, &query.statuses);
    }
    if let Some(agent) = &query.agent {
        sql.push(" AND agent = ").push_bind(agent.clone());
    }
    if let Some(after) = &query.after {
        sql.push(" AND (created_at, id) < (")
            .push_bind(time(after.created_at))
            .push(", ")
            .push_bind(after.id.as_str().to_owned())
            .push(")");
    }
    // One more than asked says whether a next page exists.
    sql.push(" ORDER BY created_at DESC, id DESC LIMIT ")
        .push_bind(i64::from(query.limit) + 1);
    Some(sql)
}

/// The page of `query` from the runs its [`run_query`] found.
pub fn run_page(query: &RunQuery, mut runs: Vec<RunSummary>) -> RunPage {
    let more = runs.len() > query.limit as usize;
    runs.truncate(query.limit as usize);
    let next = more.then(|| runs.last().map(RunCursor::after)).flatten();
    RunPage { runs, next }
}

/// The statement of [`EventLog::claimable_runs`](crate::EventLog::claimable_runs) for
/// `query` at `now` (in the backend's time form): [`RUN_COLUMNS`] of queued or running
/// runs, oldest first.
pub fn claimable_query<DB, T>(query: &ClaimQuery, now: T) -> QueryBuilder<DB>
where
    DB: Database,
    <DB as Database>::Arguments: Default,
    T: for<'t> Encode<'t, DB> + Type<DB>,
    String: for<'t> Encode<'t, DB> + Type<DB>,
    i64: for<'t> Encode<'t, DB> + Type<DB>,
    &'static str: for<'t> Encode<'t, DB> + Type<DB>,
{
    let mut sql = QueryBuilder::<DB>::new(format!("SELECT {RUN_COLUMNS} FROM runs WHERE 1 = 1"));
    push_statuses(&mut sql, &CLAIMABLE);
    match &query.leases {
        ClaimLeases::Free => {
            sql.push(" AND (lease_expires_at IS NULL OR lease_expires_at <= ")
                .push_bind(now)
                .push(")");
        }
        ClaimLeases::LiveHeldBySuffix(suffix) => {
            // `length` and `substr` count characters on SQLite and Postgres alike.
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
    sql
}

/// ` AND status IN (…)` for a non-empty set of statuses.
pub fn push_statuses<DB>(sql: &mut QueryBuilder<DB>, statuses: &[RunStatus])
where
    DB: Database,
    &'static str: for<'t> Encode<'t, DB> + Type<DB>,
{
    sql.push(" AND status IN (");
    let mut list = sql.separated(", ");
    for status in statuses {
        list.push_bind(status.as_str());
    }
    list.push_unseparated(")");
}
