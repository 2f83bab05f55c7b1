//! The lease heartbeat that runs beside a driven run (`driver.rs` spawns it and stops the
//! run's work when it says so).
//!
//! It renews the lease every third of its lifetime. When the store says the lease was lost
//! (taken over, released), the run must stop at once. When renewing fails for any other
//! reason (a busy or unreachable database), it tries again every fifth of a beat, each try
//! bounded in time — but only while more than one beat of the lease is left: after that,
//! another process may soon take the run over, so the heartbeat tells the driver to stop
//! the run's work (dropping it kills a running command) a full beat before the lease could
//! expire, rather than let two processes drive one run at once. A rewind renews its lease
//! the same way while it works ([`renewing`]).

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::oneshot;
use tokio::time::Instant;
use toren_store::{EventLog, Lease};

use crate::Error;

/// Why the heartbeat stopped the run.
#[derive(Debug)]
pub(crate) enum Stop {
    /// Another process took the run over, or the lease was released.
    Lost,
    /// The lease could not be renewed and would expire within one beat.
    Expiring {
        /// The last renewal's failure.
        error: String,
    },
}

impl Stop {
    /// The error the driver stops with.
    pub(crate) fn into_error(self, lease: &Lease) -> Error {
        let run = lease.run_id.to_string();
        match self {
            Self::Lost => Error::LeaseLost { run },
            Self::Expiring { error } => Error::LeaseExpiring { run, error },
        }
    }
}

/// Renews `lease` (lasting `ttl`) until the run ends or the task is aborted; sends on
/// `stop` when the run must stop. Returns without sending when the run ended.
pub(crate) async fn heartbeat(
    store: Arc<dyn EventLog>,
    lease: Lease,
    ttl: Duration,
    stop: oneshot::Sender<Stop>,
) {
    beat(store.as_ref(), lease, ttl, stop).await;
}

/// Runs `work` with `lease` (lasting `ttl`) renewed beside it, in the same task: what a
/// rewind does under its lease (the append, then a restore that may take longer than the
/// lease lasts). When the lease is lost or about to expire unrenewed, `work` is dropped
/// and the error returned, as the driver does with a run's work.
pub(crate) async fn renewing<T>(
    store: &dyn EventLog,
    lease: &Lease,
    ttl: Duration,
    work: impl Future<Output = Result<T, Error>>,
) -> Result<T, Error> {
    let (tx, mut rx) = oneshot::channel();
    let beat = beat(store, lease.clone(), ttl, tx);
    tokio::pin!(beat);
    tokio::pin!(work);
    tokio::select! {
        biased;
        () = &mut beat => match rx.try_recv() {
            Ok(stop) => Err(stop.into_error(lease)),
            // The run ended meanwhile (only this holder could end it): nothing to renew.
            Err(_) => work.await,
        },
        out = &mut work => out,
    }
}

async fn beat(store: &dyn EventLog, lease: Lease, ttl: Duration, stop: oneshot::Sender<Stop>) {
    let beat = ttl / 3;
    let retry = beat / 5;
    let mut lease = lease;
    let now = Instant::now();
    // When the lease runs out at the latest, by this process's monotonic clock: a renewal
    // asked for at `t` holds until `t + ttl` or later (the store counts from when it ran).
    let mut expires = now + remaining(&lease, ttl);
    let mut next = expires.checked_sub(2 * beat).unwrap_or(now).max(now);
    let mut failure: Option<String> = None;
    loop {
        tokio::time::sleep_until(next).await;
        let asked = Instant::now();
        let give_up = expires.checked_sub(beat).unwrap_or(asked);
        if asked >= give_up {
            let error = failure.unwrap_or_else(|| {
                "the lease was about to expire before it could be renewed".to_owned()
            });
            let _ = stop.send(Stop::Expiring { error });
            return;
        }
        let error = match tokio::time::timeout_at(give_up, store.renew_lease(&lease, ttl)).await {
            Ok(Ok(renewed)) => {
                if failure.take().is_some() {
                    tracing::info!(run = %lease.run_id, "renewed the lease again");
                }
                lease = renewed;
                expires = asked + ttl;
                next = asked + beat;
                continue;
            }
            Ok(Err(toren_store::Error::LeaseLost { .. })) => {
                let _ = stop.send(Stop::Lost);
                return;
            }
            // Only this holder can end the run (appends are fenced): it just did, and the
            // driver is returning its outcome. Nothing is lost.
            Ok(Err(toren_store::Error::RunEnded { .. })) => return,
            Ok(Err(e)) => e.to_string(),
            Err(_) => format!(
                "the database did not answer within {}",
                whole_seconds(give_up - asked)
            ),
        };
        let left = expires.saturating_duration_since(Instant::now());
        tracing::warn!(
            run = %lease.run_id,
            "could not renew the lease ({error}); trying again, the lease has {} left",
            whole_seconds(left)
        );
        failure = Some(error);
        next = (Instant::now() + retry).min(give_up);
    }
}

/// How long `lease` has left by this process's wall clock, at most `ttl`.
fn remaining(lease: &Lease, ttl: Duration) -> Duration {
    let left = lease.expires_at.duration_since(jiff::Timestamp::now());
    Duration::try_from(left).unwrap_or(Duration::ZERO).min(ttl)
}

/// `3 s`, rounded up, for people.
fn whole_seconds(d: Duration) -> String {
    let secs = d.as_secs() + u64::from(d.subsec_nanos() > 0);
    format!("{secs} s")
}
