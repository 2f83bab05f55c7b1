//! Rows back into protocol values, whatever the backend's column forms: a time is any
//! [`StoredTime`] (SQLite's RFC 3339 text, Postgres's nanoseconds), seqs and tokens are
//! 64-bit integers. Anything that does not decode becomes [`Error::CorruptEvent`] or
//! [`Error::CorruptRun`], naming the run (and seq) so a person can find the row.

use jiff::Timestamp;
use toren_protocol::{Event, RunId, RunStatus};

use crate::{Error, LeaseInfo, PassedOver, Result, RunCounts, RunSummary, WorkerBeat, WorkerInfo};

/// A time as a backend stores it.
pub trait StoredTime {
    /// The time, or why this value is none (after the column's name: "`x` is not a
    /// timestamp: …").
    fn to_timestamp(&self) -> std::result::Result<Timestamp, String>;
}

/// RFC 3339 text (SQLite).
impl StoredTime for String {
    fn to_timestamp(&self) -> std::result::Result<Timestamp, String> {
        self.parse()
            .map_err(|e| format!("`{self}` is not a timestamp: {e}"))
    }
}

/// Nanoseconds since the Unix epoch (Postgres).
impl StoredTime for i64 {
    fn to_timestamp(&self) -> std::result::Result<Timestamp, String> {
        Timestamp::from_nanosecond(i128::from(*self))
            .map_err(|e| format!("{self} is not a time: {e}"))
    }
}

/// [`Error::CorruptRun`] of `run_id`.
pub fn corrupt_run(run_id: &str, reason: String) -> Error {
    Error::CorruptRun {
        run_id: run_id.to_owned(),
        reason,
    }
}

/// The time in `column` of run `run_id`'s row.
pub fn timestamp(run_id: &str, column: &str, value: &impl StoredTime) -> Result<Timestamp> {
    value
        .to_timestamp()
        .map_err(|reason| corrupt_run(run_id, format!("{column} {reason}")))
}

/// A run's `status` column.
pub fn status(run_id: &str, text: &str) -> Result<RunStatus> {
    text.parse()
        .map_err(|e| corrupt_run(run_id, format!("{e}")))
}

/// A seq or token column (`last_seq`, `lease_token`), never negative.
pub fn unsigned(run_id: &str, column: &str, value: i64) -> Result<u64> {
    u64::try_from(value).map_err(|_| corrupt_run(run_id, format!("negative {column} {value}")))
}

/// A seq or token as a 64-bit integer column. Neither comes near `i64::MAX`; a larger
/// `after_seq` from a caller means "after everything", which saturating keeps true.
pub fn to_sql(value: u64) -> i64 {
    i64::try_from(value).unwrap_or(i64::MAX)
}

/// The `lease_holder` and `lease_expires_at` columns: both set while a lease is held,
/// both null otherwise.
pub fn lease<T: StoredTime>(
    run_id: &str,
    holder: Option<String>,
    expires_at: Option<T>,
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

/// The event stored in the row `(run_id, seq)`, `decoded` from its payload, which must
/// name that run and seq.
pub fn event_of_row(
    run_id: &str,
    seq: i64,
    decoded: std::result::Result<Event, impl std::fmt::Display>,
) -> Result<Event> {
    let corrupt = |reason: String| Error::CorruptEvent {
        run_id: run_id.to_owned(),
        seq: u64::try_from(seq).unwrap_or(0),
        reason,
    };
    let event = decoded.map_err(|e| corrupt(format!("not an event of a known format: {e}")))?;
    if event.run_id.as_str() != run_id || Ok(event.seq) != u64::try_from(seq) {
        return Err(corrupt(format!(
            "its payload names run {} event #{} instead",
            event.run_id, event.seq
        )));
    }
    Ok(event)
}

/// The columns of a run's summary, `SELECT id, agent, status, created_at, updated_at,
/// last_seq, lease_holder, lease_expires_at FROM runs` ([`RUN_COLUMNS`]).
#[derive(sqlx::FromRow)]
pub struct RunRow<T> {
    pub id: String,
    pub agent: String,
    pub status: String,
    pub created_at: T,
    pub updated_at: T,
    pub last_seq: i64,
    pub lease_holder: Option<String>,
    pub lease_expires_at: Option<T>,
}

/// The columns [`RunRow`] decodes, in its order.
pub const RUN_COLUMNS: &str =
    "id, agent, status, created_at, updated_at, last_seq, lease_holder, lease_expires_at";

impl<T: StoredTime> RunRow<T> {
    pub fn decode(self) -> Result<RunSummary> {
        let id = &self.id;
        Ok(RunSummary {
            id: id
                .parse::<RunId>()
                .map_err(|e| corrupt_run(id, format!("{e}")))?,
            status: status(id, &self.status)?,
            created_at: timestamp(id, "created_at", &self.created_at)?,
            updated_at: timestamp(id, "updated_at", &self.updated_at)?,
            last_seq: unsigned(id, "last_seq", self.last_seq)?,
            lease: lease(id, self.lease_holder, self.lease_expires_at)?,
            agent: self.agent,
        })
    }
}

/// [`RunCounts`] from rows of `(status, runs, claimable runs)`, one per status.
pub fn run_counts(rows: impl IntoIterator<Item = (String, i64, i64)>) -> Result<RunCounts> {
    let mut counts = RunCounts::default();
    for (status_text, runs, claimable) in rows {
        let status = status(&format!("(any with status `{status_text}`)"), &status_text)?;
        counts
            .by_status
            .insert(status, u64::try_from(runs).unwrap_or(0));
        counts.claimable += u64::try_from(claimable).unwrap_or(0);
    }
    Ok(counts)
}

/// A worker's passed-over runs as stored: a JSON array of `{"run", "reason"}`.
pub fn passed_over_json(passed_over: &[PassedOver]) -> String {
    serde_json::to_string(passed_over).unwrap_or_else(|_| "[]".to_owned())
}

/// Worker `id`'s passed-over runs from their stored JSON.
pub fn passed_over_of(id: &str, text: &str) -> Result<Vec<PassedOver>> {
    serde_json::from_str(text).map_err(|e| Error::CorruptWorker {
        id: id.to_owned(),
        reason: format!("passed_over is not a list of runs and reasons: {e}"),
    })
}

/// A worker's row, `SELECT id, instance, host, volume, concurrency, started_at,
/// heartbeat_at, runs, passed_over FROM workers`, its `runs` already a list of strings.
pub struct WorkerRow<T> {
    pub id: String,
    pub instance: String,
    pub host: String,
    pub volume: Option<String>,
    pub concurrency: i64,
    pub started_at: T,
    pub heartbeat_at: T,
    pub runs: Vec<String>,
    /// As [`passed_over_json`] wrote it.
    pub passed_over: String,
}

impl<T: StoredTime> WorkerRow<T> {
    pub fn decode(self) -> Result<WorkerInfo> {
        let id = self.id;
        let corrupt = |reason: String| Error::CorruptWorker {
            id: id.clone(),
            reason,
        };
        let time = |column: &str, value: &T| {
            value
                .to_timestamp()
                .map_err(|reason| corrupt(format!("{column} {reason}")))
        };
        let runs = self
            .runs
            .iter()
            .map(|run| run.parse::<RunId>().map_err(|e| corrupt(format!("{e}"))))
            .collect::<Result<Vec<_>>>()?;
        Ok(WorkerInfo {
            heartbeat_at: time("heartbeat_at", &self.heartbeat_at)?,
            beat: WorkerBeat {
                concurrency: u32::try_from(self.concurrency)
                    .map_err(|_| corrupt(format!("concurrency {}", self.concurrency)))?,
                started_at: time("started_at", &self.started_at)?,
                passed_over: passed_over_of(&id, &self.passed_over)?,
                id,
                instance: self.instance,
                host: self.host,
                volume: self.volume,
                runs,
            },
        })
    }
}
