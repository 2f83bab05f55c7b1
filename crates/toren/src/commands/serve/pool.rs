//! The pool of in-process workers of `toren serve`: it claims runs the store says a worker
//! may claim (queued or abandoned, oldest first; never one waiting for a human), drives
//! each on its own task, at most `slots` at once, and wakes when something moved in this
//! process (a run created, a decision, a run let go of) or else every poll interval.
//!
//! What it does not drive: runs bound to a channel (a `toren chat` session's turns: that
//! chat resumes them) and runs pinned to a sandbox backend this process does not serve;
//! they are looked at once and left for whoever can. A run that waits for a human is let go
//! of (the worker parks approvals): it holds no slot while it waits, and the decision makes
//! it claimable again. When a session's turn ends, the message that waited behind it
//! becomes the next turn.
//!
//! Stopping: `drain` stops claiming and lets each run finish the step under way (its tool
//! or model call, journaled), `halt` drops whatever is still running; the runs stay
//! resumable either way.

use std::collections::{HashMap, HashSet};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use toren_protocol::{EventKind, RunId, SessionTurn};
use toren_runtime::{RunService, Sent};
use toren_worker::{Outcome, Worker};
use tracing::Instrument as _;

/// How many claimable runs each pass looks at beyond those it passes over.
const CLAIM_SCAN: u32 = 64;
/// How often sessions are looked at for a message that waits behind a turn that ended
/// while no worker of this process drove it.
const SESSION_SWEEP: Duration = Duration::from_secs(30);

/// What the pool knows about a run it looked at.
#[derive(Clone, Debug)]
enum Seen {
    /// This process drives it; `turn` if it is a session's turn.
    Drive { turn: Option<SessionTurn> },
    /// Not for this process (said once in the log).
    Skip,
}

pub(crate) struct Pool {
    pub(crate) service: RunService,
    pub(crate) worker: Arc<Worker>,
    pub(crate) slots: usize,
    pub(crate) poll: Duration,
    /// The backends this process serves, by name.
    pub(crate) backends: Vec<String>,
    /// This process's lease holder name, for the session turns it starts.
    pub(crate) holder: String,
    /// Told how long each claimed run waited for a worker.
    pub(crate) metrics: toren_server::Metrics,
}

/// The runs being driven and what the pool learnt about runs, shared with the drive tasks.
#[derive(Default)]
struct Book {
    driving: HashSet<RunId>,
    seen: HashMap<RunId, Seen>,
}

impl Pool {
    /// Claims and drives runs until `drain` fires, then waits for the runs being driven to
    /// stop (each after its current step, or at once when `halt` fires).
    pub(crate) async fn run(self, drain: CancellationToken, halt: CancellationToken) {
        if self.slots == 0 {
            return;
        }
        let pool = Arc::new(self);
        let book: Arc<Mutex<Book>> = Arc::default();
        let mut moves = pool.service.notifier().moves();
        let mut driving = JoinSet::new();
        let mut sweep = tokio::time::interval(SESSION_SWEEP);
        while !drain.is_cancelled() {
            let free = pool.slots.saturating_sub(driving.len());
            if free > 0 {
                pool.claim(free, &book, &mut driving, &drain, &halt).await;
            }
            tokio::select! {
                () = drain.cancelled() => {}
                () = tokio::time::sleep(pool.poll) => {}
                _ = moves.next() => {}
                Some(_) = driving.join_next(), if !driving.is_empty() => {}
                _ = sweep.tick() => pool.sweep_sessions(&book).await,
            }
        }
        while driving.join_next().await.is_some() {}
    }

    /// Claims up to `free` runs and starts driving them.
    async fn claim(
        self: &Arc<Self>,
        free: usize,
        book: &Arc<Mutex<Book>>,
        driving: &mut JoinSet<()>,
        drain: &CancellationToken,
        halt: &CancellationToken,
    ) {
        // Looks past the runs this process leaves alone or drives already, so that old runs
        // it never drives (a chat's abandoned turns) cannot hide the newer ones.
        let passed = {
            let book = book.lock().unwrap_or_else(PoisonError::into_inner);
            let skipped = book
                .seen
                .values()
                .filter(|s| matches!(s, Seen::Skip))
                .count();
            skipped + book.driving.len()
        };
        let scan = u32::try_from(passed)
            .unwrap_or(u32::MAX)
            .saturating_add(CLAIM_SCAN);
        let candidates = match self.service.claimable(scan).await {
            Ok(runs) => runs,
            Err(e) => {
                tracing::warn!("cannot look for runs to claim: {e}");
                return;
            }
        };
        // What was learnt about runs that are no longer waiting is dropped, so a long-lived
        // server's memory does not grow with every run it ever saw.
        {
            let mut book = book.lock().unwrap_or_else(PoisonError::into_inner);
            let Book { driving, seen } = &mut *book;
            seen.retain(|id, _| driving.contains(id) || candidates.iter().any(|r| r.id == *id));
        }
        let mut started = 0;
        for run in candidates {
            if started == free {
                break;
            }
            let busy = book
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .driving
                .contains(&run.id);
            if busy {
                continue;
            }
            let Seen::Drive { turn } = self.seen(&run.id, book).await else {
                continue;
            };
            // Another process may claim it first: then it is skipped.
            let Ok(lease) = self.worker.acquire(&run.id).await else {
                continue;
            };
            // Claimable since its last event, or since its lease expired if that is later
            // (a run a stopped driver left).
            let since = run
                .lease
                .as_ref()
                .map_or(run.updated_at, |l| l.expires_at.max(run.updated_at));
            let waited = jiff::Timestamp::now()
                .duration_since(since)
                .try_into()
                .unwrap_or(Duration::ZERO);
            self.metrics.claimed(waited);
            book.lock()
                .unwrap_or_else(PoisonError::into_inner)
                .driving
                .insert(run.id.clone());
            started += 1;
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
                    tracing::info!("claimed");
                    let outcome = pool.worker.drive_draining(lease, &drain, &halt).await;
                    let ended = pool.stopped(&id, outcome, &book);
                    book.lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .driving
                        .remove(&id);
                    if ended && let Some(turn) = turn {
                        pool.next_turn(&turn).await;
                    }
                }
                .instrument(span),
            );
        }
    }

    /// Whether this process drives `run` (looked at once).
    async fn seen(&self, run: &RunId, book: &Mutex<Book>) -> Seen {
        let known = book
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .seen
            .get(run)
            .cloned();
        if let Some(seen) = known {
            return seen;
        }
        let seen = self.look_at(run).await;
        book.lock()
            .unwrap_or_else(PoisonError::into_inner)
            .seen
            .insert(run.clone(), seen.clone());
        seen
    }

    /// Whether this process drives `run`, from its `run_created`.
    async fn look_at(&self, run: &RunId) -> Seen {
        let created = match self.service.events(run, 0).await {
            Ok(events) => events.into_iter().find_map(|e| match e.kind {
                EventKind::RunCreated(created) => Some(created),
                _ => None,
            }),
            Err(e) => {
                tracing::warn!(run_id = %run, "cannot read the run: {e}");
                return Seen::Skip;
            }
        };
        let Some(created) = created else {
            return Seen::Skip;
        };
        if let Some(channel) = &created.channel {
            tracing::info!(
                run_id = %run,
                channel = %channel.kind,
                "not driven here: the run is bound to a {} channel, whose front door resumes it",
                channel.kind
            );
            return Seen::Skip;
        }
        if let Some(policy) = &created.policy
            && !self.backends.contains(&policy.backend)
        {
            tracing::info!(
                run_id = %run,
                backend = %policy.backend,
                "not driven here: the run's sandbox backend is not served by this process \
                 (TOREN_SANDBOX)"
            );
            return Seen::Skip;
        }
        Seen::Drive {
            turn: created.session,
        }
    }

    /// Logs how driving `run` stopped; whether the run has ended. A run that cannot be
    /// driven here is not claimed again by this process.
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
            Ok(Outcome::Interrupted) => {
                tracing::info!("stopped; the run stays resumable");
                false
            }
            Err(e) => {
                tracing::warn!("cannot drive the run: {e}");
                book.lock()
                    .unwrap_or_else(PoisonError::into_inner)
                    .seen
                    .insert(run.clone(), Seen::Skip);
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
        match self.service.next_queued(&session, &self.holder, None).await {
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

    /// Starts the waiting message of each session whose turns ended while no worker of
    /// this process drove them (e.g. before a restart). Only sessions whose last turn this
    /// process would drive: a chat's queue is its own.
    async fn sweep_sessions(&self, book: &Mutex<Book>) {
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
            if let Seen::Drive { turn: Some(turn) } = self.seen(&last.run_id, book).await {
                self.next_turn(&turn).await;
            }
        }
    }
}
