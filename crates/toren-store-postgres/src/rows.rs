//! Column forms: times as nanoseconds since the epoch, seqs and tokens as BIGINT, and
//! rows decoded back into protocol values. Anything that does not decode becomes
//! [`Error::CorruptEvent`] or [`Error::CorruptRun`], naming the run (and seq).

use jiff::Timestamp;
use toren_protocol::{Event, RunId, RunStatus};
use toren_store::{Error, LeaseInfo, Result, RunSummary};

/// A time as stored: nanoseconds since the Unix epoch, saturating at the ends of BIGINT
/// (the years 1677 and 2262; only a lease with an absurd ttl goes that far).
pub(crate) fn nanos(at: Timestamp) -> i64 {
    let ns = at.as_nanosecond();
    i64::try_from(ns).unwrap_or(if ns < 0 { i64::MIN } else { i64::MAX })
}

pub(crate) fn timestamp(run_id: &str, column: &str, ns: i64) -> Result<Timestamp> {
    Timestamp::from_nanosecond(i128::from(ns))
        .map_err(|e| corrupt_run(run_id, format!("{column} {ns} is not a time: {e}")))
}

/// A seq or token as BIGINT; a larger `after_seq` from a caller means "after everything",
/// which saturating keeps true.
pub(crate) fn to_sql(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

pub(crate) fn from_sql(run_id: &str, column: &str, value: i64) -> Result<u64> {
    u64::try_from(value).map_err(|_| corrupt_run(run_id, format!("negative {column} {value}")))
}

pub(crate) fn status(run_id: &str, text: &str) -> Result<RunStatus> {
    text.parse()
        .map_err(|e| corrupt_run(run_id, format!("{e}")))
}

/// The `lease_holder` and `lease_expires_at` columns: both set while a lease is held.
pub(crate) fn lease(
    run_id: &str,
    holder: Option<String>,
    expires_at: Option<i64>,
) -> Result<Option<LeaseInfo>> {
    match (holder, expires_at) {
        (Some(holder), Some(at)) => Ok(Some(LeaseInfo {
            holder,
            expires_at: timestamp(run_id, "lease_expires_at", at)?,
        })),
        (None, None) => Ok(None),
        _ => Err(corrupt_run(
            run_id,
            "it has a lease holder without an expiry or an expiry without a holder".to_owned(),
        )),
    }
}

pub(crate) fn corrupt_run(run_id: &str, reason: String) -> Error {
    Error::CorruptRun {
        run_id: run_id.to_owned(),
        reason,
    }
}

/// The event stored in row `(run_id, seq)`, whose payload must name that run and seq.
pub(crate) fn decode_event(run_id: &str, seq: i64, payload: &str) -> Result<Event> {
    let corrupt = |reason: String| Error::CorruptEvent {
        run_id: run_id.to_owned(),
        seq: u64::try_from(seq).unwrap_or(0),
        reason,
    };
    let event: Event = serde_json::from_str(payload)
        .map_err(|e| corrupt(format!("not an event of a known format: {e}")))?;
    if event.run_id.as_str() != run_id || Ok(event.seq) != u64::try_from(seq) {
        return Err(corrupt(format!(
            "its payload names run {} event #{} instead",
            event.run_id, event.seq
        )));
    }
    Ok(event)
}

/// The columns [`RunRow`] decodes, as a literal for `concat!` (statements are fixed text).
macro_rules! run_columns {
    () => {
        "id, agent, status, created_at, updated_at, last_seq, lease_holder, lease_expires_at"
    };
}
pub(crate) use run_columns;

/// The same columns, for statements built at run time (`QueryBuilder`).
pub(crate) const RUN_COLUMNS: &str = run_columns!();

#[derive(sqlx::FromRow)]
pub(crate) struct RunRow {
    id: String,
    agent: String,
    status: String,
    created_at: i64,
    updated_at: i64,
    last_seq: i64,
    lease_holder: Option<String>,
    lease_expires_at: Option<i64>,
}

impl RunRow {
    pub(crate) fn decode(self) -> Result<RunSummary> {
        let id = &self.id;
        Ok(RunSummary {
            id: id
                .parse::<RunId>()
                .map_err(|e| corrupt_run(id, format!("{e}")))?,
            status: status(id, &self.status)?,
            created_at: timestamp(id, "created_at", self.created_at)?,
            updated_at: timestamp(id, "updated_at", self.updated_at)?,
            last_seq: from_sql(id, "last_seq", self.last_seq)?,
            lease: lease(id, self.lease_holder, self.lease_expires_at)?,
            agent: self.agent,
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_to_the_nanosecond_and_saturate() {
        let at = Timestamp::new(1_700_000_000, 123_456_789).unwrap();
        assert_eq!(timestamp("r", "at", nanos(at)).unwrap(), at);
        assert_eq!(nanos(Timestamp::MAX), i64::MAX);
        assert_eq!(nanos(Timestamp::MIN), i64::MIN);
    }
}
