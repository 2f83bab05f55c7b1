//! [`RunDriver`]: the loop that folds a run's log, asks the state machine for the next
//! action, carries it out and appends the result, until the run ends or is interrupted.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use toren_agent::{Action, INTERRUPTED_NOTE, RunState};
use toren_model::{ModelProvider, ModelRequest};
use toren_protocol::{
    ApprovalRequested, EventKind, ModelResponded, RunCompleted, RunFailed, RunId, RunStatus,
    SandboxProvisioned, ToolCall, ToolCompleted, ToolStarted,
};
use toren_sandbox::Sandbox;
use toren_store::{EventLog, Lease};
use toren_tools::Toolkit;

use crate::heartbeat::heartbeat;
use crate::{Approver, Error, Observer, SandboxBackend, unreplayable};

/// Looks up the value of a granted environment variable.
pub(crate) type EnvLookup = Arc<dyn Fn(&str) -> Option<String> + Send + Sync>;

/// Everything a driver needs besides the run itself.
pub struct WorkerConfig {
    pub store: Arc<dyn EventLog>,
    pub model: Arc<dyn ModelProvider>,
    /// `None` when sandboxes are disabled (`TOREN_SANDBOX=none`).
    pub sandbox: Option<Arc<dyn SandboxBackend>>,
    pub toolkit: Toolkit,
    /// Where granted variables' values come from (the operator's environment).
    pub env: EnvLookup,
    pub observer: Arc<dyn Observer>,
    pub approver: Option<Arc<dyn Approver>>,
    /// `max_tokens` for each model call.
    pub max_tokens: u32,
    /// How often a run waiting for a decision from elsewhere checks the log.
    pub approval_poll: Duration,
    /// This process's holder name for leases (see [`crate::holder`]).
    pub holder: String,
    /// How long a lease lasts without renewal; the driver renews it every third of that.
    pub lease_ttl: Duration,
}

/// Whether an append wrote its events or found the log moved on and wrote nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Appended {
    Written,
    CaughtUp,
}

/// How driving a run ended.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Outcome {
    /// The run ended with this status; `output` is the final answer or the failure.
    Ended { status: RunStatus, output: String },
    /// The driver was cancelled; the run is left as it is in the log.
    Interrupted,
}

/// Drives runs with one configuration.
pub struct RunDriver {
    pub(crate) config: WorkerConfig,
}

impl RunDriver {
    pub fn new(config: WorkerConfig) -> Self {
        Self { config }
    }

    /// Takes the run's lease: normally only when no live process holds it; a live lease
    /// whose holder is a dead process of this machine is taken over at once.
    pub async fn acquire(&self, run: &RunId) -> Result<Lease, Error> {
        let store = self.config.store.as_ref();
        unreplayable::acquire(store, run, &self.config.holder, self.config.lease_ttl).await
    }

    /// Drives the run `lease` holds from its log until it ends or `cancel` fires, renewing
    /// the lease as it goes and releasing it at the end, so an interrupted run can be
    /// resumed at once.
    pub async fn drive(&self, lease: Lease, cancel: &CancellationToken) -> Result<Outcome, Error> {
        let (stop, stopped) = tokio::sync::oneshot::channel();
        let heartbeat = tokio::spawn(heartbeat(
            Arc::clone(&self.config.store),
            lease.clone(),
            self.config.lease_ttl,
            stop,
        ));
        // When the lease is lost or about to expire unrenewed, the run's work is dropped
        // (a running command is killed with it) before anyone else may drive the run.
        let outcome = tokio::select! {
            biased;
            Ok(stop) = stopped => Err(stop.into_error(&lease)),
            outcome = self.drive_held(&lease, cancel) => outcome,
        };
        heartbeat.abort();
        if let (Ok(Outcome::Ended { .. }), Some(backend)) = (&outcome, &self.config.sandbox)
            && let Err(e) = backend.finish(&lease.run_id).await
        {
            tracing::warn!(run = %lease.run_id, "could not clean up the run's sandbox: {e}");
        }
        if let Err(e) = self.config.store.release_lease(&lease).await {
            tracing::warn!(run = %lease.run_id, "could not release the lease: {e}");
        }
        outcome
    }

    async fn drive_held(
        &self,
        lease: &Lease,
        cancel: &CancellationToken,
    ) -> Result<Outcome, Error> {
        let events = self.config.store.read(&lease.run_id, 0).await?;
        let mut state = match RunState::from_events(&events) {
            Ok(state) => state,
            Err(error) => return self.fail_corrupt(lease, &events, &error).await,
        };
        let mut sandbox: Option<Arc<dyn Sandbox>> = None;
        loop {
            let step = self.step(lease, &mut state, &mut sandbox);
            let appended = tokio::select! {
                biased;
                () = cancel.cancelled() => return Ok(Outcome::Interrupted),
                result = step => result,
            };
            match appended {
                Ok(Some(outcome)) => return Ok(outcome),
                Ok(None) => {}
                Err(Error::CorruptLog(error)) => {
                    let events = self.config.store.read(&lease.run_id, 0).await?;
                    return self.fail_corrupt(lease, &events, &error).await;
                }
                Err(error) => return Err(error),
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

    /// Carries out one action. Returns the outcome once the run has ended.
    async fn step(
        &self,
        lease: &Lease,
        state: &mut RunState,
        sandbox: &mut Option<Arc<dyn Sandbox>>,
    ) -> Result<Option<Outcome>, Error> {
        match state.next_action() {
            Action::Finished { status } => {
                let output = match status {
                    RunStatus::Completed => state.output.clone().unwrap_or_default(),
                    _ => state.error.clone().unwrap_or_else(|| status.to_string()),
                };
                return Ok(Some(Outcome::Ended { status, output }));
            }
            Action::CallModel => {
                let kind = self.call_model(state).await?;
                self.append(lease, state, vec![kind]).await?;
            }
            Action::RequestApproval { call, command } => {
                let kind = EventKind::ApprovalRequested(ApprovalRequested {
                    call_id: call.id,
                    tool: call.name,
                    command,
                    attempt: 1,
                });
                self.append(lease, state, vec![kind]).await?;
            }
            Action::AwaitApproval { call, command } => {
                self.await_decision(state, &call, &command).await?;
            }
            Action::RecordDenial { call, reason } => {
                let output = match reason {
                    Some(reason) => format!(
                        "The human denied this command. Their reason: {reason}\nThe command did not run. Adjust your approach."
                    ),
                    None => "The human denied this command; it did not run. Adjust your approach or ask what they want.".to_owned(),
                };
                let kind = EventKind::ToolCompleted(ToolCompleted {
                    call_id: call.id,
                    output,
                    is_error: true,
                    exit_code: None,
                    truncated: false,
                });
                self.append(lease, state, vec![kind]).await?;
            }
            Action::Refuse { call, output } => {
                let kind = EventKind::ToolCompleted(ToolCompleted {
                    call_id: call.id,
                    output,
                    is_error: true,
                    exit_code: None,
                    truncated: false,
                });
                self.append(lease, state, vec![kind]).await?;
            }
            Action::RunTool { call, attempt } => {
                self.run_tool(lease, state, sandbox, call, attempt).await?;
            }
            Action::Complete { output } => {
                let kind = EventKind::RunCompleted(RunCompleted { output });
                self.append(lease, state, vec![kind]).await?;
            }
            Action::Fail { error } => {
                let kind = EventKind::RunFailed(RunFailed { error });
                self.append(lease, state, vec![kind]).await?;
            }
        }
        Ok(None)
    }

    /// One model call; its failure (after the provider's own retries) fails the run.
    /// One model call. A failure that may pass (overload, rate limit, network) after the
    /// provider's own retries stops driving and leaves the run resumable; one that will not
    /// (a bad key, a bad request) fails the run.
    async fn call_model(&self, state: &RunState) -> Result<EventKind, Error> {
        let tools = if state.agent.sandbox.is_some() {
            self.config.toolkit.specs()
        } else {
            Vec::new()
        };
        let request = ModelRequest {
            system: toren_agent::system_prompt(&state.agent),
            messages: state.messages.clone(),
            tools,
            max_tokens: self.config.max_tokens,
        };
        let observer = Arc::clone(&self.config.observer);
        let on_text = move |delta: &str| observer.text(delta);
        match self.config.model.respond(&request, &on_text).await {
            // Validated and repaired before it is journaled: a log must always fold.
            Ok(response) => Ok(EventKind::ModelResponded(ModelResponded {
                message: state.admit(response.message),
                stop_reason: response.stop_reason,
                usage: response.usage,
                model: response.model,
            })),
            Err(error) if error.is_retryable() => Err(Error::ModelUnavailable {
                run: state.run_id.to_string(),
                error,
            }),
            Err(error) => Ok(EventKind::RunFailed(RunFailed {
                error: format!("model call failed: {error}"),
            })),
        }
    }

    async fn run_tool(
        &self,
        lease: &Lease,
        state: &mut RunState,
        sandbox: &mut Option<Arc<dyn Sandbox>>,
        call: ToolCall,
        attempt: u32,
    ) -> Result<(), Error> {
        let sb = match sandbox {
            Some(sb) => Arc::clone(sb),
            None => {
                let Some(mut policy) = state.policy.clone() else {
                    // No sandbox, no tools: the model must be told, not obeyed.
                    let kind = EventKind::ToolCompleted(ToolCompleted {
                        call_id: call.id,
                        output: format!(
                            "Tool `{}` is not available: this agent has no tools.",
                            call.name
                        ),
                        is_error: true,
                        exit_code: None,
                        truncated: false,
                    });
                    return self.append(lease, state, vec![kind]).await.map(drop);
                };
                let backend = self
                    .config
                    .sandbox
                    .as_ref()
                    .ok_or_else(|| Error::NoSandbox {
                        run: state.run_id.to_string(),
                    })?;
                let env = policy
                    .env
                    .iter()
                    .filter_map(|name| (self.config.env)(name).map(|v| (name.clone(), v)))
                    .collect();
                // Runs created before the workspace was pinned: the one already provisioned.
                if policy.workspace.is_none() {
                    policy.workspace = state.sandbox.as_ref().map(|s| s.workspace.clone());
                }
                let opened = match backend.open(&state.run_id, &policy, env).await {
                    Ok(opened) => opened,
                    // The run's own workspace is gone: never carry on in another one, and
                    // do not fail the run either; it goes on once the directory is back.
                    Err(source @ toren_sandbox::Error::WorkspaceMissing { .. }) => {
                        return Err(Error::WorkspaceMissing {
                            run: state.run_id.to_string(),
                            source,
                        });
                    }
                    Err(e) => {
                        return self
                            .fail(lease, state, format!("could not open the sandbox: {e}"))
                            .await;
                    }
                };
                if state.sandbox.is_none() {
                    let kind = EventKind::SandboxProvisioned(SandboxProvisioned {
                        backend: opened.backend().to_owned(),
                        instance: opened.instance_id(),
                        workspace: opened.workspace().path().display().to_string(),
                    });
                    self.append(lease, state, vec![kind]).await?;
                }
                *sandbox = Some(Arc::clone(&opened));
                opened
            }
        };
        let started = EventKind::ToolStarted(ToolStarted {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            attempt,
        });
        if self.append(lease, state, vec![started]).await? == Appended::CaughtUp {
            // The log moved on (a decision or a cancellation from elsewhere) and nothing
            // was written: no side effect may start without its durable `tool_started`.
            // The state machine decides again from what was folded.
            return Ok(());
        }
        let outcome = match self.config.toolkit.execute(sb.as_ref(), &call).await {
            Ok(outcome) => outcome,
            Err(e) => {
                return self
                    .fail(
                        lease,
                        state,
                        format!("tool `{}` failed on the host: {e}", call.name),
                    )
                    .await;
            }
        };
        let output = if attempt > 1 {
            format!("{INTERRUPTED_NOTE}\n{}", outcome.output)
        } else {
            outcome.output
        };
        let mut kinds = Vec::new();
        // A backend may make its instance only when the first command runs (docker's
        // container), or make a new one when the old one vanished: record each.
        let instance = sb.instance_id();
        if state
            .sandbox
            .as_ref()
            .is_none_or(|s| s.instance != instance)
        {
            kinds.push(EventKind::SandboxProvisioned(SandboxProvisioned {
                backend: sb.backend().to_owned(),
                instance,
                workspace: sb.workspace().path().display().to_string(),
            }));
        }
        kinds.push(EventKind::ToolCompleted(ToolCompleted {
            call_id: call.id.clone(),
            output,
            is_error: outcome.is_error,
            exit_code: outcome.exit_code,
            truncated: outcome.truncated,
        }));
        // The tool ran: its result must not be lost to a log that moved on meanwhile.
        // Record it after what others wrote, as long as the run still waits for it.
        while self.append(lease, state, kinds.clone()).await? == Appended::CaughtUp {
            let still_waiting = matches!(
                state.next_action(),
                Action::RunTool { call: ref next, .. } if next.id == call.id
            );
            if !still_waiting {
                tracing::info!(run = %state.run_id, call = %call.id, "the run moved on while a tool ran; its result is not recorded");
                return Ok(());
            }
        }
        Ok(())
    }

    async fn fail(&self, lease: &Lease, state: &mut RunState, error: String) -> Result<(), Error> {
        self.append(
            lease,
            state,
            vec![EventKind::RunFailed(RunFailed { error })],
        )
        .await
        .map(drop)
    }

    /// Appends after the last folded event and folds what was written. If the log moved
    /// on (an approval decided from elsewhere), nothing was written: fold the news, say so
    /// ([`Appended::CaughtUp`]) and let the state machine decide again.
    async fn append(
        &self,
        lease: &Lease,
        state: &mut RunState,
        kinds: Vec<EventKind>,
    ) -> Result<Appended, Error> {
        match self.config.store.append(lease, state.last_seq, kinds).await {
            Ok(events) => {
                for event in &events {
                    state.apply(event)?;
                    self.config.observer.event(event);
                }
                Ok(Appended::Written)
            }
            Err(toren_store::Error::Conflict { .. }) => {
                self.catch_up(state).await?;
                Ok(Appended::CaughtUp)
            }
            Err(toren_store::Error::LeaseLost { .. }) => Err(Error::LeaseLost {
                run: state.run_id.to_string(),
            }),
            Err(e) => Err(e.into()),
        }
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
