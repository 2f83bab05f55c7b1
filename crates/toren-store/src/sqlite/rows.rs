//! Turning SQLite rows back into protocol values, and values into the column forms the
//! schema uses. Anything that does not decode becomes [`Error::CorruptEvent`] or
//! [`Error::CorruptRun`], naming the run (and seq) so a person can find the row.

use jiff::Timestamp;
use toren_protocol::{Event, RunId, RunStatus};

use crate::{Error, LeaseInfo, Result, RunSummary};

/// A timestamp as stored: RFC 3339, UTC, always nine fractional digits, so that text order
/// is time order (`ORDER BY created_at`).
pub(super) fn stamp(at: Timestamp) -> String {
    format!("{at:.9}")
}

/// A seq as an SQLite integer. Seqs never come near `i64::MAX`; a larger `after_seq` from a
/// caller means "after everything", which saturating keeps true.
pub(super) fn seq_to_sql(seq: u64) -> i64 {
    i64::try_from(seq).unwrap_or(i64::MAX)
}

/// A lease token as an SQLite integer. Tokens grow by one per acquisition of a run, so
/// `i64::MAX` is out of reach.
pub(super) fn token_to_sql(token: u64) -> i64 {
    i64::try_from(token).unwrap_or(i64::MAX)
}

pub(super) fn status(run_id: &str, text: &str) -> Result<RunStatus> {
    text.parse()
        .map_err(|e| corrupt_run(run_id, format!("{e}")))
}

pub(super) fn last_seq(run_id: &str, value: i64) -> Result<u64> {
    u64::try_from(value).map_err(|_| corrupt_run(run_id, format!("negative last_seq {value}")))
}

/// A lease token column: `0` before the run's first lease.
pub(super) fn token(run_id: &str, value: i64) -> Result<u64> {
    u64::try_from(value).map_err(|_| corrupt_run(run_id, format!("negative lease_token {value}")))
}

/// The `lease_holder` and `lease_expires_at` columns: both set while a lease is held,
/// both null otherwise.
pub(super) fn lease(
    run_id: &str,
    holder: Option<String>,
    expires_at: Option<String>,
) -> Result<Option<LeaseInfo>> {
    match (holder, expires_at) {
        (Some(holder), Some(at)) => Ok(Some(LeaseInfo {
            holder,
            expires_at: timestamp(run_id, "lease_expires_at", &at)?,
        })),
        (None, None) => Ok(None),
        (Some(_), None) | (None, Some(_)) => Err(corrupt_run(
            run_id,
            "it has a lease holder without an expiry or an expiry without a holder".to_owned(),
        )),
    }
}

fn timestamp(run_id: &str, column: &str, text: &str) -> Result<Timestamp> {
    text.parse()
        .map_err(|e| corrupt_run(run_id, format!("{column} `{text}` is not a timestamp: {e}")))
}

fn corrupt_run(run_id: &str, reason: String) -> Error {
    Error::CorruptRun {
        run_id: run_id.to_owned(),
        reason,
    }
}

/// `SELECT run_id, seq, payload FROM events`.
#[derive(sqlx::FromRow)]
pub(super) struct EventRow {
    run_id: String,
    seq: i64,
    payload: String,
}

impl EventRow {
    pub(super) fn decode(self) -> Result<Event> {
        decode_event(&self.run_id, self.seq, &self.payload)
    }
}

/// The event stored in the row `(run_id, seq)` with `payload`, which must name that run and
/// seq.
pub(super) fn decode_event(run_id: &str, seq: i64, payload: &str) -> Result<Event> {
    let corrupt = |reason: String| Error::CorruptEvent {
        run_id: run_id.to_owned(),
        seq: u64::try_from(seq).unwrap_or(0),
        reason,
    };
    let event = super::decode::event(payload)
        .map_err(|e| corrupt(format!("not an event of a known format: {e}")))?;
    if event.run_id.as_str() != run_id || Ok(event.seq) != u64::try_from(seq) {
        return Err(corrupt(format!(
            "its payload names run {} event #{} instead",
            event.run_id, event.seq
        )));
    }
    Ok(event)
}

/// `SELECT id, agent, status, created_at, updated_at, last_seq, lease_holder,
/// lease_expires_at FROM runs`.
#[derive(sqlx::FromRow)]
pub(super) struct RunRow {
    id: String,
    agent: String,
    status: String,
    created_at: String,
    updated_at: String,
    last_seq: i64,
    lease_holder: Option<String>,
    lease_expires_at: Option<String>,
}

impl RunRow {
    pub(super) fn decode(self) -> Result<RunSummary> {
        let id = &self.id;
        Ok(RunSummary {
            id: id
                .parse::<RunId>()
                .map_err(|e| corrupt_run(id, format!("{e}")))?,
            status: status(id, &self.status)?,
            created_at: timestamp(id, "created_at", &self.created_at)?,
            updated_at: timestamp(id, "updated_at", &self.updated_at)?,
            last_seq: last_seq(id, self.last_seq)?,
            lease: lease(id, self.lease_holder, self.lease_expires_at)?,
            agent: self.agent,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn stamps_sort_as_text_in_time_order() {
        let whole = Timestamp::from_second(1_700_000_000).unwrap();
        let later = Timestamp::new(1_700_000_000, 500_000_000).unwrap();
        assert_eq!(stamp(whole), "2023-11-14T22:13:20.000000000Z");
        assert!(stamp(whole) < stamp(later));
        assert_eq!(stamp(later).parse::<Timestamp>().unwrap(), later);
    }
}
