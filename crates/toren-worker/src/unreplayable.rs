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

/// Appends `run_failed` with the reason after the last of `events`, under `lease`. Does
/// nothing when the log already ends the run.
pub(crate) async fn record(
    store: &dyn EventLog,
    lease: &Lease,
    events: &[Event],
    error: &toren_agent::Error,
) -> Result<String, Error> {
    let output = reason(error);
    if !has_ended(events) {
        let after = events.last().map_or(0, |e| e.seq);
        let kind = EventKind::RunFailed(RunFailed {
            error: output.clone(),
        });
        store.append(lease, after, vec![kind]).await?;
        tracing::error!(run = %lease.run_id, "{output}");
    }
    Ok(output)
}

/// Whether the log's last event ends the run.
fn has_ended(events: &[Event]) -> bool {
    events
        .last()
        .and_then(|e| e.kind.status_after())
        .is_some_and(RunStatus::is_terminal)
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
    let Err(error) = RunState::from_events(&events) else {
        return Ok(None);
    };
    if has_ended(&events) {
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
    let output = match RunState::from_events(&events) {
        Ok(_) => None,
        Err(error) => Some(record(store, &lease, &events, &error).await?),
    };
    if let Err(e) = store.release_lease(&lease).await {
        tracing::debug!(run = %run, "could not release the lease: {e}");
    }
    Ok(output)
}
