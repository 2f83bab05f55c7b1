//! The pool in the worker registry: it registers with its first heartbeat, heartbeats on
//! its own task every third of the lease ttl with the runs it drives and those it passed
//! over (with why), and deregisters when
//! it stops. A heartbeat that fails is logged once (and once more when one succeeds
//! again); the pool goes on driving either way — the registry informs people, leases
//! decide who drives a run.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use jiff::Timestamp;
use tokio_util::sync::CancellationToken;
use toren_store::{PassedOver, WorkerBeat, WorkerRegistry};

use super::{Book, lock};

/// How a pool appears in the registry.
#[derive(Clone, Debug)]
pub struct Identity {
    /// The worker id, kept across restarts.
    pub id: String,
    /// This process's lease holder name.
    pub instance: String,
    pub host: String,
    /// The workspace volume served.
    pub volume: Option<String>,
    pub concurrency: u32,
    pub started_at: Timestamp,
}

/// The heartbeat task.
pub(crate) struct Beats {
    stop: CancellationToken,
    task: tokio::task::JoinHandle<()>,
    registry: Arc<dyn WorkerRegistry>,
    identity: Identity,
}

impl Beats {
    /// Starts heartbeating `identity` every `every`, the runs from `book`.
    pub(crate) fn start(
        registry: Arc<dyn WorkerRegistry>,
        identity: Identity,
        book: Arc<Mutex<Book>>,
        every: Duration,
    ) -> Self {
        let stop = CancellationToken::new();
        let task = tokio::spawn(beat(
            Arc::clone(&registry),
            identity.clone(),
            book,
            every.max(Duration::from_millis(100)),
            stop.clone(),
        ));
        Self {
            stop,
            task,
            registry,
            identity,
        }
    }

    /// Stops heartbeating and deregisters.
    pub(crate) async fn stop(self) {
        self.stop.cancel();
        let _ = self.task.await;
        let Identity { id, instance, .. } = &self.identity;
        if let Err(e) = self.registry.deregister_worker(id, instance).await {
            tracing::warn!(worker = %id, "could not deregister the worker: {e}");
        }
    }
}

async fn beat(
    registry: Arc<dyn WorkerRegistry>,
    identity: Identity,
    book: Arc<Mutex<Book>>,
    every: Duration,
    stop: CancellationToken,
) {
    if let Ok(live) = registry.live_workers(every * 3).await
        && let Some(other) = live
            .iter()
            .find(|w| w.beat.id == identity.id && w.beat.instance != identity.instance)
    {
        tracing::warn!(
            worker = %identity.id,
            other = %other.beat.instance,
            "another live process is registered under this worker id (or this worker was \
             restarted within its heartbeat's lifetime); give each process of one \
             TOREN_HOME its own TOREN_WORKER_ID"
        );
    }
    let mut ticks = tokio::time::interval(every);
    let mut failing = false;
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = ticks.tick() => {}
        }
        let (mut runs, mut passed_over): (Vec<_>, Vec<_>) = {
            let book = lock(&book);
            let passed_over = book.skip.iter().map(|(run, reason)| PassedOver {
                run: run.clone(),
                reason: reason.clone(),
            });
            (
                book.driving.iter().cloned().collect(),
                passed_over.collect(),
            )
        };
        runs.sort();
        passed_over.sort_by(|a, b| a.run.cmp(&b.run));
        let beat = WorkerBeat {
            id: identity.id.clone(),
            instance: identity.instance.clone(),
            host: identity.host.clone(),
            volume: identity.volume.clone(),
            concurrency: identity.concurrency,
            started_at: identity.started_at,
            runs,
            passed_over,
        };
        match registry.heartbeat_worker(&beat).await {
            Ok(_) if failing => {
                failing = false;
                tracing::info!(worker = %identity.id, "the worker's heartbeat is recorded again");
            }
            Ok(_) => {}
            Err(e) if !failing => {
                failing = true;
                tracing::warn!(
                    worker = %identity.id,
                    "cannot record the worker's heartbeat ({e}); `toren workers list` may \
                     not show it until the database answers"
                );
            }
            Err(_) => {}
        }
    }
}
