//! Reading a run's log in few round trips ([`EventLog::read`](crate::EventLog::read)).
//!
//! sqlx runs SQLite on a thread of its own and hands every result row to the caller
//! through a channel: a row per event costs a copy of each value and a hand-off between
//! threads, which made up most of the time to resume a long run. So the rows come in
//! chunks instead, each one result row: the chunk's seqs, its payloads' byte lengths and
//! its payloads concatenated (`group_concat`, all three fed the rows in the same order).
//! Each payload is then decoded on its own from its slice, with the checks and errors of a
//! row read alone (`rows.rs`), so a corrupt row is still named by its seq.
//!
//! A first statement plans the chunks from the payloads' lengths alone (SQLite reads a
//! length without the text), so that a chunk holds about [`CHUNK_BYTES`] — at least one
//! event, however large — and never nears SQLite's limit on one value. Everything runs in
//! one read transaction: one snapshot of the log.

use sqlx::{Row, SqliteConnection};
use toren_protocol::{Event, RunId};

use super::rows::{decode_event, to_sql};
use crate::{Error, Result};

/// About how many payload bytes one chunk carries. Big enough that the per-statement cost
/// is small against the copying, small enough to keep each chunk's one string cheap to
/// allocate (measured: `cargo run --release -p toren-bench -- replay`).
pub(super) const CHUNK_BYTES: usize = 1 << 20;

/// The events of `run_id` after `after_seq`, in order.
pub(super) async fn events_after(
    conn: &mut SqliteConnection,
    run_id: &RunId,
    after_seq: u64,
) -> Result<Vec<Event>> {
    let (seqs, lengths) = sqlx::query_as::<_, (Option<String>, Option<String>)>(
        "SELECT group_concat(seq), group_concat(octet_length(payload))
         FROM events WHERE run_id = ? AND seq > ?",
    )
    .bind(run_id.as_str())
    .bind(to_sql(after_seq))
    .fetch_one(&mut *conn)
    .await?;
    let planned = rows_of(run_id, seqs.as_deref(), lengths.as_deref())?;
    let mut events = Vec::with_capacity(planned.len());
    for (first, last) in chunks(&planned, CHUNK_BYTES) {
        read_chunk(conn, run_id, first, last, &mut events).await?;
    }
    Ok(events)
}

/// Reads the events `first..=last` of `run_id` in one statement and appends them to `out`.
async fn read_chunk(
    conn: &mut SqliteConnection,
    run_id: &RunId,
    first: i64,
    last: i64,
    out: &mut Vec<Event>,
) -> Result<()> {
    let row = sqlx::query(
        "SELECT group_concat(seq), group_concat(octet_length(payload)), group_concat(payload, '')
         FROM (SELECT seq, payload FROM events
               WHERE run_id = ? AND seq >= ? AND seq <= ? ORDER BY seq)",
    )
    .bind(run_id.as_str())
    .bind(first)
    .bind(last)
    .fetch_one(&mut *conn)
    .await?;
    let seqs: Option<&str> = row.try_get(0)?;
    let lengths: Option<&str> = row.try_get(1)?;
    let payloads: Option<&str> = row.try_get(2)?;
    let rows = rows_of(run_id, seqs, lengths)?;
    let payloads = payloads.unwrap_or_default();
    let mut slices = Vec::with_capacity(rows.len());
    let mut at: usize = 0;
    for &(seq, length) in &rows {
        let payload = at
            .checked_add(length)
            .and_then(|end| payloads.get(at..end))
            .ok_or_else(|| corrupt(run_id, seq, "its payload's length does not match it"))?;
        slices.push((seq, payload));
        at += length;
    }
    // `ORDER BY seq` orders the rows as fed to the aggregates; sorting again only makes
    // certain of it.
    if !slices.is_sorted_by_key(|&(seq, _)| seq) {
        slices.sort_by_key(|&(seq, _)| seq);
    }
    for (seq, payload) in slices {
        out.push(decode_event(run_id.as_str(), seq, payload)?);
    }
    Ok(())
}

/// The `(seq, payload bytes)` of each row, from the comma-separated seqs and lengths
/// `group_concat` gave (both `NULL`: no rows).
fn rows_of(run_id: &RunId, seqs: Option<&str>, lengths: Option<&str>) -> Result<Vec<(i64, usize)>> {
    let (Some(seqs), Some(lengths)) = (seqs, lengths) else {
        return Ok(Vec::new());
    };
    let mut rows = Vec::new();
    let mut lengths = lengths.split(',');
    for seq in seqs.split(',') {
        let seq: i64 = seq
            .parse()
            .map_err(|_| corrupt(run_id, 0, &format!("a seq `{seq}` is not a number")))?;
        let length = lengths
            .next()
            .and_then(|l| l.parse::<usize>().ok())
            .ok_or_else(|| corrupt(run_id, seq, "its payload has no length"))?;
        rows.push((seq, length));
    }
    Ok(rows)
}

/// Consecutive `(first seq, last seq)` ranges of `rows` (in seq order), each of at most
/// `budget` payload bytes, or of one row larger than that.
pub(super) fn chunks(rows: &[(i64, usize)], budget: usize) -> Vec<(i64, i64)> {
    let mut sorted = rows.to_vec();
    if !sorted.is_sorted_by_key(|&(seq, _)| seq) {
        sorted.sort_by_key(|&(seq, _)| seq);
    }
    let mut ranges: Vec<(i64, i64)> = Vec::new();
    let mut bytes = 0;
    for (i, &(seq, length)) in sorted.iter().enumerate() {
        match ranges.last_mut() {
            Some(range) if i > 0 && bytes + length <= budget => {
                range.1 = seq;
                bytes += length;
            }
            _ => {
                ranges.push((seq, seq));
                bytes = length;
            }
        }
    }
    ranges
}

fn corrupt(run_id: &RunId, seq: i64, reason: &str) -> Error {
    Error::CorruptEvent {
        run_id: run_id.as_str().to_owned(),
        seq: u64::try_from(seq).unwrap_or(0),
        reason: reason.to_owned(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn chunks_hold_the_budget_or_one_larger_row() {
        let rows = [
            (1, 40),
            (2, 50),
            (3, 20),
            (4, 200),
            (5, 10),
            (6, 90),
            (7, 1),
        ];
        assert_eq!(
            chunks(&rows, 100),
            vec![(1, 2), (3, 3), (4, 4), (5, 6), (7, 7)]
        );
        assert_eq!(chunks(&rows, 1000), vec![(1, 7)]);
        assert_eq!(chunks(&[], 100), Vec::<(i64, i64)>::new());
    }

    #[test]
    fn chunks_follow_seq_order_whatever_the_rows_order() {
        assert_eq!(
            chunks(&[(3, 60), (1, 60), (2, 30)], 100),
            vec![(1, 2), (3, 3)]
        );
    }
}
