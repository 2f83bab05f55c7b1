//! Rewinding a run through the run service: the workspace and the conversation go back to
//! an earlier step together (`toren_worker::rewind` does it under the run's lease, intent
//! first, so a crash leaves the restore due for whoever drives the run next). Refused while
//! a live process drives the run, for a step the run cannot continue from, and when the
//! workspace at that step is not known (no checkpoint).

use toren_protocol::RunId;
use toren_worker::{Observer, RewindOutcome};

use crate::{Actor, Result, RunService};

impl RunService {
    /// Rewinds `run` to step `to` as `holder` (this process's lease holder name); the
    /// run is then resumable from there (`toren resume`, or any worker).
    pub async fn rewind(
        &self,
        run: &RunId,
        to: u64,
        actor: &Actor,
        holder: &str,
    ) -> Result<RewindOutcome> {
        let outcome = toren_worker::rewind(
            self.store().as_ref(),
            self.backends.as_ref(),
            run,
            to,
            Some(format!("{} via {}", actor.by, actor.via)),
            holder,
            self.settings.lease_ttl,
        )
        .await?;
        // Followers and waiting workers learn of it as of any other event.
        if let Ok(events) = self.store().read(run, outcome.seq - 1).await {
            for event in &events {
                self.notifier().event(event);
            }
        }
        Ok(outcome)
    }
}
