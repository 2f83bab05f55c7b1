//! The storage contract: the [`EventLog`] trait every backend implements, and the
//! [`RunSummary`] it reports. Lease values live in `lease.rs`, the queries over many runs
//! in `query.rs`, errors in `error.rs`; the conformance suite (`conformance/`) checks every
//! rule written here.

use std::collections::HashMap;
use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use toren_protocol::{
    ApprovalDecided, BudgetRaised, Event, EventKind, RunCancelled, RunCreated, RunId, RunStatus,
};

use crate::{ClaimQuery, ClaimRequest, Lease, LeaseInfo, Result, RunPage, RunQuery};

/// The holder named by [`EventLog::create_queued`]'s default for the moment it holds a new
/// run.
const QUEUED_HOLDER: &str = "(queued by create_queued)";

/// One row of `toren runs list`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RunSummary {
    pub id: RunId,
    pub agent: String,
    pub status: RunStatus,
    /// The `at` of the run's `run_created` event.
    pub created_at: Timestamp,
    /// The `at` of the run's last event.
    pub updated_at: Timestamp,
    /// The seq of the last event.
    pub last_seq: u64,
    /// The run's current lease, live or expired; `None` once released, once the run has
    /// ended, and for runs written before leases existed.
    pub lease: Option<LeaseInfo>,
}

impl RunSummary {
    /// Whether a process may pick the run up at `now`: it has not ended and nobody holds a
    /// live lease on it (its driver stopped, was killed, or stopped renewing).
    pub fn is_resumable(&self, now: Timestamp) -> bool {
        !self.status.is_terminal() && !self.lease.as_ref().is_some_and(|l| l.is_live(now))
    }
}

/// How many runs a store holds in each status, and how many of them a worker may claim
/// now: what a metrics scrape asks, answered by counting rows, never by listing runs.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RunCounts {
    /// Runs per status; a status that no run is in is absent.
    pub by_status: HashMap<RunStatus, u64>,
    /// Runs a worker may claim now, as [`ClaimQuery::free`](crate::ClaimQuery::free) finds
    /// them: status `queued` or `running`, and no lease or one expired by the store's clock.
    pub claimable: u64,
}

impl RunCounts {
    /// How many runs are in `status`.
    pub fn of(&self, status: RunStatus) -> u64 {
        self.by_status.get(&status).copied().unwrap_or(0)
    }
}

/// The append-only, per-run ordered event log, with leases that fence its writers.
///
/// **Ordering**: events of one run have seq 1, 2, 3, … without gaps, in commit order.
///
/// **Durability**: a method returns only after the store committed what it wrote (events,
/// leases); an error means nothing of the call was written.
///
/// **Leases and fencing**: one process at a time drives a run, holding its [`Lease`]. Every
/// acquisition of a run (including the one [`EventLog::create_run`] makes) gets a fencing
/// token higher than any the run had before. [`EventLog::append`] takes the caller's lease
/// and checks, in the same transaction as the seq check, that its token is still the run's
/// current one; so once a lease is taken over or released, its holder cannot write another
/// event, however late its append arrives. Expiry only decides when another holder may
/// take over: an expired lease that nobody has taken over still appends and renews (its
/// token is still current, so no one else can have written). A live holder renews its lease
/// well before it expires (a heartbeat, e.g. every third of the ttl). Times come from the
/// store's [`Clock`](crate::Clock); safety rests on tokens alone, never on clocks agreeing.
/// [`EventLog::decide_approval`] needs no lease.
#[async_trait]
pub trait EventLog: Send + Sync {
    /// Creates the run, appends its `run_created` event (seq 1), and gives `holder` the
    /// run's first lease (token 1, expiring `ttl` after the event's `at`), all atomically:
    /// no other process can take a new run before its creator first drives it. Fails with
    /// [`Error::RunExists`](crate::Error::RunExists) if the id is taken.
    async fn create_run(
        &self,
        run_id: &RunId,
        created: RunCreated,
        holder: &str,
        ttl: Duration,
    ) -> Result<(Event, Lease)>;

    /// Creates the run and appends its `run_created` event (seq 1) like
    /// [`create_run`](Self::create_run), but leased to nobody: it is queued, and any
    /// worker may claim it at once (in one write, its first acquisition gets token 1; the
    /// default below spends token 1 on a placeholder). What a front door
    /// that only enqueues runs calls, e.g. the API's `POST /runs`. Fails with
    /// [`Error::RunExists`](crate::Error::RunExists) if the id is taken.
    ///
    /// The default creates the run with a placeholder lease and releases it: two writes,
    /// and a crash between them leaves the run leased for a minute. Backends make it one.
    async fn create_queued(&self, run_id: &RunId, created: RunCreated) -> Result<Event> {
        let (event, lease) = self
            .create_run(run_id, created, QUEUED_HOLDER, Duration::from_secs(60))
            .await?;
        self.release_lease(&lease).await?;
        Ok(event)
    }

    /// Appends `kinds` to `lease.run_id` as one atomic batch after `after_seq` (the seq of
    /// the last event the caller has seen). Checked in this order, in one transaction, and
    /// writing nothing when a check fails:
    /// 1. an unknown run is [`Error::RunNotFound`](crate::Error::RunNotFound);
    /// 2. a run that has ended ([`RunStatus::is_terminal`]) takes nothing:
    ///    [`Error::RunEnded`](crate::Error::RunEnded), whatever the caller saw;
    /// 3. `lease.token` must be the run's current token, and the lease not released:
    ///    otherwise [`Error::LeaseLost`](crate::Error::LeaseLost) and the caller must stop
    ///    driving the run (expiry alone does not fail this check; see the trait docs);
    /// 4. if the log has moved on past `after_seq`,
    ///    [`Error::Conflict`](crate::Error::Conflict): the caller must re-read and decide
    ///    again;
    /// 5. a batch that goes on after its own terminal event is
    ///    [`Error::RunEnded`](crate::Error::RunEnded).
    ///
    /// An empty batch writes nothing and returns no events, after the same checks. A batch
    /// that ends the run also releases its lease.
    async fn append(
        &self,
        lease: &Lease,
        after_seq: u64,
        kinds: Vec<EventKind>,
    ) -> Result<Vec<Event>>;

    /// Events of the run with `seq > after_seq`, in order. An unknown run is
    /// [`Error::RunNotFound`](crate::Error::RunNotFound).
    async fn read(&self, run_id: &RunId, after_seq: u64) -> Result<Vec<Event>>;

    /// The run's summary, or [`Error::RunNotFound`](crate::Error::RunNotFound).
    async fn run(&self, run_id: &RunId) -> Result<RunSummary>;

    /// Runs, newest first (by creation time, then id), at most `limit`: the first page of
    /// an unfiltered [`query_runs`](Self::query_runs).
    async fn list_runs(&self, limit: u32) -> Result<Vec<RunSummary>> {
        Ok(self.query_runs(&RunQuery::newest(limit)).await?.runs)
    }

    /// A page of the runs `query` selects: those in one of `query.statuses` (any status
    /// when empty) and of `query.agent` (if given), newest first — `created_at`
    /// descending, then id descending, a total order — starting after `query.after` and at
    /// most `query.limit` of them. `next` is the cursor of the page's last run when more
    /// runs match after it, else `None`; a limit of 0 gives an empty page without one.
    /// Keyset paging: a page read with `next` neither skips nor repeats a run, whatever was
    /// created (newer, so before the cursor) or changed status meanwhile (a run whose
    /// status no longer matches is simply absent).
    async fn query_runs(&self, query: &RunQuery) -> Result<RunPage>;

    /// The runs a worker may claim, oldest first (`created_at`, then id, ascending), at
    /// most `query.limit`: status `queued` or `running` — never an ended run, and never one
    /// awaiting approval (a person must answer first; recording the decision makes it
    /// `running` again) — whose lease, per `query.leases`, is absent or expired at the
    /// store's clock's now ([`Free`](crate::ClaimLeases::Free)), or live and held by a name
    /// with the given suffix ([`LiveHeldBySuffix`](crate::ClaimLeases::LiveHeldBySuffix)).
    /// A snapshot: claiming one is still [`acquire_lease`](Self::acquire_lease)'s race.
    async fn claimable_runs(&self, query: &ClaimQuery) -> Result<Vec<RunSummary>>;

    /// Claims one run for a worker, atomically: picks the oldest run (`created_at`, then id)
    /// that [`claimable_runs`](Self::claimable_runs) would list with
    /// [`ClaimLeases::Free`](crate::ClaimLeases::Free) — queued or running, with no lease
    /// or an expired one — and that `request`'s filters let through, and gives
    /// `request.holder` its lease for `request.ttl` (a token higher than any the run had,
    /// as [`acquire_lease`](Self::acquire_lease) would), in one transaction. `None` when
    /// no run qualifies. The filters ([`ClaimRequest`]): a run pinned to a workspace volume
    /// only for a worker serving it (a run without one for any worker); a run pinned to a
    /// sandbox backend only for a worker driving it; a run bound to a channel only for a
    /// worker that can deliver to its kind; only `agents` when given; no run of an agent
    /// that already has `per_agent_limit` runs with live leases; none of `skip`. Two
    /// claimers racing, in this process or any other, never get the same run.
    async fn claim(&self, request: &ClaimRequest) -> Result<Option<(RunSummary, Lease)>>;

    /// Records a human's decision on a pending approval, atomically: the run must have an
    /// `approval_requested` for `decision.call_id` and no `approval_decided` for it yet.
    /// Otherwise nothing is written and the error says why
    /// ([`Error::NoPendingApproval`](crate::Error::NoPendingApproval),
    /// [`Error::AlreadyDecided`](crate::Error::AlreadyDecided), which carries the recorded
    /// decision). A call of a run that has ended cannot be decided
    /// ([`Error::RunEnded`](crate::Error::RunEnded)). Needs no lease and works whoever holds
    /// the run and whatever seq the caller last saw: it is how another terminal answers a
    /// waiting run. The run's driver sees the decision as a `Conflict` on its next append.
    /// The run stays `awaiting_approval` while another request of its current wait is
    /// still open, and becomes `running` (claimable) once none is; a decision leaves any
    /// other status alone ([`toren_protocol::Waiting`]).
    async fn decide_approval(&self, run_id: &RunId, decision: ApprovalDecided) -> Result<Event>;

    /// Cancels the run, atomically: appends `run_cancelled` after whatever the log holds,
    /// which ends the run (its lease is released and no one can lease it again). Needs no
    /// lease: any front door may cancel a run whoever drives it; the driver sees the end as
    /// a `Conflict` or `RunEnded` on its next write, or by watching [`run`](Self::run)'s
    /// status, and stops. A run that has already ended is
    /// [`Error::RunEnded`](crate::Error::RunEnded); an unknown run is
    /// [`Error::RunNotFound`](crate::Error::RunNotFound).
    async fn cancel_run(&self, run_id: &RunId, cancelled: RunCancelled) -> Result<Event>;

    /// Raises the budget of a run paused at it, atomically: the run must be
    /// `awaiting_budget` (its last event a `budget_reached`); `budget_raised` is appended
    /// after it, which makes the run claimable again (status `running`, no lease). Else
    /// nothing is written: [`Error::NotAwaitingBudget`](crate::Error::NotAwaitingBudget)
    /// (raised already by someone else, or not paused), [`Error::RunEnded`](crate::Error::RunEnded),
    /// [`Error::RunNotFound`](crate::Error::RunNotFound). Needs no lease, like
    /// [`decide_approval`](Self::decide_approval): a driver waiting on the run sees it as
    /// a `Conflict` or by re-reading.
    async fn raise_budget(&self, run_id: &RunId, raised: BudgetRaised) -> Result<Event>;

    /// Gives `holder` the run's lease for `ttl`, with a token higher than any the run had.
    /// Fails with [`Error::Leased`](crate::Error::Leased) while another holder's lease is
    /// live; a run whose lease expired or was released can be acquired, and the old lease
    /// is fenced off from then on. If `holder` itself holds the live lease, it gets a new
    /// token and its previous lease is fenced off too: a holder name must therefore be
    /// unique to one process. A run that has ended cannot be leased
    /// ([`Error::RunEnded`](crate::Error::RunEnded)); an unknown run is
    /// [`Error::RunNotFound`](crate::Error::RunNotFound).
    async fn acquire_lease(&self, run_id: &RunId, holder: &str, ttl: Duration) -> Result<Lease>;

    /// Like [`acquire_lease`](Self::acquire_lease), but a live lease held by
    /// `dead_holder` does not stand in the way: the caller has established that this holder
    /// is gone (e.g. a process on this machine that no longer exists) and takes the run over
    /// without waiting for the lease to expire. It is a compare-and-swap: if anyone else
    /// holds a live lease, the call fails with [`Error::Leased`](crate::Error::Leased) as
    /// `acquire_lease` would.
    async fn take_over_lease(
        &self,
        run_id: &RunId,
        dead_holder: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Lease>;

    /// The heartbeat: extends the lease to `ttl` from now and returns it with its new
    /// expiry (same token). Fails with [`Error::LeaseLost`](crate::Error::LeaseLost) if the
    /// token is no longer current or the lease was released (checked in the same
    /// transaction as the write), and with [`Error::RunEnded`](crate::Error::RunEnded) once
    /// the run has ended. A lease renewed after it expired, but before anyone took it over,
    /// is renewed.
    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease>;

    /// Gives the run up so another process may resume it at once. Idempotent: releasing a
    /// lease that was already released, taken over (the new holder keeps its lease), or
    /// ended with its run does nothing and succeeds. After it, appends with this lease fail
    /// with [`Error::LeaseLost`](crate::Error::LeaseLost). An unknown run is
    /// [`Error::RunNotFound`](crate::Error::RunNotFound).
    async fn release_lease(&self, lease: &Lease) -> Result<()>;

    /// How many runs are in each status, and how many may be claimed now (see
    /// [`RunCounts::claimable`]), as of one consistent read. One aggregate query, however
    /// many runs the store holds.
    async fn count_runs(&self) -> Result<RunCounts>;

    /// A store that can tell writes made by other processes returns a receiver of the runs
    /// they moved: created (queued or leased), approval decided, cancelled, lease released,
    /// events appended. A worker pool subscribes to claim or re-read at once instead of
    /// waiting for its next poll. A hint only: a receiver may lag (`RecvError::Lagged`: poll
    /// once) and a notice may be lost while the store reconnects, so pools keep a slow poll
    /// as the fallback. The default (and a store with no such channel, e.g. SQLite, whose
    /// writers share a machine and its in-process notifier) is `None`.
    fn moves(&self) -> Option<tokio::sync::broadcast::Receiver<RunId>> {
        None
    }
}
