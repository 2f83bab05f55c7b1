//! Going back to an earlier step of a run through the run service.
//!
//! A run that has not ended is rewound in place: the workspace and the conversation go
//! back together (`toren_worker::rewind` does it under the run's lease, intent first, so a
//! crash leaves the restore due for whoever drives the run next). Refused while a live
//! process drives the run, for a step the run cannot continue from, and when the workspace
//! at that step is not known (no checkpoint).
//!
//! A run that has ended (completed, failed, cancelled) keeps its closed log: a new run goes
//! on from the step instead, a fork. Its workspace is filled from the ended run's
//! checkpoint at the step before its `run_created` is written (a crash in between leaves
//! an unused directory, never a run with half a workspace), and its `run_created` pins the
//! conversation of the step (`TurnStart::forked`), so it never reads the other run's log.
//! It is created queued: any worker, or `toren resume`, drives it.

use std::path::Path;

use toren_agent::RunState;
use toren_protocol::{EventKind, RunId, TurnStart};
use toren_worker::{Observer, RewindOutcome};

use crate::{Actor, Result, RunService};

/// What going back to a step did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum WentBack {
    /// The run itself went back (it had not ended).
    Rewound(RewindOutcome),
    /// The run had ended: a new run goes on from the step.
    Forked(Fork),
}

/// A new run going on from a step of a run that had ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Fork {
    /// The new run.
    pub run_id: RunId,
    /// The ended run it goes on from, and the step.
    pub from: RunId,
    pub to: u64,
    /// The ended run's checkpoint the new workspace was filled from (`None`: no sandbox).
    pub checkpoint: Option<String>,
}

impl RunService {
    /// Takes `run` back to step `to` as `holder` (this process's lease holder name): in
    /// place while it has not ended, then resumable from there (`toren resume`, or any
    /// worker); by a new run going on from the step once it has ([`RunService::fork`]).
    pub async fn go_back(
        &self,
        run: &RunId,
        to: u64,
        actor: &Actor,
        holder: &str,
    ) -> Result<WentBack> {
        let summary = self.summary(run).await?;
        if summary.status.is_terminal() {
            return Ok(WentBack::Forked(self.fork(run, to, actor).await?));
        }
        Ok(WentBack::Rewound(
            self.rewind(run, to, actor, holder).await?,
        ))
    }

    /// Rewinds `run`, which has not ended, to step `to` in place (see the module doc).
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
            Some(actor.label()),
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

    /// What changed in `run`'s workspace between steps `from` and `to` (defaults: as it
    /// began, and now), as a patch `git apply` takes (`toren_worker::workspace_diff`).
    pub async fn workspace_diff(
        &self,
        run: &RunId,
        from: Option<u64>,
        to: Option<u64>,
    ) -> Result<String> {
        let events = self.store().read(run, 0).await?;
        Ok(toren_worker::workspace_diff(&events, from, to).await?)
    }

    /// Creates a new run going on from step `to` of `run`, which has ended (see the module
    /// doc): the same agent spec, input and channel, a workspace of its own filled from the
    /// step's checkpoint, the conversation up to the step; its budget starts afresh.
    pub async fn fork(&self, run: &RunId, to: u64, actor: &Actor) -> Result<Fork> {
        let events = self.store().read(run, 0).await?;
        let state = RunState::from_events(&events).map_err(toren_worker::Error::from)?;
        let mut forked = toren_worker::plan_fork(&state, &events, to)?;
        let Some(EventKind::RunCreated(origin)) = events.first().map(|e| &e.kind) else {
            return Err(
                toren_worker::Error::from(toren_agent::Error::NotCreated(run.to_string())).into(),
            );
        };
        let (run_id, mut created) = self.pinned(
            origin.agent.clone(),
            origin.input.clone(),
            origin.channel.clone(),
        )?;
        if let Some(ws) = created.policy.as_ref().and_then(|p| p.workspace.as_deref()) {
            forked.checkpoint = toren_worker::fill_fork_workspace(
                &state,
                forked.checkpoint.as_deref(),
                Path::new(ws),
            )
            .await?;
        }
        forked.by = Some(actor.label());
        let checkpoint = forked.checkpoint.clone();
        created.start = Some(TurnStart {
            forked: Some(forked),
            ..TurnStart::default()
        });
        self.write_queued(&run_id, created).await?;
        Ok(Fork {
            run_id,
            from: run.clone(),
            to,
            checkpoint,
        })
    }
}
