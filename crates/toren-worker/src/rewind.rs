//! Rewinding a run: its workspace and its conversation go back to an earlier step as one
//! unit, crash-safely.
//!
//! Under the run's lease (refused while a live process drives it; a dead holder's is taken
//! over), the intent is recorded first: `rewound` names the step and the checkpoint to
//! restore, and from then on the fold gives the conversation as it was at that step. Then
//! the workspace is restored (idempotent, beneath a handle on it). A process killed in
//! between leaves `rewound` last in the log with its restore due
//! ([`RunState::restore_due`]); whoever drives the run next restores the workspace before
//! anything else ([`restore_if_due`]). Killed before the append, nothing changed at all.
//! Before any restore, whatever still runs in the run's sandbox is ended
//! ([`SandboxBackend::stop_processes`]): a command the killed driver left running in a
//! container would otherwise go on rewriting the restored workspace.
//! The lease is renewed while the rewind works (a restore can take longer than it lasts);
//! when it is lost or about to expire unrenewed, the restore stops before its next change.

use std::path::PathBuf;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use toren_agent::RunState;
use toren_protocol::{EventKind, Rewound, RunId};
use toren_sandbox::SandboxBackend;
use toren_store::{EventLog, Lease};

use crate::heartbeat::renewing;
use crate::{Error, checkpoint_policy, unreplayable};

/// Sets its flag when dropped: a restore running on a blocking thread stops with the
/// future that waits for it.
struct StopOnDrop(Arc<AtomicBool>);

impl Drop for StopOnDrop {
    fn drop(&mut self) {
        self.0.store(true, Ordering::Relaxed);
    }
}

/// Where a restore finds the backend of a run's sandbox, to end what still runs in it
/// first: a worker's own backends, or the ones a front door connects to on demand.
#[async_trait]
pub trait Backends: Send + Sync {
    /// The backend called `name`: `Ok(None)` when this process has none by that name
    /// (nothing is stopped then); an error says why it cannot be reached now.
    async fn named(&self, name: &str) -> Result<Option<Arc<dyn SandboxBackend>>, String>;
}

#[async_trait]
impl Backends for Vec<Arc<dyn SandboxBackend>> {
    async fn named(&self, name: &str) -> Result<Option<Arc<dyn SandboxBackend>>, String> {
        Ok(self.iter().find(|b| b.name() == name).cloned())
    }
}

/// No backends: nothing is stopped before a restore (a process that drives no sandboxes).
pub struct NoBackends;

#[async_trait]
impl Backends for NoBackends {
    async fn named(&self, _name: &str) -> Result<Option<Arc<dyn SandboxBackend>>, String> {
        Ok(None)
    }
}

/// What a rewind did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RewindOutcome {
    /// The `rewound` event's seq.
    pub seq: u64,
    pub to: u64,
    /// The checkpoint the workspace was restored to; `None`: it was already as at `to`.
    pub checkpoint: Option<String>,
}

/// Rewinds `run` to step `to` (see the module doc) as `holder`, releasing the lease after;
/// what still runs in its sandbox is ended through `backends` first.
pub async fn rewind(
    store: &dyn EventLog,
    backends: &dyn Backends,
    run: &RunId,
    to: u64,
    by: Option<String>,
    holder: &str,
    ttl: Duration,
) -> Result<RewindOutcome, Error> {
    // Checked before the lease, so that a run that cannot be rewound is not touched.
    let events = store.read(run, 0).await?;
    let state = RunState::from_events(&events)?;
    plan(&state, &events, to)?;
    let lease = unreplayable::acquire(store, run, holder, ttl).await?;
    // Renewed while it works: a restore of a large workspace can outlast the lease.
    let held = rewind_held(store, backends, &lease, to, by);
    let outcome = renewing(store, &lease, ttl, held).await;
    if let Err(e) = store.release_lease(&lease).await {
        tracing::warn!(run = %run, "could not release the lease after the rewind: {e}");
    }
    outcome
}

async fn rewind_held(
    store: &dyn EventLog,
    backends: &dyn Backends,
    lease: &Lease,
    to: u64,
    by: Option<String>,
) -> Result<RewindOutcome, Error> {
    let run = &lease.run_id;
    // Read again under the lease: what a process that just stopped wrote counts.
    let events = store.read(run, 0).await?;
    let mut state = RunState::from_events(&events)?;
    let checkpoint = plan(&state, &events, to)?;
    if let Some(id) = &checkpoint {
        // A checkpoint that cannot be restored (pruned, damaged) refuses the rewind with
        // nothing written, rather than leave a restore due that can never finish.
        let ws = workspace(&state).map_err(|why| Error::Rewind {
            run: run.to_string(),
            why,
        })?;
        crate::checkpoints::restorable(&ws, id)
            .await
            .map_err(|why| Error::Rewind {
                run: run.to_string(),
                why: format!("the workspace at step {to}: {why}"),
            })?;
        // Ended before the intent is recorded too: a backend that cannot be reached fails
        // the rewind with nothing written (the restore below ends what started since).
        stop_processes(&state, backends).await?;
    }
    let kind = EventKind::Rewound(Rewound {
        to,
        checkpoint: checkpoint.clone(),
        by,
        turn: None,
    });
    let appended = store.append(lease, state.last_seq, vec![kind]).await?;
    for event in &appended {
        state.apply(event)?;
    }
    let seq = state.last_seq;
    restore_if_due(&state, backends).await?;
    // A run that paused at its budget and went back to a step before the pause still has
    // spent what it spent: it pauses again here, so that it waits for a raise (and every
    // front door says so) rather than look runnable with nobody to drive it.
    if let toren_agent::Action::ReachBudget { event } = state.next_action() {
        let appended = store
            .append(lease, state.last_seq, vec![EventKind::BudgetReached(event)])
            .await?;
        for event in &appended {
            state.apply(event)?;
        }
    }
    Ok(RewindOutcome {
        seq,
        to,
        checkpoint,
    })
}

/// Carries out a session's rewind turn held by `lease` (its `run_created` names the step
/// and the checkpoint, `TurnStart::rewound`): the workspace restored (idempotent), then the
/// turn completed. The same as a worker driving it does, for the front door that made it;
/// a process killed in between leaves it for whoever drives the turn next.
/// The lease is renewed while it works (for as long as it had left when this began, at
/// least a second).
pub async fn complete_rewind_turn(
    store: &dyn EventLog,
    backends: &dyn Backends,
    lease: &Lease,
) -> Result<u64, Error> {
    let left = lease.expires_at.duration_since(jiff::Timestamp::now());
    let ttl = Duration::try_from(left)
        .unwrap_or(Duration::ZERO)
        .max(Duration::from_secs(1));
    let held = complete_rewind_turn_held(store, backends, lease);
    renewing(store, lease, ttl, held).await
}

async fn complete_rewind_turn_held(
    store: &dyn EventLog,
    backends: &dyn Backends,
    lease: &Lease,
) -> Result<u64, Error> {
    let events = store.read(&lease.run_id, 0).await?;
    let mut state = RunState::from_events(&events)?;
    if state.session_rewind().is_none() {
        return Err(Error::Rewind {
            run: lease.run_id.to_string(),
            why: "it is not a session's rewind turn".to_owned(),
        });
    }
    restore_if_due(&state, backends).await?;
    let toren_agent::Action::Complete { event } = state.next_action() else {
        return Ok(state.last_seq);
    };
    let appended = store
        .append(lease, state.last_seq, vec![EventKind::RunCompleted(event)])
        .await?;
    for event in &appended {
        state.apply(event)?;
    }
    Ok(state.last_seq)
}

/// Checks that `to` can be gone back to and finds the checkpoint to restore: the one taken
/// before the first call after `to` that could change the workspace (`None`: no such call
/// started since, so the workspace is as it was then).
pub fn plan(
    state: &RunState,
    events: &[toren_protocol::Event],
    to: u64,
) -> Result<Option<String>, Error> {
    let refuse = |why: String| Error::Rewind {
        run: state.run_id.to_string(),
        why,
    };
    state.can_rewind_to(to).map_err(refuse)?;
    checkpoint_for(state, events, to).map_err(refuse)
}

/// The checkpoint that holds the workspace as it was at step `to` (see [`plan`]).
fn checkpoint_for(
    state: &RunState,
    events: &[toren_protocol::Event],
    to: u64,
) -> Result<Option<String>, String> {
    let first_change = events.iter().find_map(|e| match &e.kind {
        EventKind::ToolStarted(s)
            if e.seq > to && matches!(s.tool.as_str(), "bash" | "write_file" | "edit_file") =>
        {
            Some((e.seq, s.checkpoint.clone()))
        }
        _ => None,
    });
    match first_change {
        None => Ok(None),
        Some((_, Some(id))) => {
            workspace(state)?;
            Ok(Some(id))
        }
        Some((seq, None)) => Err(format!(
            "the call started at step {seq} may have changed the workspace, and no checkpoint \
             was taken before it (checkpoints are off for this run, or failed then), so the \
             workspace as it was at step {to} is not known"
        )),
    }
}

/// What a new run going on from step `to` of the ended run `state` begins with: the
/// conversation and calls of the step ([`RunState::fork_at`]) and the checkpoint of its
/// workspace then (`None`: nothing changed the workspace since). Refused for a step the
/// run cannot continue from, a session's turn (its session goes back instead), and a
/// workspace as it was then that is not known or not on this host.
pub fn plan_fork(
    state: &RunState,
    events: &[toren_protocol::Event],
    to: u64,
) -> Result<toren_protocol::Forked, Error> {
    let refuse = |why: String| Error::Rewind {
        run: state.run_id.to_string(),
        why,
    };
    if !state.status.is_terminal() {
        return Err(refuse(format!(
            "it has not ended ({}): it is rewound in place, not forked",
            state.status
        )));
    }
    let session = events.first().and_then(|e| match &e.kind {
        EventKind::RunCreated(created) => created.session.as_ref(),
        _ => None,
    });
    if let Some(turn) = session {
        return Err(refuse(format!(
            "it is turn {} of session {}: the session goes back instead (toren rewind {} --to \
             {}.N)",
            turn.turn, turn.name, turn.name, turn.turn
        )));
    }
    let mut forked = state.fork_at(to).map_err(refuse)?;
    if state.policy.is_some() {
        workspace(state).map_err(refuse)?;
    }
    forked.checkpoint = checkpoint_for(state, events, to).map_err(refuse)?;
    Ok(forked)
}

/// Fills `into`, the new workspace of a run going on from an ended run's step, with the
/// ended run's workspace as it was then: its checkpoint restored there, or when nothing
/// had changed it since (`checkpoint` is `None`), a copy of it as it is (through a new
/// checkpoint of it). Paths the ended run's policy excludes from checkpoints are not
/// carried over. Checked whole before the first change; `into` is expected empty.
pub async fn fill_fork_workspace(
    origin: &RunState,
    checkpoint: Option<&str>,
    into: &std::path::Path,
) -> Result<Option<String>, Error> {
    let run = origin.run_id.to_string();
    let Some(policy) = &origin.policy else {
        return Ok(None);
    };
    let ws = workspace(origin).map_err(|why| Error::Rewind {
        run: run.clone(),
        why,
    })?;
    let exclude = match checkpoint_policy(policy) {
        Ok(p) => p.map(|p| p.exclude).unwrap_or_default(),
        Err(source) => return Err(Error::Restore { run, source }),
    };
    let id = checkpoint.map(str::to_owned);
    let into = into.to_path_buf();
    let filled = tokio::task::spawn_blocking(move || {
        let root = toren_checkpoint::Policy::store_for(&ws).ok_or_else(|| {
            toren_checkpoint::Error::BadPath {
                path: ws.display().to_string(),
                id: id.clone().unwrap_or_default(),
            }
        })?;
        let store = toren_checkpoint::Store::open(root)?;
        let id = match id {
            Some(id) => id,
            None => store.checkpoint(&ws, &exclude)?.id,
        };
        store.restore(&id, &into, &exclude)?;
        Ok::<_, toren_checkpoint::Error>(id)
    })
    .await;
    match filled {
        Ok(Ok(id)) => Ok(Some(id)),
        Ok(Err(source)) => Err(Error::Restore { run, source }),
        Err(join) => Err(Error::Rewind {
            run,
            why: format!("the copy of the workspace failed: {join}"),
        }),
    }
}

/// The run's workspace on this host, where its checkpoints are (a `local` or `docker`
/// sandbox's); why there is none otherwise.
pub(crate) fn workspace(state: &RunState) -> Result<PathBuf, String> {
    let policy = state
        .policy
        .as_ref()
        .ok_or_else(|| "the run has no sandbox".to_owned())?;
    if !matches!(policy.backend.as_str(), "local" | "docker") {
        return Err(format!(
            "its workspace is in a `{}` sandbox, not on this host, and has no checkpoints",
            policy.backend
        ));
    }
    policy
        .workspace
        .clone()
        .or_else(|| state.sandbox.as_ref().map(|s| s.workspace.clone()))
        .map(PathBuf::from)
        .ok_or_else(|| "the run has no workspace yet".to_owned())
}

/// Why the restore due in `state` can never finish (its checkpoint pruned or damaged
/// since the rewind was recorded), or `None` when it can, or none is due: what lets a run
/// stuck that way be cancelled.
pub async fn restore_blocked(state: &RunState) -> Option<String> {
    let id = state.restore_due()?;
    match workspace(state) {
        Ok(ws) => crate::checkpoints::restorable(&ws, id).await.err(),
        Err(why) => Some(why),
    }
}

/// Ends whatever still runs in the run's sandbox (a command its killed driver was running
/// goes on in a container), so that nothing rewrites the workspace once it is restored.
/// A backend that cannot be reached fails the restore: the workspace is left alone, and a
/// restore already recorded stays due for a later try.
async fn stop_processes(state: &RunState, backends: &dyn Backends) -> Result<(), Error> {
    let Some(policy) = &state.policy else {
        return Ok(());
    };
    let refuse = |why: String| Error::SandboxUnreachable {
        run: state.run_id.to_string(),
        backend: policy.backend.clone(),
        why,
    };
    let Some(backend) = backends.named(&policy.backend).await.map_err(refuse)? else {
        return Ok(());
    };
    let key = policy
        .sandbox_key
        .clone()
        .unwrap_or_else(|| state.run_id.to_string());
    backend
        .stop_processes(&key)
        .await
        .map_err(|e| refuse(e.to_string()))
}

/// Restores the workspace if the run's last event is a `rewound` whose restore may not
/// have finished, after ending what still runs in its sandbox (through `backends`).
/// Idempotent; run before anything else by whoever drives the run.
pub async fn restore_if_due(state: &RunState, backends: &dyn Backends) -> Result<(), Error> {
    let Some(id) = state.restore_due().map(str::to_owned) else {
        return Ok(());
    };
    let run = state.run_id.to_string();
    let ws = workspace(state).map_err(|why| Error::Rewind {
        run: run.clone(),
        why,
    })?;
    stop_processes(state, backends).await?;
    let policy = state.policy.as_ref().map(checkpoint_policy).transpose();
    let exclude = match policy {
        Ok(p) => p.flatten().map(|p| p.exclude).unwrap_or_default(),
        Err(source) => return Err(Error::Restore { run, source }),
    };
    // Dropped (its lease lost or about to expire): the blocking restore stops too.
    let stop = StopOnDrop(Arc::new(AtomicBool::new(false)));
    let stopped = Arc::clone(&stop.0);
    let restored = tokio::task::spawn_blocking(move || {
        let root = toren_checkpoint::Policy::store_for(&ws).ok_or_else(|| {
            toren_checkpoint::Error::BadPath {
                path: ws.display().to_string(),
                id: id.clone(),
            }
        })?;
        toren_checkpoint::Store::open(root)?.restore_unless(&id, &ws, &exclude, &stopped)
    })
    .await;
    drop(stop);
    match restored {
        Ok(Ok(())) => Ok(()),
        Ok(Err(source)) => Err(Error::Restore { run, source }),
        Err(join) => Err(Error::Rewind {
            run,
            why: format!("the restore task failed: {join}"),
        }),
    }
}
