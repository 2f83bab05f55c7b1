//! Carrying out one action of the state machine: the I/O (a model call, a wait for a
//! decision, opening the sandbox, running a tool) and the appends, in the order the
//! durability contract needs. What to append is the action's, never decided here.

use std::sync::Arc;

use toren_agent::{Action, RunState};
use toren_model::ModelRequest;
use toren_protocol::{EventKind, ModelResponded, RunFailed, RunStatus, ToolCall, ToolStarted};
use toren_sandbox::Sandbox;

use crate::driver::RunContext;
use crate::{Error, Outcome, Worker};

/// Whether an append wrote its events or found the log moved on and wrote nothing.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Appended {
    Written,
    CaughtUp,
}

impl Worker {
    /// Carries out one action. Returns the outcome once the run has ended.
    pub(crate) async fn step(
        &self,
        run: &mut RunContext<'_>,
        state: &mut RunState,
    ) -> Result<Option<Outcome>, Error> {
        match state.next_action() {
            Action::Finished { status } => {
                let output = match status {
                    RunStatus::Completed => state.output.clone().unwrap_or_default(),
                    _ => state.error.clone().unwrap_or_else(|| status.to_string()),
                };
                return Ok(Some(Outcome::Ended { status, output }));
            }
            Action::CallModel {
                system,
                messages,
                offer_tools,
                max_output_tokens,
            } => {
                let request = ModelRequest {
                    system,
                    messages,
                    tools: if offer_tools {
                        self.config.toolkit.specs()
                    } else {
                        Vec::new()
                    },
                    // No more than the context window leaves room for.
                    max_tokens: self.config.max_tokens.min(max_output_tokens),
                };
                let kind = self.call_model(run, state, &request).await?;
                self.append(run, state, vec![kind]).await?;
            }
            Action::Compact { event } => {
                let kind = EventKind::ContextCompacted(event);
                self.append(run, state, vec![kind]).await?;
            }
            Action::RequestApproval { request, .. } => {
                let kind = EventKind::ApprovalRequested(request);
                self.append(run, state, vec![kind]).await?;
            }
            Action::AwaitApproval { request, .. } => {
                if self.parks_approvals() {
                    return self.park(state, &request).await;
                }
                self.await_decision(state, &request).await?;
            }
            Action::ReachBudget { event } => {
                let kind = EventKind::BudgetReached(event);
                self.append(run, state, vec![kind]).await?;
            }
            Action::AwaitBudget { reached } => {
                return self.await_budget(state, &reached).await;
            }
            Action::RecordDenial { result, .. } | Action::Refuse { result, .. } => {
                self.append(run, state, vec![EventKind::ToolCompleted(result)])
                    .await?;
            }
            Action::RunTool {
                call,
                started,
                note,
                ..
            } => {
                self.run_tool(run, state, call, started, note).await?;
            }
            Action::Complete { event } => {
                self.append(run, state, vec![EventKind::RunCompleted(event)])
                    .await?;
            }
            Action::Fail { event } => {
                self.append(run, state, vec![EventKind::RunFailed(event)])
                    .await?;
            }
        }
        Ok(None)
    }

    /// One model call. A failure that may pass (overload, rate limit, network) after the
    /// provider's own retries stops driving and leaves the run resumable; a refusal of the
    /// request as too large for the model becomes the compaction the state machine plans;
    /// any other that will not pass (a bad key, a bad request) fails the run.
    async fn call_model(
        &self,
        run: &RunContext<'_>,
        state: &RunState,
        request: &ModelRequest,
    ) -> Result<EventKind, Error> {
        // Streamed text and the answer, with granted and injected values replaced.
        let redactor = self.redactor(state.policy.as_ref());
        let stream = crate::redaction::TextStream::new(&redactor);
        let observer = Arc::clone(&self.config.observer);
        let run_id = state.run_id.clone();
        let on_text = |delta: &str| {
            let shown = stream.push(delta);
            if !shown.is_empty() {
                observer.text(&run_id, &shown);
            }
        };
        let asked = std::time::Instant::now();
        let answer = run.model.respond(request, &on_text).await;
        let rest = stream.finish();
        if !rest.is_empty() {
            observer.text(&run_id, &rest);
        }
        if answer.is_ok() {
            self.config
                .observer
                .model_call(&state.run_id, asked.elapsed());
        }
        match answer {
            // Validated and repaired before it is journaled: a log must always fold.
            Ok(response) => Ok(EventKind::ModelResponded(ModelResponded {
                message: state.admit(crate::redaction::redact_message(
                    &redactor,
                    response.message,
                )),
                stop_reason: response.stop_reason,
                usage: response.usage,
                model: response.model,
            })),
            Err(error) if error.is_retryable() => Err(Error::ModelUnavailable {
                run: state.run_id.to_string(),
                error,
            }),
            // Too large for the model after all: the state machine compacts (and learns from
            // the refusal), or fails the run when nothing more can go.
            Err(error) if let Some(refused) = error.size_refusal() => {
                Ok(match state.after_refusal(refused) {
                    Ok(compacted) => EventKind::ContextCompacted(compacted),
                    Err(failed) => EventKind::RunFailed(failed),
                })
            }
            Err(error) => Ok(EventKind::RunFailed(RunFailed {
                error: format!("model call failed: {error}"),
            })),
        }
    }

    /// Opens the run's sandbox if it is not open yet. `None`: the run was failed or moved
    /// on instead (the caller lets the state machine decide again).
    async fn sandbox(
        &self,
        run: &mut RunContext<'_>,
        state: &mut RunState,
    ) -> Result<Option<Arc<dyn Sandbox>>, Error> {
        if let Some(sandbox) = &run.sandbox {
            return Ok(Some(Arc::clone(sandbox)));
        }
        let (Some(mut policy), Some(backend)) = (state.policy.clone(), run.backend.clone()) else {
            return Err(Error::NoSandbox {
                run: state.run_id.to_string(),
                backend: String::new(),
            });
        };
        let env = policy
            .env
            .iter()
            .filter_map(|name| (self.config.env)(name).map(|v| (name.clone(), v)))
            .collect();
        // Runs created before the workspace was pinned: the one already provisioned.
        if policy.workspace.is_none() {
            policy.workspace = state.sandbox.as_ref().map(|s| s.workspace.clone());
        }
        // The values of the secrets the run's egress proxy injects: to the proxy only.
        let mut hooks = toren_sandbox::EgressHooks {
            secrets: self.secret_values(&policy),
            // What a backend that lost the workspace may put back: from the journal.
            restore: Some(Arc::new(crate::restore::JournalRestore {
                store: Arc::clone(&self.config.store),
                run: state.run_id.clone(),
                recorded: state.sandbox.as_ref().map(|s| s.instance.clone()),
            })),
            ..toren_sandbox::EgressHooks::default()
        };
        // Hosts asked about and connections journaled in the run's log.
        if toren_sandbox::egress::proxied(&policy).is_some() {
            let egress = self.egress_for(run.lease, self.event_redactor(Some(&policy)));
            hooks.approver = Arc::new(egress.clone());
            hooks.recorder = Arc::new(egress.clone());
            run.egress = Some(egress);
        }
        let opened = match backend.open_with(&state.run_id, &policy, env, hooks).await {
            Ok(opened) => opened,
            // The run's own workspace is gone: never carry on in another one, and do not
            // fail the run either; it goes on once the directory is back.
            Err(source @ toren_sandbox::Error::WorkspaceMissing { .. }) => {
                return Err(Error::WorkspaceMissing {
                    run: state.run_id.to_string(),
                    source,
                });
            }
            // The service that makes sandboxes turned the run away for now (E2B's
            // concurrency limit or capacity, after the backend's retries): the run waits
            // for it, as for a model provider that is down, rather than fail.
            Err(cause) if cause.is_transient() => {
                return Err(Error::SandboxUnavailable {
                    run: state.run_id.to_string(),
                    cause,
                });
            }
            Err(e) => {
                let kind = EventKind::RunFailed(RunFailed {
                    error: format!("could not open the sandbox: {e}"),
                });
                self.append(run, state, vec![kind]).await?;
                return Ok(None);
            }
        };
        let origin = opened.origin();
        let provisioned = state.provisioned(
            opened.backend(),
            opened.instance_id(),
            opened.workspace().path().display().to_string(),
        );
        // The first instance; or, for a resuming worker, the recorded one reconnected to
        // (said in the log, same disk) or one that replaced it (a lost workspace). Any
        // other new instance is recorded after the call that met it.
        let provisioned = match (provisioned, &state.sandbox) {
            (Some(p), None) => Some(p),
            (Some(p), Some(_)) if origin.is_some() => Some(p),
            (None, Some(recorded)) if origin.is_some() => Some(recorded.clone()),
            _ => None,
        };
        if let Some(mut provisioned) = provisioned {
            provisioned.envd_version = opened.envd_version();
            provisioned.origin = origin;
            self.append(run, state, vec![EventKind::SandboxProvisioned(provisioned)])
                .await?;
        }
        run.sandbox = Some(Arc::clone(&opened));
        Ok(Some(opened))
    }

    /// Ends whatever the run's earlier driver left running in its sandbox
    /// ([`toren_sandbox::SandboxBackend::stop_processes`]: docker removes the container,
    /// killing its processes, and the next command gets a fresh one around the same
    /// workspace; backends whose processes die with their driver do nothing). A backend
    /// that cannot be reached now stops the run as it is: the call is not run again until
    /// its earlier attempt is known dead.
    async fn stop_earlier_attempt(
        &self,
        run: &RunContext<'_>,
        state: &RunState,
    ) -> Result<(), Error> {
        let (Some(policy), Some(backend)) = (state.policy.as_ref(), run.backend.as_ref()) else {
            return Ok(());
        };
        let key = policy
            .sandbox_key
            .clone()
            .unwrap_or_else(|| state.run_id.to_string());
        backend
            .stop_processes(&key)
            .await
            .map_err(|cause| Error::SandboxUnavailable {
                run: state.run_id.to_string(),
                cause,
            })
    }

    async fn run_tool(
        &self,
        run: &mut RunContext<'_>,
        state: &mut RunState,
        call: ToolCall,
        mut started: ToolStarted,
        note: Option<&'static str>,
    ) -> Result<(), Error> {
        // A re-run of a call an earlier driver started: that attempt may still run in the
        // sandbox (a container outlives its driver). It is killed and reaped first, so two
        // attempts never run at once and the checkpoint below sees no late writes from it.
        if started.attempt > 1 {
            self.stop_earlier_attempt(run, state).await?;
        }
        let Some(sandbox) = self.sandbox(run, state).await? else {
            return Ok(());
        };
        // The workspace as it is before the call, journaled with its start in one append.
        started.checkpoint = self.checkpoint(sandbox.as_ref(), &call, state).await;
        if self
            .append(run, state, vec![EventKind::ToolStarted(started)])
            .await?
            == Appended::CaughtUp
        {
            // The log moved on (a decision or a cancellation from elsewhere) and nothing
            // was written: no side effect may start without its durable `tool_started`.
            // The state machine decides again from what was folded.
            return Ok(());
        }
        // Every line logged while the tool runs names its call (and, from the caller's
        // span, its run).
        let span = tracing::info_span!("tool", call_id = %call.id, tool = %call.name);
        // A host asked about meanwhile names this call and its command.
        if let Some(egress) = &run.egress {
            egress.set_call(Some(crate::egress::call_of(&call)));
        }
        let executed = tracing::Instrument::instrument(
            self.config
                .toolkit
                .execute_with(sandbox.as_ref(), &call, run.channel.as_ref()),
            span,
        )
        .await;
        // The connections it made, journaled with its result.
        let connections = run.egress.as_ref().and_then(|egress| {
            egress.set_call(None);
            egress.take()
        });
        let (outcome, delivered) = match executed {
            Ok(executed) => (executed.outcome, executed.delivered),
            // The service turned the call away before it started (a replacement sandbox it
            // could not make): the run waits; on resume the call, started and not
            // completed, runs again.
            Err(toren_tools::ToolError::Sandbox(cause)) if cause.is_transient() => {
                return Err(Error::SandboxUnavailable {
                    run: state.run_id.to_string(),
                    cause,
                });
            }
            Err(e) => {
                let kind = EventKind::RunFailed(RunFailed {
                    error: format!("tool `{}` failed on the host: {e}", call.name),
                });
                return self.append(run, state, vec![kind]).await.map(drop);
            }
        };
        let mut kinds: Vec<EventKind> = connections.into_iter().collect();
        // A backend may make its instance only when the first command runs (docker's
        // container), or make a new one when the old one vanished: record each.
        if let Some(mut provisioned) = state.provisioned(
            sandbox.backend(),
            sandbox.instance_id(),
            sandbox.workspace().path().display().to_string(),
        ) {
            provisioned.envd_version = sandbox.envd_version();
            provisioned.origin = sandbox.origin();
            kinds.push(EventKind::SandboxProvisioned(provisioned));
        }
        // The file it handed to the person, if any, is journaled with its result.
        // What the command printed, with granted and injected values replaced.
        let output = self.redact_output(state.policy.as_ref(), outcome.output, outcome.truncated);
        let result = toren_agent::Action::completed(
            &call.id,
            note,
            output,
            outcome.is_error,
            outcome.exit_code,
            outcome.truncated,
        );
        kinds.extend(toren_agent::Action::finished(result, delivered));
        // The tool ran: its result must not be lost to a log that moved on meanwhile.
        // Record it after what others wrote, as long as the run still waits for it.
        while self.append(run, state, kinds.clone()).await? == Appended::CaughtUp {
            if !state.awaits_result(&call.id) {
                tracing::info!(run = %state.run_id, call = %call.id, "the run moved on while a tool ran; its result is not recorded");
                return Ok(());
            }
        }
        Ok(())
    }

    /// A checkpoint of the workspace before a call that can change it, if this worker
    /// takes them and the workspace is on this host. A checkpoint that fails is logged and
    /// the call goes on without one: undo is lost for that step, the run is not.
    async fn checkpoint(
        &self,
        sandbox: &dyn Sandbox,
        call: &ToolCall,
        state: &RunState,
    ) -> Option<String> {
        if !self.checkpoints
            || !matches!(call.name.as_str(), "bash" | "write_file" | "edit_file")
            || !matches!(sandbox.backend(), "local" | "docker")
        {
            return None;
        }
        let policy = match crate::checkpoint_policy(state.policy.as_ref()?) {
            Ok(policy) => policy?,
            Err(error) => {
                tracing::warn!(run = %state.run_id, call = %call.id, %error, "the pinned checkpoint policy does not parse; the call runs without a checkpoint");
                return None;
            }
        };
        let workspace = sandbox.workspace().path().to_path_buf();
        let taken = tokio::task::spawn_blocking(move || policy.checkpoint(&workspace)).await;
        match taken {
            Ok(Ok(checkpoint)) => {
                tracing::debug!(run = %state.run_id, call = %call.id, checkpoint = %checkpoint.id, hashed = checkpoint.stats.hashed, "workspace checkpoint");
                Some(checkpoint.id)
            }
            Ok(Err(error)) => {
                tracing::warn!(run = %state.run_id, call = %call.id, %error, "workspace checkpoint failed; the call runs without one");
                None
            }
            Err(error) => {
                tracing::warn!(run = %state.run_id, call = %call.id, %error, "workspace checkpoint task failed; the call runs without one");
                None
            }
        }
    }

    /// Appends after the last folded event and folds what was written. If the log moved
    /// on (an approval decided from elsewhere), nothing was written: fold the news, say so
    /// ([`Appended::CaughtUp`]) and let the state machine decide again.
    pub(crate) async fn append(
        &self,
        run: &RunContext<'_>,
        state: &mut RunState,
        kinds: Vec<EventKind>,
    ) -> Result<Appended, Error> {
        // Every string of every event with the run's values replaced, whatever its kind.
        let redactor = self.event_redactor(state.policy.as_ref());
        let kinds: Vec<EventKind> = kinds
            .into_iter()
            .map(|kind| crate::redaction::redact_event(&redactor, kind))
            .collect();
        // Retried after side events only (the egress proxy's records, appended while a
        // tool runs): they change nothing the state machine decides.
        let appended = loop {
            match self
                .config
                .store
                .append(run.lease, state.last_seq, kinds.clone())
                .await
            {
                Err(toren_store::Error::Conflict { .. }) => {
                    let moved = self
                        .config
                        .store
                        .read(&state.run_id, state.last_seq)
                        .await?;
                    for event in &moved {
                        state.apply(event)?;
                        self.config.observer.event(event);
                    }
                    if moved.is_empty()
                        || !moved.iter().all(|e| toren_agent::is_side_event(&e.kind))
                    {
                        return Ok(Appended::CaughtUp);
                    }
                }
                other => break other,
            }
        };
        match appended {
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
}
