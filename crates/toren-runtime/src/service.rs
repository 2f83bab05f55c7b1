//! [`RunService`]: create, decide, cancel, get, list, events. Each is one store operation
//! (or a read and a fold); none needs the run's lease except `create`, which hands the new
//! run's first lease to the caller that will drive it.

use std::sync::Arc;
use std::time::Duration;

use toren_agent::{Action, RunState};
use toren_protocol::{
    AgentSpec, ApprovalDecided, ApprovalRequested, ChannelBinding, Event, ResolvedPolicy,
    RunCancelled, RunCreated, RunId,
};
use toren_sandbox::Workspace;
use toren_store::{EventLog, Lease, RunQuery, RunSummary, SessionStore, WorkerRegistry};
use toren_worker::{Observer as _, holder};

use crate::follow::{Follow, Notifier};
use crate::policy::{PolicySettings, resolve_policy};
use crate::{Error, Result};

/// Who acts on a run, and through which front door (`cli`, `terminal`, `api`, …).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Actor {
    pub by: String,
    pub via: String,
}

impl Actor {
    /// Who and through which door, as events record it (`alice via cli`).
    pub fn label(&self) -> String {
        format!("{} via {}", self.by, self.via)
    }
}

/// How the service works.
#[derive(Clone, Debug)]
pub struct ServiceSettings {
    pub policy: PolicySettings,
    /// How long a lease lasts without renewal (a new run's first lease, and the one taken
    /// to record an unreplayable run as failed).
    pub lease_ttl: Duration,
    /// How often [`RunService::follow`] checks the store when nothing in this process
    /// said that the run moved.
    pub follow_poll: Duration,
    /// Where streamed model text is shared with followers in other processes (see
    /// [`Notifier::with_stream_dir`]); `None`: only within this process.
    pub streams: Option<std::path::PathBuf>,
}

/// A run just created, and the lease of whoever will drive it.
#[derive(Clone, Debug)]
pub struct Created {
    pub run_id: RunId,
    pub lease: Lease,
    pub policy: Option<ResolvedPolicy>,
}

/// One run as a front door shows it.
#[derive(Clone, Debug)]
pub struct RunView {
    pub summary: RunSummary,
    /// Nobody drives it and it has not ended: a worker may resume it.
    pub resumable: bool,
    /// The run folded from its log; `None` when the log cannot be replayed (then `error`
    /// says why, and the run has been recorded as failed).
    pub state: Option<RunState>,
    /// Why the log cannot be replayed.
    pub error: Option<String>,
    /// The approval the run waits for, if any.
    pub pending: Option<ApprovalRequested>,
}

/// The run service. Cheap to clone.
#[derive(Clone)]
pub struct RunService {
    store: Arc<dyn EventLog>,
    pub(crate) sessions: Option<Arc<dyn SessionStore>>,
    pub(crate) workers: Option<Arc<dyn WorkerRegistry>>,
    pub(crate) settings: ServiceSettings,
    notifier: Notifier,
    pub(crate) holder: String,
    /// When [`RunService::claim`] last looked for runs of provably gone holders.
    pub(crate) gone_checked: Arc<std::sync::Mutex<Option<std::time::Instant>>>,
    /// This process's environment, as wiring resolved it (`secrets.rs`).
    pub(crate) env: Option<crate::secrets::ProcessEnv>,
    /// The sandbox backends a rewind ends leftover processes through (`with_backends`).
    pub(crate) backends: Arc<dyn toren_worker::Backends>,
    /// How large a project a new run's workspace may start as (`with_seed_limits`).
    pub(crate) seed_limits: toren_worker::SeedLimits,
}

impl RunService {
    pub fn new(store: Arc<dyn EventLog>, settings: ServiceSettings) -> Self {
        let notifier = match &settings.streams {
            Some(dir) => Notifier::new().with_stream_dir(dir.clone()),
            None => Notifier::new(),
        };
        Self {
            store,
            sessions: None,
            workers: None,
            settings,
            notifier,
            holder: holder::this_process(),
            gone_checked: Arc::default(),
            env: None,
            backends: Arc::new(toren_worker::NoBackends),
            seed_limits: toren_worker::SeedLimits::default(),
        }
    }

    /// The same service with `limits` on the projects new runs' workspaces start as.
    #[must_use]
    pub fn with_seed_limits(mut self, limits: toren_worker::SeedLimits) -> Self {
        self.seed_limits = limits;
        self
    }

    /// The same service with sessions, kept in `sessions` (see [`crate::sessions`]).
    #[must_use]
    pub fn with_sessions(mut self, sessions: Arc<dyn SessionStore>) -> Self {
        self.sessions = Some(sessions);
        self
    }

    /// The same service with the registry of live workers (`toren workers list`, and
    /// `get` saying when a run waits for a volume no live worker serves).
    #[must_use]
    pub fn with_workers(mut self, workers: Arc<dyn WorkerRegistry>) -> Self {
        self.workers = Some(workers);
        self
    }

    /// The same service with `backends`, through which a rewind ends what still runs in
    /// the run's sandbox before restoring its workspace (a container's command its killed
    /// driver left running). Without them nothing is stopped.
    #[must_use]
    pub fn with_backends(mut self, backends: Arc<dyn toren_worker::Backends>) -> Self {
        self.backends = backends;
        self
    }

    /// The worker registry, if this service has one.
    pub fn workers(&self) -> Option<&Arc<dyn WorkerRegistry>> {
        self.workers.as_ref()
    }

    pub fn store(&self) -> &Arc<dyn EventLog> {
        &self.store
    }

    /// The notifier a worker in this process reports to (as its observer), so that
    /// [`follow`](Self::follow) wakes at once and gets streamed text.
    pub fn notifier(&self) -> &Notifier {
        &self.notifier
    }

    /// The policy a new run of `agent` would be pinned to (for checks before creating),
    /// refused as every creation is when this process cannot inject a secret the agent
    /// needs ([`RunService::require_secrets`]).
    pub fn resolve_policy(&self, agent: &AgentSpec) -> Result<Option<ResolvedPolicy>> {
        let policy = resolve_policy(agent, &self.settings.policy)?;
        self.require_secrets(&agent.name, policy.as_ref())?;
        Ok(policy)
    }

    /// Creates a run of `agent` on `input`: resolves its policy, makes its workspace, pins
    /// both with the spec in `run_created`, and gives `holder` the run's first lease. The
    /// run is bound to no channel (`toren run`): `send_to_channel` tells the agent so.
    pub async fn create(&self, agent: AgentSpec, input: String, holder: &str) -> Result<Created> {
        self.create_bound(agent, input, holder, None).await
    }

    /// As [`RunService::create`], with the run bound to `channel`, pinned in `run_created`:
    /// the files its agent sends go there, whichever process drives it.
    pub async fn create_bound(
        &self,
        agent: AgentSpec,
        input: String,
        holder: &str,
        channel: Option<ChannelBinding>,
    ) -> Result<Created> {
        let (run_id, created) = self.pinned(agent, input, channel)?;
        self.write_held(run_id, created, holder).await
    }

    /// Creates a run of `agent` on `input` as [`RunService::create`] does, but queued: no
    /// process holds it and any worker may claim it at once (one write to the store, where
    /// `create` then [`enqueue`](Self::enqueue) makes two); the workers of this process are
    /// woken. What the API's `POST /runs` does.
    pub async fn create_queued(&self, agent: AgentSpec, input: String) -> Result<RunId> {
        let (run_id, created) = self.pinned(agent, input, None)?;
        self.write_queued(&run_id, created).await?;
        Ok(run_id)
    }

    /// As [`RunService::create`], with the run's workspace first filled with `seed` (a
    /// copy of a directory, or a clone of a repository the agent's network policy lets it
    /// reach; `toren_worker::seed_workspace`), recorded in its `run_created`
    /// (`TurnStart::seeded`). Nothing is created when the seed is refused.
    pub async fn create_seeded(
        &self,
        agent: AgentSpec,
        input: String,
        holder: &str,
        seed: &toren_worker::SeedSource,
    ) -> Result<Created> {
        let (run_id, created) = self.seeded(agent, input, seed).await?;
        self.write_held(run_id, created, holder).await
    }

    /// As [`RunService::create_queued`], with the workspace seeded as
    /// [`RunService::create_seeded`] does.
    pub async fn create_queued_seeded(
        &self,
        agent: AgentSpec,
        input: String,
        seed: &toren_worker::SeedSource,
    ) -> Result<RunId> {
        let (run_id, created) = self.seeded(agent, input, seed).await?;
        self.write_queued(&run_id, created).await?;
        Ok(run_id)
    }

    /// Writes the new run `run_id` held by `holder` (its first lease).
    async fn write_held(
        &self,
        run_id: RunId,
        created: RunCreated,
        holder: &str,
    ) -> Result<Created> {
        let policy = created.policy.clone();
        let (_, lease) = self
            .store
            .create_run(&run_id, created, holder, self.settings.lease_ttl)
            .await?;
        Ok(Created {
            run_id,
            lease,
            policy,
        })
    }

    /// Writes the new run `run_id` queued, and wakes this process's workers.
    pub(crate) async fn write_queued(&self, run_id: &RunId, created: RunCreated) -> Result<()> {
        self.store.create_queued(run_id, created).await?;
        self.notifier.moved(run_id);
        Ok(())
    }

    /// [`RunService::pinned`], with the workspace filled with `seed` before anything is
    /// written (a crash in between leaves an unused directory, never a run with half a
    /// workspace).
    async fn seeded(
        &self,
        agent: AgentSpec,
        input: String,
        seed: &toren_worker::SeedSource,
    ) -> Result<(RunId, RunCreated)> {
        let (run_id, mut created) = self.pinned(agent, input, None)?;
        let Some(policy) = &created.policy else {
            return Err(toren_worker::Error::Seed {
                why: format!(
                    "agent `{}` has no sandbox, so it has no workspace to start as a copy of a                      project; give it one (`sandbox: true` in its agent file)",
                    created.agent.name
                ),
            }
            .into());
        };
        let done = toren_worker::seed_workspace(policy, seed, self.seed_limits).await;
        let seeded = match done {
            Ok(seeded) => seeded,
            Err(e) => {
                discard_new_workspace(policy);
                return Err(e.into());
            }
        };
        created.start = Some(toren_protocol::TurnStart {
            seeded: Some(toren_protocol::WorkspaceSeed {
                from: seed.label(),
                checkpoint: seeded.checkpoint,
                files: seeded.files,
                bytes: seeded.bytes,
            }),
            ..toren_protocol::TurnStart::default()
        });
        Ok((run_id, created))
    }

    /// A new run's id and its `run_created`: the policy resolved, the workspace made, both
    /// pinned with the spec.
    pub(crate) fn pinned(
        &self,
        agent: AgentSpec,
        input: String,
        channel: Option<ChannelBinding>,
    ) -> Result<(RunId, RunCreated)> {
        let run_id = RunId::new();
        let policy = match self.resolve_policy(&agent)? {
            // The workspace is made with the run and its host path pinned in it (I-4): a
            // resumed run works there or nowhere, whatever TOREN_SANDBOX_ROOT says later.
            Some(mut policy) => {
                let workspace =
                    Workspace::create(&self.settings.policy.sandbox_root, run_id.as_str())
                        .map_err(Error::Workspace)?;
                policy.workspace = Some(workspace.path().display().to_string());
                Some(policy)
            }
            None => None,
        };
        // What the person typed is journaled redacted of the run's values, like all else.
        let input = self.redact_input(policy.as_ref(), input);
        let created = RunCreated {
            agent,
            policy,
            input,
            session: None,
            channel,
            start: None,
        };
        Ok((run_id, created))
    }

    /// Records a decision on the call `run` waits for. The first decision wins; a second
    /// is refused with the one recorded.
    pub async fn decide(
        &self,
        run: &RunId,
        call: &str,
        approved: bool,
        reason: Option<String>,
        actor: &Actor,
    ) -> Result<Event> {
        // What the person wrote is journaled (and told the model) redacted of the run's
        // values, like all else.
        let reason = match reason {
            Some(reason) => Some(self.redact_for_run(run, reason).await?),
            None => None,
        };
        let decision = ApprovalDecided {
            call_id: call.to_owned(),
            approved,
            by: actor.by.clone(),
            via: actor.via.clone(),
            reason,
        };
        let event = self.store.decide_approval(run, decision).await?;
        // Followers see it at once, and a pool of workers in this process claims the run.
        self.notifier.event(&event);
        Ok(event)
    }

    /// Lets go of a run this process created (`lease`, from [`RunService::create`] or a
    /// session's new turn) so that any worker may claim it, and wakes the workers of this
    /// process.
    pub async fn enqueue(&self, lease: &Lease) -> Result<()> {
        self.store.release_lease(lease).await?;
        self.notifier.moved(&lease.run_id);
        Ok(())
    }

    /// Cancels `run`: `run_cancelled` is appended at once, whoever drives the run; its
    /// driver kills a running tool, releases the sandbox and stops. A cancelled run cannot
    /// be resumed. Refused while a rewind's restore of the workspace is due (a session's
    /// rewind turn not yet completed, or a run whose last event is `rewound`): a restore is
    /// one unit, so it is finished (by the process that made it, the next `toren chat`, or
    /// a worker), never left half done; unless it can never finish (its checkpoint pruned
    /// or damaged since), when the cancel is the way out and its reason says so.
    pub async fn cancel(
        &self,
        run: &RunId,
        reason: Option<String>,
        actor: &Actor,
    ) -> Result<Event> {
        let events = self.store.read(run, 0).await?;
        let state = RunState::from_events(&events).ok();
        let mut reason = match reason {
            Some(reason) => self.redact_with_events(&events, reason),
            None => format!("cancelled by {}", actor.label()),
        };
        if let Some(state) = &state
            && let Some(checkpoint) = state.restore_due()
        {
            // The way out of a restore that can never finish (its checkpoint damaged since
            // the rewind was recorded): the run ends, its workspace as the restore left it.
            match toren_worker::restore_blocked(state).await {
                None => {
                    return Err(Error::RestoreUnfinished {
                        run: run.clone(),
                        checkpoint: checkpoint.to_owned(),
                    });
                }
                Some(why) => {
                    reason = format!(
                        "{reason}; the rewind's restore could not finish ({why}), so the \
                         workspace is as that restore left it"
                    );
                }
            }
        }
        let cancelled = RunCancelled {
            reason,
            by: Some(actor.by.clone()),
            via: Some(actor.via.clone()),
        };
        let event = self.store.cancel_run(run, cancelled).await?;
        self.notifier.event(&event);
        Ok(event)
    }

    /// Whether nobody drives `run` and it has not ended: its lease is gone, expired, or
    /// held by a process that is provably gone.
    pub fn is_resumable(run: &RunSummary) -> bool {
        !run.status.is_terminal()
            && run.lease.as_ref().is_none_or(|lease| {
                !lease.is_live(jiff::Timestamp::now()) || holder::is_gone(&lease.holder)
            })
    }

    /// One run's summary (status, lease, counts) without folding its log.
    pub async fn summary(&self, run: &RunId) -> Result<RunSummary> {
        Ok(self.store.run(run).await?)
    }

    /// One run: its summary and its folded state. A run whose log cannot be replayed is
    /// recorded as failed with the reason first (unless a live process drives it).
    pub async fn get(&self, run: &RunId) -> Result<RunView> {
        let error = toren_worker::fail_if_unreplayable(
            self.store.as_ref(),
            run,
            &self.holder,
            self.settings.lease_ttl,
        )
        .await?;
        let summary = self.store.run(run).await?;
        let events = self.store.read(run, 0).await?;
        self.learn_values(&events);
        let state = RunState::from_events(&events).ok();
        let pending = state.as_ref().and_then(|s| match s.next_action() {
            Action::AwaitApproval { request, .. } => Some(request),
            _ => None,
        });
        Ok(RunView {
            resumable: Self::is_resumable(&summary),
            error: if state.is_some() { None } else { error },
            summary,
            state,
            pending,
        })
    }

    /// Runs, newest first, at most `limit`: the first page of [`RunService::list_page`]
    /// unfiltered. A run that claims to be resumable but whose log cannot be replayed is
    /// recorded as failed (with the reason) before it is listed.
    pub async fn list(&self, limit: u32) -> Result<Vec<RunSummary>> {
        Ok(self.list_page(&RunQuery::newest(limit)).await?.runs)
    }

    /// The run's events with `seq > after_seq`, in order.
    pub async fn events(&self, run: &RunId, after_seq: u64) -> Result<Vec<Event>> {
        let events = self.store.read(run, after_seq).await?;
        self.learn_values(&events);
        Ok(events)
    }

    /// Follows the run from `after_seq`: every event as it is appended (and, when the run is
    /// driven in this process, its streamed text), until the run ends.
    pub fn follow(&self, run: &RunId, after_seq: u64) -> Follow {
        Follow::new(
            Arc::clone(&self.store),
            &self.notifier,
            run.clone(),
            after_seq,
            self.settings.follow_poll,
        )
    }
}

/// Removes the private directory of a workspace made a moment ago for a run or a session
/// that is then not created (its seed refused): nothing else ever used it.
pub(crate) fn discard_new_workspace(policy: &ResolvedPolicy) {
    if let Some(dir) = policy
        .workspace
        .as_deref()
        .and_then(|ws| std::path::Path::new(ws).parent())
        && let Err(e) = std::fs::remove_dir_all(dir)
    {
        tracing::warn!(dir = %dir.display(), "could not remove an unused workspace: {e}");
    }
}
