//! [`Worker`]: drives any run of any agent from its log. For each run it folds the log, takes
//! the run's model provider (from a [`ModelFactory`], by the pinned spec) and sandbox backend
//! (by the pinned policy's backend name), then asks the state machine for the next action
//! and carries it out (`step`), until the run ends, is cancelled from elsewhere, or the
//! caller stops it. One worker drives many runs at once: every call of [`Worker::drive`] is
//! independent and keeps its state on its own stack.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use toren_agent::RunState;
use toren_channel::{ChannelFactory, NoChannels};
use toren_model::ModelProvider;
use toren_protocol::{EventKind, Message, RunId, RunStatus};
use toren_sandbox::{Sandbox, SandboxBackend};
use toren_store::{EventLog, Lease};
use toren_tools::{RunChannel, Toolkit};

use crate::heartbeat::heartbeat;
use crate::{Approver, Error, HistorySource, ModelFactory, Observer, unreplayable};

/// Looks up the value of a granted environment variable.
pub(crate) type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Everything a worker needs besides the runs themselves.
pub struct WorkerConfig {
    pub store: Arc<dyn EventLog>,
    /// Builds each run's model provider from its pinned agent spec.
    pub models: Arc<dyn ModelFactory>,
    /// The sandbox backends this worker serves, looked up by the pinned policy's
    /// `backend`; empty when sandboxes are disabled (`TOREN_SANDBOX=none`).
    pub backends: Vec<Arc<dyn SandboxBackend>>,
    pub toolkit: Toolkit,
    /// Where granted variables' values come from (the operator's environment).
    pub env: EnvLookup,
    pub observer: Arc<dyn Observer>,
    pub approver: Option<Arc<dyn Approver>>,
    /// `max_tokens` for each model call.
    pub max_tokens: u32,
    /// How often a run waiting for a decision, or running a tool, checks the log for a
    /// decision or a cancellation from elsewhere.
    pub approval_poll: Duration,
    /// This process's holder name for leases (see [`crate::holder`]).
    pub holder: String,
    /// How long a lease lasts without renewal; the worker renews it every third of that.
    pub lease_ttl: Duration,
}

/// How driving a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The run ended with this status; `output` is the final answer or the failure.
    Ended { status: RunStatus, output: String },
    /// The driver was cancelled; the run is left as it is in the log.
    Interrupted,
    /// The run waits for a human decision on `call_id` and this worker parks such runs
    /// ([`Worker::parking_approvals`]): it let go of the run, which holds no slot and no
    /// task while it waits; the decision, recorded in the log, makes it claimable again.
    AwaitingApproval { call_id: String },
    /// The run is paused at its budget (`budget_reached`) and this worker parks waiting
    /// runs: it let go of the run; a raise, recorded in the log, makes it claimable again.
    AwaitingBudget,
}

/// A task that is aborted when its handle is dropped.
struct AbortOnDrop(tokio::task::JoinHandle<()>);

impl Drop for AbortOnDrop {
    fn drop(&mut self) {
        self.0.abort();
    }
}

/// Drives runs of any agent with one configuration.
pub struct Worker {
    pub(crate) config: WorkerConfig,
    /// Session turns' conversations; `None`: this worker drives no session turns.
    history: Option<Arc<dyn HistorySource>>,
    /// Finds the channel of a run bound to one ([`NoChannels`] unless
    /// [`Worker::with_channels`]).
    channels: Arc<dyn ChannelFactory>,
    /// Whether a run that waits for a human is let go of ([`Outcome::AwaitingApproval`])
    /// rather than waited on.
    park_approvals: bool,
    /// Whether this worker takes workspace checkpoints (each run by its pinned
    /// `checkpoints` policy) before each call that can change the workspace.
    pub(crate) checkpoints: bool,
    /// How long a connection to a host outside the list waits for a person.
    pub(crate) host_approval_wait: Duration,
}

/// What driving one run holds besides its state.
pub(crate) struct RunContext<'a> {
    pub(crate) lease: &'a Lease,
    pub(crate) model: Arc<dyn ModelProvider>,
    pub(crate) backend: Option<Arc<dyn SandboxBackend>>,
    /// The run's sandbox once opened.
    pub(crate) sandbox: Option<Arc<dyn Sandbox>>,
    /// The channel the run is bound to, where `send_to_channel` delivers.
    pub(crate) channel: Option<RunChannel>,
    /// The approver and recorder of the run's egress proxy, once its sandbox is open
    /// with one.
    pub(crate) egress: Option<crate::egress::RunEgress>,
}

impl Worker {
    pub fn new(config: WorkerConfig) -> Self {
        Self {
            config,
            history: None,
            channels: Arc::new(NoChannels),
            park_approvals: false,
            checkpoints: false,
            host_approval_wait: crate::HOST_APPROVAL_WAIT,
        }
    }

    /// The same worker, checkpointing the workspace (in the store beside it, see
    /// [`toren_checkpoint::Policy::store_for`]) before each `bash`, `write_file` and
    /// `edit_file` call of a sandbox whose workspace is on this host (local, docker), as
    /// each run's pinned `checkpoints` policy says (excludes, how many kept, or none); the
    /// id is recorded in that call's `tool_started`.
    #[must_use]
    pub fn with_checkpoints(mut self) -> Self {
        self.checkpoints = true;
        self
    }

    /// The same worker, letting go of a run that waits for a human decision no
    /// [`Approver`] of its own gives: [`Worker::drive`] returns
    /// [`Outcome::AwaitingApproval`] (lease released) instead of waiting, so a pool of
    /// workers spends no slot on runs that wait for people.
    #[must_use]
    pub fn parking_approvals(mut self) -> Self {
        self.park_approvals = true;
        self
    }

    /// Whether this worker lets go of runs that wait for a human.
    pub(crate) fn parks_approvals(&self) -> bool {
        self.park_approvals && self.config.approver.is_none()
    }

    /// The same worker, able to drive runs bound to a channel (a chat session's turns):
    /// their channels come from `channels`. Without it, a bound run is not driven
    /// ([`Error::NoChannel`]) and stays resumable.
    #[must_use]
    pub fn with_channels(mut self, channels: Arc<dyn ChannelFactory>) -> Self {
        self.channels = channels;
        self
    }

    /// The same worker, able to drive session turns: their conversation so far comes from
    /// `history`.
    #[must_use]
    pub fn with_history(mut self, history: Arc<dyn HistorySource>) -> Self {
        self.history = Some(history);
        self
    }

    /// The conversation before the run of `events`, if it is a session turn.
    async fn history_of(&self, events: &[toren_protocol::Event]) -> Result<Vec<Message>, Error> {
        let turn = events.first().and_then(|e| match &e.kind {
            EventKind::RunCreated(c) => c.session.clone(),
            _ => None,
        });
        let Some(turn) = turn else {
            return Ok(Vec::new());
        };
        let run = events
            .first()
            .map(|e| e.run_id.to_string())
            .unwrap_or_default();
        let Some(source) = &self.history else {
            return Err(Error::NoHistory {
                run,
                why: "this worker serves no sessions".to_owned(),
            });
        };
        source
            .history(&turn)
            .await
            .map_err(|why| Error::NoHistory { run, why })
    }

    pub fn store(&self) -> &Arc<dyn EventLog> {
        &self.config.store
    }

    /// Takes the run's lease: normally only when no live process holds it; a live lease
    /// whose holder is provably a dead process is taken over at once.
    pub async fn acquire(&self, run: &RunId) -> Result<Lease, Error> {
        let store = self.config.store.as_ref();
        unreplayable::acquire(store, run, &self.config.holder, self.config.lease_ttl).await
    }

    /// The backend named `name`, if this worker serves it.
    pub(crate) fn backend(&self, name: &str) -> Option<Arc<dyn SandboxBackend>> {
        self.config
            .backends
            .iter()
            .find(|b| b.name() == name)
            .cloned()
    }

    /// Drives the run `lease` holds from its log until it ends, is cancelled (by anyone:
    /// `run_cancelled` in the log kills a running tool) or `stop` fires, renewing the lease
    /// as it goes and releasing it at the end, so a stopped run can be resumed at once.
    pub async fn drive(&self, lease: Lease, stop: &CancellationToken) -> Result<Outcome, Error> {
        self.drive_draining(lease, stop, stop).await
    }

    /// [`Worker::drive`] with a gentler stop: once `drain` fires, the step under way (a
    /// tool call, a model call) is finished and journaled, and the driver stops before the
    /// next one; `stop` still drops the step at once (a running command is killed), e.g.
    /// when a shutdown deadline has passed. Either way the run stays resumable.
    pub async fn drive_draining(
        &self,
        lease: Lease,
        drain: &CancellationToken,
        stop: &CancellationToken,
    ) -> Result<Outcome, Error> {
        let (lost_tx, lost) = tokio::sync::oneshot::channel();
        // Owned by this call: if the caller drops the drive future (a front door giving up
        // on it), the heartbeat stops with it and the lease lapses for whoever resumes.
        let heartbeat = AbortOnDrop(tokio::spawn(heartbeat(
            Arc::clone(&self.config.store),
            lease.clone(),
            self.config.lease_ttl,
            lost_tx,
        )));
        let mut backend = None;
        // When the lease is lost or about to expire unrenewed, the run's work is dropped
        // (a running command is killed with it) before anyone else may drive the run.
        let outcome = tokio::select! {
            biased;
            Ok(lost) = lost => Err(lost.into_error(&lease)),
            outcome = self.drive_held(&lease, drain, stop, &mut backend) => outcome,
        };
        drop(heartbeat);
        if let (Ok(Outcome::Ended { .. }), Some(backend)) = (&outcome, &backend)
            && let Err(e) = backend.finish(&lease.run_id).await
        {
            tracing::warn!(run = %lease.run_id, "could not clean up the run's sandbox: {e}");
        }
        match &outcome {
            // Taken over or released: there is nothing of ours to give up.
            Err(Error::LeaseLost { .. }) => {}
            // The database does not answer: the caller is not kept waiting for it longer
            // than a heartbeat; unreleased, the lease expires by itself.
            Err(Error::LeaseExpiring { .. }) => {
                let release = self.config.store.release_lease(&lease);
                match tokio::time::timeout(self.config.lease_ttl / 3, release).await {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => {
                        tracing::warn!(run = %lease.run_id, "could not release the lease: {e}");
                    }
                    Err(_) => tracing::warn!(
                        run = %lease.run_id,
                        "could not release the lease: the database did not answer; it expires \
                         by itself"
                    ),
                }
            }
            _ => {
                if let Err(e) = self.config.store.release_lease(&lease).await {
                    tracing::warn!(run = %lease.run_id, "could not release the lease: {e}");
                }
            }
        }
        outcome
    }

    async fn drive_held(
        &self,
        lease: &Lease,
        drain: &CancellationToken,
        stop: &CancellationToken,
        backend_out: &mut Option<Arc<dyn SandboxBackend>>,
    ) -> Result<Outcome, Error> {
        let events = self.config.store.read(&lease.run_id, 0).await?;
        let history = self.history_of(&events).await?;
        let mut state = match RunState::from_events_with_history(&history, &events) {
            Ok(state) => state,
            Err(error) => return self.fail_corrupt(lease, &events, &error).await,
        };
        // A rewind whose restore may not have finished (its process died): the workspace
        // is made the checkpoint's before anything else happens in it.
        crate::restore_if_due(&state, &self.config.backends).await?;
        let model = self
            .config
            .models
            .model(&state.agent)
            .map_err(|source| Error::NoModel {
                run: state.run_id.to_string(),
                source,
            })?;
        let backend = match &state.policy {
            Some(policy) => {
                Some(
                    self.backend(&policy.backend)
                        .ok_or_else(|| Error::NoSandbox {
                            run: state.run_id.to_string(),
                            backend: policy.backend.clone(),
                        })?,
                )
            }
            None => None,
        };
        backend_out.clone_from(&backend);
        let channel = match &state.channel {
            Some(binding) => Some(RunChannel {
                run_id: state.run_id.clone(),
                channel: self
                    .channels
                    .channel(&state.run_id, binding)
                    .map_err(|source| Error::NoChannel {
                        run: state.run_id.to_string(),
                        source,
                    })?,
            }),
            None => None,
        };
        let mut run = RunContext {
            lease,
            model,
            backend,
            sandbox: None,
            channel,
            egress: None,
        };
        // The log as read is let go of once the first step is done, not before: freeing it
        // costs about what folding it did, and the next action does not wait for that.
        let mut read = Some(events);
        loop {
            if drain.is_cancelled() {
                return Ok(Outcome::Interrupted);
            }
            let stepped = {
                let step = self.step(&mut run, &mut state);
                tokio::select! {
                    biased;
                    () = stop.cancelled() => return Ok(Outcome::Interrupted),
                    result = step => Some(result),
                    () = self.ended_elsewhere(&lease.run_id) => None,
                }
            };
            drop(read.take());
            // Ended by someone else (a cancellation; or the step's own end, just committed):
            // whatever was running is dropped, and the log says how the run ended.
            let stepped = match stepped {
                Some(result) => result,
                None => self.catch_up(&mut state).await.map(|()| None),
            };
            match stepped {
                Ok(Some(outcome)) => return Ok(outcome),
                Ok(None) => {}
                Err(Error::CorruptLog(error)) => {
                    let events = self.config.store.read(&lease.run_id, 0).await?;
                    return self.fail_corrupt(lease, &events, &error).await;
                }
                // Another process ended the run (a cancellation) under this write.
                Err(Error::Store(toren_store::Error::RunEnded { .. })) => {
                    self.catch_up(&mut state).await?;
                }
                Err(error) => return Err(error),
            }
        }
    }

    /// Returns once the run has ended in the store (e.g. `run_cancelled` from another
    /// process); checked every `approval_poll`.
    async fn ended_elsewhere(&self, run: &RunId) {
        loop {
            tokio::time::sleep(self.config.approval_poll).await;
            match self.config.store.run(run).await {
                Ok(summary) if summary.status.is_terminal() => return,
                Ok(_) => {}
                Err(e) => tracing::debug!(run = %run, "could not check the run's status: {e}"),
            }
        }
    }

    /// A log that does not fold cannot be driven, and must not pass for a resumable run:
    /// record the run as failed with the reason, so that every surface shows it.
    async fn fail_corrupt(
        &self,
        lease: &Lease,
        events: &[toren_protocol::Event],
        error: &toren_agent::Error,
    ) -> Result<Outcome, Error> {
        let output = unreplayable::record(self.config.store.as_ref(), lease, events, error).await?;
        Ok(Outcome::Ended {
            status: RunStatus::Failed,
            output,
        })
    }

    /// Folds events written by others since the last folded one.
    pub(crate) async fn catch_up(&self, state: &mut RunState) -> Result<(), Error> {
        let events = self
            .config
            .store
            .read(&state.run_id, state.last_seq)
            .await?;
        for event in &events {
            state.apply(event)?;
            self.config.observer.event(event);
        }
        Ok(())
    }
}
