//! The run service's view of the worker processes: the live ones (what `toren workers
//! list` shows) and whether a waiting run's workspace volume has any live worker at all
//! (what `toren runs show` says when it has none), and which live workers passed a run
//! over and why (`toren runs show` again). Liveness is a registry heartbeat younger
//! than the lease ttl; leases, not this, decide who drives a run.

use toren_store::WorkerInfo;

use crate::{Error, Result, RunService, RunView};

impl RunService {
    /// The workers whose last heartbeat is younger than the lease ttl, by id; an error
    /// when this service has no worker registry.
    pub async fn live_workers(&self) -> Result<Vec<WorkerInfo>> {
        let registry = self.workers.as_ref().ok_or(Error::NoWorkers)?;
        Ok(registry.live_workers(self.settings.lease_ttl).await?)
    }

    /// The workspace volume `view`'s run waits for when no live worker serves it: the run
    /// is resumable (nobody drives it), pinned to a volume, and no worker with a live
    /// heartbeat serves that volume. `None` otherwise, and without a worker registry.
    pub async fn unserved_volume(&self, view: &RunView) -> Result<Option<String>> {
        if !view.resumable || self.workers.is_none() {
            return Ok(None);
        }
        let Some(volume) = view
            .state
            .as_ref()
            .and_then(|s| s.policy.as_ref())
            .and_then(|p| p.volume.clone())
        else {
            return Ok(None);
        };
        let served = self
            .live_workers()
            .await?
            .iter()
            .any(|w| w.beat.volume.as_deref() == Some(volume.as_str()));
        Ok((!served).then_some(volume))
    }

    /// The live workers that claimed `view`'s run and could not drive it, each with why, by
    /// worker id: they leave it alone, so a waiting run that every live worker passed over
    /// waits for a worker that can drive it. Empty once the run is driven or ended, and
    /// without a worker registry.
    pub async fn passed_over(&self, view: &RunView) -> Result<Vec<PassedOverBy>> {
        if !view.resumable || self.workers.is_none() {
            return Ok(Vec::new());
        }
        let run = &view.summary.id;
        Ok(self
            .live_workers()
            .await?
            .into_iter()
            .filter_map(|w| {
                let reason = w
                    .beat
                    .passed_over
                    .into_iter()
                    .find(|p| &p.run == run)?
                    .reason;
                Some(PassedOverBy {
                    worker: w.beat.id,
                    reason,
                })
            })
            .collect())
    }
}

/// A live worker that passed a run over, and why.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PassedOverBy {
    pub worker: String,
    pub reason: String,
}
