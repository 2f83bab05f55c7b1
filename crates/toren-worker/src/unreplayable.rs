//! Runs whose event log cannot be folded (a corrupt log, or one written before a fix that
//! now keeps such logs from being written). Such a run cannot be driven, and it must not pass
//! for a resumable one: it is recorded as failed, with the reason, so every surface shows it.

use std::time::Duration;

use toren_agent::RunState;
use toren_protocol::{Event, EventKind, RunFailed, RunId, RunStatus};
use toren_store::{EventLog, Lease};

use crate::{Error, holder};

/// Why the run's log cannot be replayed.
pub(crate) fn reason(error: &toren_agent::Error) -> String {
    format!("the run's event log cannot be replayed: {error}")
}

/// What recording a log as unreplayable needs of it: where it ends, and whether its last
/// event ends the run. Taken before the events are folded (the fold takes them).
#[derive(Clone, Copy, Debug)]
pub(crate) struct LogEnd {
    last_seq: u64,
    ended: bool,
}

impl LogEnd {
    pub(crate) fn of(events: &[Event]) -> Self {
        Self {
            last_seq: events.last().map_or(0, |e| e.seq),
            ended: events
                .last()
                .and_then(|e| e.kind.status_after())
                .is_some_and(RunStatus::is_terminal),
        }
    }
}

/// Appends `run_failed` with the reason after the log's end, under `lease`. Does nothing
/// when the log already ends the run.
pub(crate) async fn record(
    store: &dyn EventLog,
    lease: &Lease,
    end: LogEnd,
    error: &toren_agent::Error,
) -> Result<String, Error> {
    let output = reason(error);
    if !end.ended {
        let kind = EventKind::RunFailed(RunFailed {
            error: output.clone(),
        });
        store.append(lease, end.last_seq, vec![kind]).await?;
        tracing::error!(run = %lease.run_id, "{output}");
    }
    Ok(output)
}

/// Takes the run's lease, as a driver would: when no live process holds it, or its holder
/// is provably a process that is gone.
pub(crate) async fn acquire(
    store: &dyn EventLog,
    run: &RunId,
    holder: &str,
    ttl: Duration,
) -> Result<Lease, Error> {
    match store.acquire_lease(run, holder, ttl).await {
        Err(toren_store::Error::Leased { holder: dead, .. }) if holder::is_gone(&dead) => {
            tracing::info!(run = %run, %dead, "taking over the lease of a process that is gone");
            Ok(store.take_over_lease(run, &dead, holder, ttl).await?)
        }
        other => Ok(other?),
    }
}

/// Checks that the run's log folds. If it does not and nobody drives the run, records the
/// run as failed (with the reason) and returns the reason; if a live process drives it,
/// returns the reason without writing (that process will record it). `None`: the log folds.
pub async fn fail_if_unreplayable(
    store: &dyn EventLog,
    run: &RunId,
    holder: &str,
    ttl: Duration,
) -> Result<Option<String>, Error> {
    let events = store.read(run, 0).await?;
    let end = LogEnd::of(&events);
    let Err(error) = RunState::from_log_with_history(&[], events) else {
        return Ok(None);
    };
    if end.ended {
        return Ok(Some(reason(&error)));
    }
    let lease = match acquire(store, run, holder, ttl).await {
        Ok(lease) => lease,
        Err(Error::Store(
            toren_store::Error::Leased { .. } | toren_store::Error::RunEnded { .. },
        )) => {
            return Ok(Some(reason(&error)));
        }
        Err(e) => return Err(e),
    };
    // Read again under the lease: the log may have moved since.
    let events = store.read(run, 0).await?;
    let end = LogEnd::of(&events);
    let output = match RunState::from_log_with_history(&[], events) {
        Ok(_) => None,
        Err(error) => Some(record(store, &lease, end, &error).await?),
    };
    if let Err(e) = store.release_lease(&lease).await {
        tracing::debug!(run = %run, "could not release the lease: {e}");
    }
    Ok(output)
}
