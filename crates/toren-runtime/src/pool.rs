//! A pool of in-process workers (what `toren serve` and `toren worker` run, and what an
//! embedder hosts to drive runs): it claims
//! runs through the store's atomic claim (`RunService::claim`: oldest first, only runs of
//! the volume, backends and channels this process serves, within the per-agent limit;
//! never one waiting for a human), drives each on its own task, at most `slots` at once,
//! and wakes when something moved — in this process (the notifier: a run created, a
//! decision, a run let go of), in another (the store's `moves`, when it has them: Postgres
//! `LISTEN/NOTIFY`) — or else every poll interval. It registers and heartbeats in the
//! worker registry (`pool/registry.rs`) and says which runs it drives.
//!
//! A run whose lease is lost (taken over after this process could not renew it, e.g. cut
//! off from the database) has already had its work stopped by the worker; the pool logs
//! "lease lost", frees the slot, and may claim the run again later. Claims that fail (the
//! database is unreachable) back off exponentially up to a cap (`pool/backoff.rs`), with a
//! log line when claiming stops working and one when it works again. A run that cannot be
//! driven here for another reason is passed over from then on (`skip`), and the heartbeat
//! says which and why, so `toren runs show` and `toren workers list` tell people instead
//! of the run being claimed again and again; a run being driven is never claimed again
//! either, even in the moment between its driver letting go and recording why. When a
//! session's
//! turn ends, the message that waited behind it becomes the next turn.
//!
//! Stopping: `drain` stops claiming and lets each run finish the step under way (its tool
//! or model call, journaled), `halt` drops whatever is still running; the runs stay
//! resumable either way, and the pool deregisters.

mod backoff;
mod registry;

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use crate::{RunService, Sent};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use toren_protocol::{EventKind, RunId, SessionTurn};
use toren_store::ClaimRequest;
use toren_worker::{Outcome, Worker};
use tracing::Instrument as _;

pub use registry::Identity;

/// How often sessions are looked at for a message that waits behind a turn that ended
/// while no worker of this process drove it.
const SESSION_SWEEP: Duration = Duration::from_secs(30);
/// The longest time between two heartbeats in the worker registry (a third of the lease
/// ttl when that is shorter).
const BEAT: Duration = Duration::from_secs(2);
/// The fallback poll when the store tells of other processes' moves.
const SLOW_POLL: Duration = Duration::from_secs(5);

pub struct Pool {
    pub service: RunService,
    pub worker: Arc<Worker>,
    /// Runs driven at once.
    pub slots: usize,
    /// How often the store is looked at when nothing said that a run moved.
    pub poll: Duration,
    /// What each claim asks for: this process's holder and lease ttl, the volumes,
    /// backends and channels it serves, the per-agent limit (`skip` is the pool's own).
    pub claim: ClaimRequest,
    /// How this pool appears in the worker registry; `None`: it does not register.
    pub identity: Option<Identity>,
    /// Told how long each claimed run waited for a worker.
    pub claims: Arc<dyn ClaimObserver>,
}

/// Told of each run the pool claims (e.g. the API's `/metrics`).
pub trait ClaimObserver: Send + Sync {
    /// A run was claimed after waiting `waited` for a worker.
    fn claimed(&self, waited: Duration);
}

/// Tells nobody.
pub struct NoClaimObserver;

impl ClaimObserver for NoClaimObserver {
    fn claimed(&self, _waited: Duration) {}
}

/// The runs being driven and those passed over (with why), shared with the drive tasks.
#[derive(Default)]
pub(crate) struct Book {
    pub(crate) driving: HashSet<RunId>,
    pub(crate) skip: HashMap<RunId, String>,
}

impl Book {
    /// What a claim must leave alone: the runs passed over, and the runs being driven — a
    /// driver that cannot drive its run releases the lease before it is told and records
    /// why, and the run must not be claimed again in between.
    fn claim_skip(&self) -> Vec<RunId> {
        self.skip
            .keys()
            .chain(&self.driving)
            .cloned()
            .collect::<HashSet<_>>()
            .into_iter()
            .collect()
    }
}

impl Pool {
    /// Claims and drives runs until `drain` fires, then waits for the runs being driven to
    /// stop (each after its current step, or at once when `halt` fires).
    pub async fn run(self, drain: CancellationToken, halt: CancellationToken) {
        if self.slots == 0 {
            return;
        }
        let pool = Arc::new(self);
        let book: Arc<Mutex<Book>> = Arc::default();
        let mut moves = pool.service.notifier().moves();
        let mut elsewhere = pool.service.store().moves();
        let poll = if elsewhere.is_some() {
            pool.poll.max(SLOW_POLL)
        } else {
            pool.poll
        };
        let mut beats = match (pool.identity.clone(), pool.service.workers()) {
            (Some(identity), Some(registry)) => Some(registry::Beats::start(
                Arc::clone(registry),
                identity,
                Arc::clone(&book),
                (pool.claim.ttl / 3).min(BEAT),
            )),
            _ => None,
        };
        let mut driving = JoinSet::new();
        let mut sweep = tokio::time::interval(SESSION_SWEEP);
        let mut backoff = backoff::Backoff::new();
        while !drain.is_cancelled() {
            let free = pool.slots.saturating_sub(driving.len());
            let wait = match backoff.delay() {
                Some(delay) => delay,
                None if free > 0 => {
                    pool.claim(free, &book, &mut driving, &drain, &halt, &mut backoff)
                        .await;
                    backoff.delay().unwrap_or(poll)
                }
                None => poll,
            };
            tokio::select! {
                () = drain.cancelled() => {}
                () = tokio::time::sleep(wait) => {}
                _ = moves.next() => {}
                moved = other_process_moves(&mut elsewhere) => {
                    if moved.is_none() {
                        elsewhere = None;
                    }
                }
                Some(_) = driving.join_next(), if !driving.is_empty() => {}
                _ = sweep.tick() => pool.sweep_sessions(&book).await,
            }
        }
        while driving.join_next().await.is_some() {}
        if let Some(beats) = beats.take() {
            beats.stop().await;
        }
    }

    /// Claims up to `free` runs and starts driving them; a failed claim starts (or keeps)
    /// the backoff.
    async fn claim(
        self: &Arc<Self>,
        free: usize,
        book: &Arc<Mutex<Book>>,
        driving: &mut JoinSet<()>,
        drain: &CancellationToken,
        halt: &CancellationToken,
        backoff: &mut backoff::Backoff,
    ) {
        for _ in 0..free {
            let request = ClaimRequest {
                skip: lock(book).claim_skip(),
                ..self.claim.clone()
            };
            let (run, lease) = match self.service.claim(&request).await {
                Ok(Some(claimed)) => {
                    backoff.succeeded();
                    claimed
                }
                Ok(None) => {
                    backoff.succeeded();
                    return;
                }
                Err(e) => {
                    backoff.failed(&e);
                    return;
                }
            };
            // Claimable since its last event, or since its lease expired if that is later
            // (a run a stopped driver left). The claim itself just wrote the lease, so the
            // previous one is not known here: the last event is the measure.
            let waited = jiff::Timestamp::now()
                .duration_since(run.updated_at)
                .try_into()
                .unwrap_or(Duration::ZERO);
            self.claims.claimed(waited);
            lock(book).driving.insert(run.id.clone());
            let span = tracing::info_span!("run", run_id = %run.id);
            let (pool, book, drain, halt) = (
                Arc::clone(self),
                Arc::clone(book),
                drain.clone(),
                halt.clone(),
            );
            let id = run.id.clone();
            driving.spawn(
                async move {
                    tracing::info!(holder = %lease.holder, token = lease.token, "claimed");
                    let outcome = pool.worker.drive_draining(lease, &drain, &halt).await;
                    let ended = pool.stopped(&id, outcome, &book);
                    lock(&book).driving.remove(&id);
                    if ended && let Some(turn) = pool.turn_of(&id).await {
                        pool.next_turn(&turn).await;
                    }
                }
                .instrument(span),
            );
        }
    }

    /// The session turn `run` is, from its `run_created`.
    async fn turn_of(&self, run: &RunId) -> Option<SessionTurn> {
        let events = self.service.events(run, 0).await.ok()?;
        events.into_iter().find_map(|e| match e.kind {
            EventKind::RunCreated(created) => created.session,
            _ => None,
        })
    }

    /// Logs how driving `run` stopped; whether the run has ended. A run that cannot be
    /// driven here is not claimed again by this process; one whose lease was lost, that
    /// met an unreachable database or an unavailable sandbox service may be.
    fn stopped(
        &self,
        run: &RunId,
        outcome: Result<Outcome, toren_worker::Error>,
        book: &Mutex<Book>,
    ) -> bool {
        match outcome {
            Ok(Outcome::Ended { status, .. }) => {
                tracing::info!(%status, "run ended");
                true
            }
            Ok(Outcome::AwaitingApproval { call_id }) => {
                tracing::info!(call_id = %call_id, "waiting for a decision; let go of");
                false
            }
            Ok(Outcome::AwaitingBudget) => {
                tracing::info!("paused at its budget; let go of until it is raised");
                false
            }
            Ok(Outcome::Interrupted) => {
                tracing::info!("stopped; the run stays resumable");
                false
            }
            Err(e @ toren_worker::Error::LeaseLost { .. }) => {
                tracing::warn!("lease lost: {e}");
                false
            }
            Err(e @ toren_worker::Error::LeaseExpiring { .. }) => {
                tracing::warn!("lease lost: {e}");
                false
            }
            // E2B's limits or capacity: the run goes back to the queue and is tried again
            // (each try waits out the backend's own backoff first).
            Err(e @ toren_worker::Error::SandboxUnavailable { .. }) => {
                tracing::warn!("stopped driving: {e}");
                false
            }
            Err(toren_worker::Error::Store(e)) if e.is_retryable() || is_unreachable(&e) => {
                tracing::warn!(
                    "stopped driving: the database failed ({e}); the run stays resumable"
                );
                false
            }
            Err(e) => {
                tracing::warn!(
                    "cannot drive the run: {e}; this worker leaves it alone from now on \
                     (`toren runs show` says why)"
                );
                lock(book).skip.insert(run.clone(), e.to_string());
                false
            }
        }
    }

    /// The message that waited behind `turn` (now ended) becomes the session's next turn,
    /// queued for any worker.
    async fn next_turn(&self, turn: &SessionTurn) {
        let session = match self.service.session(&turn.name).await {
            Ok(session) if session.id == turn.id => session,
            // Removed (or removed and its name reused): nothing waits.
            Ok(_) | Err(_) => return,
        };
        match self
            .service
            .next_queued(&session, &self.claim.holder, None)
            .await
        {
            Ok(Some(Sent::Turn { created, turn })) => {
                tracing::info!(
                    session = %session.name,
                    turn,
                    next_run_id = %created.run_id,
                    "the message that waited is the next turn"
                );
                if let Err(e) = self.service.enqueue(&created.lease).await {
                    tracing::warn!("cannot queue the session's next turn: {e}");
                }
            }
            Ok(Some(Sent::Queued { .. }) | None) => {}
            Err(e) => tracing::warn!(session = %session.name, "cannot start the next turn: {e}"),
        }
    }

    /// Starts the waiting message of each session whose turns ended while no worker drove
    /// them (e.g. before a restart). Only sessions whose last turn this process would
    /// drive: a chat's queue is its own. Also forgets passed-over runs that have ended.
    async fn sweep_sessions(&self, book: &Mutex<Book>) {
        let skipped: Vec<RunId> = lock(book).skip.keys().cloned().collect();
        for run in skipped {
            if let Ok(summary) = self.service.summary(&run).await
                && summary.status.is_terminal()
            {
                lock(book).skip.remove(&run);
            }
        }
        let Ok(sessions) = self.service.sessions().await else {
            return;
        };
        for session in sessions {
            let Ok(view) = self.service.session_view(&session.name).await else {
                continue;
            };
            let Some(last) = view.turns.last() else {
                continue;
            };
            if !last.status.is_terminal() {
                continue;
            }
            if let Some(turn) = self.drives(&last.run_id).await {
                self.next_turn(&turn).await;
            }
        }
    }

    /// The session turn `run` is, if this process would drive it: not bound to a channel
    /// it cannot deliver to, of a backend and volume it serves.
    async fn drives(&self, run: &RunId) -> Option<SessionTurn> {
        let events = self.service.events(run, 0).await.ok()?;
        let created = events.into_iter().find_map(|e| match e.kind {
            EventKind::RunCreated(created) => Some(created),
            _ => None,
        })?;
        let request = &self.claim;
        let bound_elsewhere = created
            .channel
            .as_ref()
            .is_some_and(|c| !request.channels.contains(&c.kind));
        let pinned_elsewhere = created.policy.as_ref().is_some_and(|p| {
            !request.backends.contains(&p.backend)
                || p.volume
                    .as_ref()
                    .is_some_and(|v| !request.volumes.contains(v))
        });
        if bound_elsewhere || pinned_elsewhere {
            return None;
        }
        created.session
    }
}

/// The next run another process moved, when the store tells of them; never, when it does
/// not. `None` once the store's channel closed.
async fn other_process_moves(
    moves: &mut Option<tokio::sync::broadcast::Receiver<RunId>>,
) -> Option<()> {
    let Some(receiver) = moves.as_mut() else {
        return std::future::pending().await;
    };
    match receiver.recv().await {
        // A lagging receiver missed some: a claim pass catches up with all of them.
        Ok(_) | Err(tokio::sync::broadcast::error::RecvError::Lagged(_)) => Some(()),
        Err(tokio::sync::broadcast::error::RecvError::Closed) => None,
    }
}

/// Whether a store error says the database could not be reached or used at all.
fn is_unreachable(e: &toren_store::Error) -> bool {
    matches!(
        e,
        toren_store::Error::Database(_) | toren_store::Error::Batch(_)
    )
}

pub(crate) fn lock(book: &Mutex<Book>) -> std::sync::MutexGuard<'_, Book> {
    book.lock().unwrap_or_else(PoisonError::into_inner)
}
