//! Turning SQLite rows back into protocol values, and values into the column forms the
//! schema uses. Anything that does not decode becomes [`Error::CorruptEvent`] or
//! [`Error::CorruptRun`], naming the run (and seq) so a person can find the row.

use jiff::Timestamp;
use toren_protocol::Event;

use crate::{Result, backend};

/// A timestamp as stored: RFC 3339, UTC, always nine fractional digits, so that text order
/// is time order (`ORDER BY created_at`).
pub(super) fn stamp(at: Timestamp) -> String {
    format!("{at:.9}")
}

pub(super) use crate::backend::rows::{lease, status, to_sql, unsigned};

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
    backend::rows::event_of_row(run_id, seq, super::decode::event(payload))
}

/// A run's summary row, times as stamps.
pub(super) type RunRow = backend::rows::RunRow<String>;

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
