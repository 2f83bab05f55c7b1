//! Hosting a run in the foreground, shared by `toren run` and `toren resume`: build a
//! worker that serves the run's pinned backend (and, like every worker, builds the run's
//! model provider from its pinned spec), drive it with progress on stderr, stop cleanly on
//! Ctrl-C or SIGTERM, and print the outcome.

use std::sync::Arc;

use anyhow::anyhow;
use tokio::task::JoinHandle;
use tokio_util::sync::CancellationToken;
use toren_channel::{Channels, TERMINAL, TerminalChannels};
use toren_config::Settings;
use toren_protocol::{AgentSpec, ResolvedPolicy, RunId, RunStatus};
use toren_runtime::RunService;
use toren_store::Lease;
use toren_tools::{ToolSettings, Toolkit};
use toren_worker::{Approver, Observers, Outcome, Worker, WorkerConfig, holder};

use crate::commands::sandbox;
use crate::exit::{FAILED, Failure, INTERRUPTED};
use crate::printer::{self, StderrObserver, TerminalApprover};
use crate::wiring;

/// What a foreground run needs, built before anything is written so that configuration
/// errors fail without touching the log.
pub(crate) struct Host {
    worker: Worker,
    observer: Arc<StderrObserver>,
    /// Stops the host's own tasks (the reaper, the signal listener) when the run is done.
    tasks: CancellationToken,
    reaper: Option<JoinHandle<()>>,
}

impl Host {
    /// Builds the worker for a run pinned to `agent` and `policy`: its backend is checked
    /// and its model provider built now, so that a missing daemon or key fails first.
    pub(crate) async fn new(
        agent: &AgentSpec,
        policy: Option<&ResolvedPolicy>,
        settings: &Settings,
        service: &RunService,
    ) -> Result<Self, Failure> {
        Self::build(agent, policy, settings, service, StderrObserver::new()).await
    }

    /// The host of a chat session's turns: the model's text goes to stdout.
    pub(crate) async fn for_chat(
        agent: &AgentSpec,
        policy: Option<&ResolvedPolicy>,
        settings: &Settings,
        service: &RunService,
    ) -> Result<Self, Failure> {
        Self::build(agent, policy, settings, service, StderrObserver::for_chat()).await
    }

    async fn build(
        agent: &AgentSpec,
        policy: Option<&ResolvedPolicy>,
        settings: &Settings,
        service: &RunService,
        observer: StderrObserver,
    ) -> Result<Self, Failure> {
        let store = Arc::clone(service.store());
        let tasks = CancellationToken::new();
        let mut reaper = None;
        let backends = match policy {
            Some(policy) => {
                let backend = wiring::sandbox_backend(policy, settings).await?;
                if let Some(docker) = backend.docker {
                    // Every long-lived process sweeps the containers no run needs.
                    reaper = Some(tokio::spawn(sandbox::reap_periodically(
                        docker,
                        service.clone(),
                        tasks.child_token(),
                    )));
                }
                if policy.backend == toren_sandbox_e2b::E2bBackend::NAME {
                    // E2B sandboxes no run needs are swept the same way.
                    let e2b = wiring::e2b(settings).await?;
                    reaper = Some(tokio::spawn(sandbox::reap_e2b_periodically(
                        e2b,
                        service.clone(),
                        tasks.child_token(),
                    )));
                }
                vec![backend.seam]
            }
            None => Vec::new(),
        };
        wiring::check_model(agent, settings)?;
        let observer = Arc::new(observer);
        let approver: Option<Arc<dyn Approver>> =
            TerminalApprover::for_terminal(settings.user.clone())
                .map(|approver| Arc::new(approver) as Arc<dyn Approver>);
        let worker = Worker::new(WorkerConfig {
            store,
            models: Arc::new(wiring::models(settings)),
            backends,
            toolkit: Toolkit::new(ToolSettings::default()),
            env: Arc::new(wiring::env_lookup),
            // Progress on stderr, and the service's followers (`toren events --follow`).
            observer: Arc::new(Observers(vec![
                observer.clone(),
                Arc::new(service.notifier().clone()),
            ])),
            approver,
            max_tokens: settings.max_tokens,
            approval_poll: settings.approval_poll,
            holder: holder::this_process(),
            lease_ttl: settings.lease_ttl,
        })
        // Session turns start from their session's conversation, and files their agent
        // sends reach this terminal, in TOREN_DOWNLOADS.
        .with_history(Arc::new(service.clone()))
        // The workspace before each call that can change it, for `toren diff`.
        .with_checkpoints()
        .with_channels(Arc::new(Channels::new().with(
            TERMINAL,
            Arc::new(TerminalChannels::new(settings.downloads.clone())),
        )));
        Ok(Self {
            worker,
            observer,
            tasks,
            reaper,
        })
    }

    /// The first line of `toren run`: the run, its agent and its sandbox backend, which
    /// the sandbox's own line then does not repeat.
    pub(crate) fn announce(&self, run_id: &RunId, agent: &AgentSpec, sandbox: &str) {
        printer::announce_run(run_id, agent, sandbox);
        self.observer.backend_named();
    }

    /// The holder name this host drives runs under.
    pub(crate) fn holder(&self) -> String {
        holder::this_process()
    }

    /// Drives one run (a chat's turn) until it ends or `stop` fires, without reporting.
    pub(crate) async fn drive_turn(
        &self,
        lease: Lease,
        stop: &CancellationToken,
    ) -> Result<Outcome, toren_worker::Error> {
        let outcome = self.worker.drive(lease, stop).await;
        self.observer.finish_line();
        outcome
    }

    /// Takes the lease of an existing run (for `toren resume`).
    pub(crate) async fn acquire(&self, run_id: &RunId) -> Result<Lease, Failure> {
        self.worker.acquire(run_id).await.map_err(Failure::failed)
    }

    /// Drives the run `lease` holds until it ends or a signal stops it, then reports and
    /// picks the exit status.
    pub(crate) async fn drive(self, lease: Lease, json: bool) -> Result<u8, Failure> {
        let run_id = lease.run_id.clone();
        let run_id = &run_id;
        let cancel = CancellationToken::new();
        // Registered before driving starts, so no early signal falls to the default action.
        let signals = match Signals::new() {
            Ok(signals) => Some(tokio::spawn(stop_on_signal(
                signals,
                cancel.clone(),
                self.tasks.child_token(),
            ))),
            Err(e) => {
                tracing::warn!("cannot listen for Ctrl-C/SIGTERM: {e}");
                None
            }
        };
        let outcome = self.worker.drive(lease, &cancel).await;
        self.observer.finish_line();
        // The host's tasks end with the run.
        self.tasks.cancel();
        for task in [signals, self.reaper].into_iter().flatten() {
            if let Err(e) = task.await {
                tracing::debug!("a host task ended badly: {e}");
            }
        }
        match outcome {
            Ok(outcome) => {
                let shown = match &outcome {
                    Outcome::Ended { output, .. } => self.observer.showed_answer(output),
                    _ => false,
                };
                report(run_id, outcome, json, shown)
            }
            Err(
                error @ (toren_worker::Error::ModelUnavailable { .. }
                | toren_worker::Error::SandboxUnavailable { .. }),
            ) => {
                // The run is intact and resumable: a script still gets its JSON object.
                if json {
                    print_json(run_id, RunStatus::Running.as_str(), "");
                }
                Err(Failure::failed(error))
            }
            Err(error) => Err(Failure::failed(
                anyhow!(error).context(format!("run {run_id} stopped")),
            )),
        }
    }
}

/// Prints the outcome (stdout: the answer or the JSON object) and picks the exit status;
/// an answer `shown` on the terminal already as it streamed is not printed again.
fn report(run_id: &RunId, outcome: Outcome, json: bool, shown: bool) -> Result<u8, Failure> {
    let (status, output, code) = match outcome {
        Outcome::Ended { status, output } => {
            let code = if status == RunStatus::Completed {
                0
            } else {
                FAILED
            };
            (status.to_string(), output, code)
        }
        // This host waits for decisions itself (it does not park approvals).
        Outcome::Interrupted | Outcome::AwaitingApproval { .. } | Outcome::AwaitingBudget => {
            printer::interrupted(run_id);
            ("interrupted".to_owned(), String::new(), INTERRUPTED)
        }
    };
    if json {
        print_json(run_id, &status, &output);
    } else if code == 0 {
        if !shown {
            println!("{}", printer::answer(&output));
        }
    } else if status == RunStatus::Cancelled.as_str() {
        printer::cancelled(run_id, &output);
    } else if code == FAILED {
        printer::failed(run_id, &output);
    }
    Ok(code)
}

fn print_json(run_id: &RunId, status: &str, output: &str) {
    let object = serde_json::json!({"run_id": run_id, "status": status, "output": output});
    println!("{}", toren_display::escape_json(&object.to_string()));
}

/// Cancels the run on the first Ctrl-C or SIGTERM; a second one exits at once. Ends when
/// `done` fires.
async fn stop_on_signal(mut signals: Signals, cancel: CancellationToken, done: CancellationToken) {
    tokio::select! {
        () = done.cancelled() => return,
        () = signals.next() => cancel.cancel(),
    }
    tokio::select! {
        () = done.cancelled() => {}
        () = signals.next() => {
            printer::forced_exit();
            std::process::exit(i32::from(INTERRUPTED));
        }
    }
}

/// Ctrl-C and SIGTERM as one stream.
struct Signals {
    interrupt: tokio::signal::unix::Signal,
    terminate: tokio::signal::unix::Signal,
}

impl Signals {
    fn new() -> std::io::Result<Self> {
        use tokio::signal::unix::{SignalKind, signal};
        Ok(Self {
            interrupt: signal(SignalKind::interrupt())?,
            terminate: signal(SignalKind::terminate())?,
        })
    }

    async fn next(&mut self) {
        tokio::select! {
            _ = self.interrupt.recv() => {}
            _ = self.terminate.recv() => {}
        }
    }
}
