//! Column forms: times as nanoseconds since the epoch, seqs and tokens as BIGINT, and
//! rows decoded back into protocol values by `toren_store::backend::rows`. Anything that
//! does not decode becomes `Error::CorruptEvent` or `Error::CorruptRun`, naming the run
//! (and seq).

use jiff::Timestamp;
use toren_protocol::Event;
use toren_store::{Result, backend};

/// A time as stored: nanoseconds since the Unix epoch, saturating at the ends of BIGINT
/// (the years 1677 and 2262; only a lease with an absurd ttl goes that far).
pub(crate) fn nanos(at: Timestamp) -> i64 {
    let ns = at.as_nanosecond();
    i64::try_from(ns).unwrap_or(if ns < 0 { i64::MIN } else { i64::MAX })
}

pub(crate) use toren_store::backend::rows::{lease, status, to_sql, unsigned};

/// The event stored in row `(run_id, seq)`, whose payload must name that run and seq.
pub(crate) fn decode_event(run_id: &str, seq: i64, payload: &str) -> Result<Event> {
    backend::rows::event_of_row(run_id, seq, serde_json::from_str(payload))
}

/// The columns [`RunRow`] decodes, as a literal for `concat!` (statements are fixed text).
macro_rules! run_columns {
    () => {
        "id, agent, status, created_at, updated_at, last_seq, lease_holder, lease_expires_at"
    };
}
pub(crate) use run_columns;

/// A run's summary row, times as nanoseconds.
pub(crate) type RunRow = backend::rows::RunRow<i64>;

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn times_round_trip_to_the_nanosecond_and_saturate() {
        let at = Timestamp::new(1_700_000_000, 123_456_789).unwrap();
        assert_eq!(backend::rows::timestamp("r", "at", &nanos(at)).unwrap(), at);
        assert_eq!(nanos(Timestamp::MAX), i64::MAX);
        assert_eq!(nanos(Timestamp::MIN), i64::MIN);
    }
}
