//! [`EventLog`] on SQLite. Every write is one job of the store's writer (`writer.rs`),
//! inside a `BEGIN IMMEDIATE` transaction and its own savepoint: it reads the run's row
//! (`state.rs`), checks it in the order the trait documents, then writes events
//! (`batch.rs`) and the lease columns; an error rolls the job back to its savepoint, so a
//! refused call writes nothing.

use std::time::Duration;

use async_trait::async_trait;
use toren_protocol::{
    ApprovalDecided, BudgetRaised, Event, EventKind, RunCancelled, RunCreated, RunId, RunStatus,
    Waiting,
};

use super::SqliteStore;
use super::batch::Batch;
use super::rows::{EventRow, RunRow, stamp, to_sql};
use super::state::{clear_lease, run_state, store_lease};
use crate::backend::{self, check_decision, first_lease};
use crate::{
    ClaimQuery, ClaimRequest, Error, EventLog, Lease, Result, RunPage, RunQuery, RunSummary,
};

#[async_trait]
impl EventLog for SqliteStore {
    async fn create_run(
        &self,
        run_id: &RunId,
        created: RunCreated,
        holder: &str,
        ttl: Duration,
    ) -> Result<(Event, Lease)> {
        let (run_id, holder, clock) = (run_id.clone(), holder.to_owned(), self.clock.clone());
        self.write(move |tx| {
            Box::pin(
                async move { insert_run(tx, clock.now(), &run_id, created, &holder, ttl).await },
            )
        })
        .await
    }

    async fn create_queued(&self, run_id: &RunId, created: RunCreated) -> Result<Event> {
        let (run_id, clock) = (run_id.clone(), self.clock.clone());
        self.write(move |tx| {
            Box::pin(async move { insert_run_row(tx, clock.now(), &run_id, created, None).await })
        })
        .await
    }

    async fn append(
        &self,
        lease: &Lease,
        after_seq: u64,
        kinds: Vec<EventKind>,
    ) -> Result<Vec<Event>> {
        let (lease, clock) = (lease.clone(), self.clock.clone());
        self.write(move |tx| {
            Box::pin(async move {
                let run_id = &lease.run_id;
                let state = run_state(tx, run_id).await?;
                state.check_append(&lease, after_seq)?;
                if kinds.is_empty() {
                    return Ok(Vec::new());
                }
                let mut batch = Batch::new(run_id, clock.now(), state.last_seq, state.status);
                let mut events = Vec::with_capacity(kinds.len());
                for kind in kinds {
                    events.push(batch.push(tx, kind).await?);
                }
                batch.finish(tx).await?;
                Ok(events)
            })
        })
        .await
    }

    async fn read(&self, run_id: &RunId, after_seq: u64) -> Result<Vec<Event>> {
        // In chunks, not a row per event (see `read.rs`), from one snapshot.
        let mut tx = self.pool.begin().await?;
        let events = super::read::events_after(&mut tx, run_id, after_seq).await?;
        tx.commit().await?;
        if events.is_empty() {
            // Tell "no new events" from "no such run".
            self.run(run_id).await?;
        }
        Ok(events)
    }

    async fn run(&self, run_id: &RunId) -> Result<RunSummary> {
        let row = sqlx::query_as::<_, RunRow>(
            "SELECT id, agent, status, created_at, updated_at, last_seq,
                    lease_holder, lease_expires_at
             FROM runs WHERE id = ?",
        )
        .bind(run_id.as_str())
        .fetch_optional(&self.pool)
        .await?;
        row.ok_or_else(|| Error::RunNotFound(run_id.clone()))?
            .decode()
    }

    async fn query_runs(&self, query: &RunQuery) -> Result<RunPage> {
        self.select_runs(query).await
    }

    async fn claimable_runs(&self, query: &ClaimQuery) -> Result<Vec<RunSummary>> {
        self.select_claimable(query).await
    }

    async fn claim(&self, request: &ClaimRequest) -> Result<Option<(RunSummary, Lease)>> {
        self.claim_one(request).await
    }

    async fn decide_approval(&self, run_id: &RunId, decision: ApprovalDecided) -> Result<Event> {
        self.write_unleased(run_id, EventKind::ApprovalDecided(decision))
            .await
    }

    async fn cancel_run(&self, run_id: &RunId, cancelled: RunCancelled) -> Result<Event> {
        self.write_unleased(run_id, EventKind::RunCancelled(cancelled))
            .await
    }

    async fn raise_budget(&self, run_id: &RunId, raised: BudgetRaised) -> Result<Event> {
        self.write_unleased(run_id, EventKind::BudgetRaised(raised))
            .await
    }

    async fn acquire_lease(&self, run_id: &RunId, holder: &str, ttl: Duration) -> Result<Lease> {
        self.lease_run(run_id, None, holder, ttl).await
    }

    async fn take_over_lease(
        &self,
        run_id: &RunId,
        dead_holder: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Lease> {
        self.lease_run(run_id, Some(dead_holder), holder, ttl).await
    }

    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        let (lease, clock) = (lease.clone(), self.clock.clone());
        self.write(move |tx| {
            Box::pin(async move {
                let state = run_state(tx, &lease.run_id).await?;
                let renewed = state.renewed(&lease, clock.now(), ttl)?;
                store_lease(tx, &renewed).await?;
                Ok(renewed)
            })
        })
        .await
    }

    async fn release_lease(&self, lease: &Lease) -> Result<()> {
        let lease = lease.clone();
        self.write(move |tx| {
            Box::pin(async move {
                let state = run_state(tx, &lease.run_id).await?;
                if !state.holds(&lease) {
                    return Ok(());
                }
                clear_lease(tx, &lease.run_id).await
            })
        })
        .await
    }

    async fn count_runs(&self) -> Result<crate::RunCounts> {
        // One statement, so one snapshot. A lease is free once its expiry is not after now
        // (`LeaseInfo::is_live`); stamps of one width compare as times.
        let rows = sqlx::query_as::<_, (String, i64, i64)>(
            "SELECT status, COUNT(*),
                    COALESCE(SUM(status IN ('queued', 'running')
                                 AND (lease_expires_at IS NULL OR lease_expires_at <= ?)), 0)
             FROM runs GROUP BY status",
        )
        .bind(stamp(self.clock.now()))
        .fetch_all(&self.pool)
        .await?;
        backend::rows::run_counts(rows)
    }
}

impl SqliteStore {
    /// Writes one event that needs no lease (a decision, a cancellation, a raised budget)
    /// in its own transaction: a decision is checked against the log first
    /// (`check_decision`, which also says what else the run waits on), then the run's
    /// row (`RunState::check_unleased`).
    async fn write_unleased(&self, run_id: &RunId, kind: EventKind) -> Result<Event> {
        let (run_id, clock) = (run_id.clone(), self.clock.clone());
        self.write(move |tx| {
            Box::pin(async move {
                let run_id = &run_id;
                let state = run_state(tx, run_id).await?;
                let waiting = match &kind {
                    EventKind::ApprovalDecided(decision) => decidable(tx, run_id, decision).await?,
                    _ => Waiting::default(),
                };
                state.check_unleased(run_id, &kind)?;
                let mut batch = Batch::new(run_id, clock.now(), state.last_seq, state.status)
                    .waiting_on(waiting);
                let event = batch.push(tx, kind).await?;
                batch.finish(tx).await?;
                Ok(event)
            })
        })
        .await
    }

    /// Acquires the run's lease; a live lease of `dead_holder` (if given) is overridden.
    async fn lease_run(
        &self,
        run_id: &RunId,
        dead_holder: Option<&str>,
        holder: &str,
        ttl: Duration,
    ) -> Result<Lease> {
        let run_id = run_id.clone();
        let dead_holder = dead_holder.map(str::to_owned);
        let (holder, clock) = (holder.to_owned(), self.clock.clone());
        self.write(move |tx| {
            Box::pin(async move {
                let state = run_state(tx, &run_id).await?;
                let lease =
                    state.next_lease(&run_id, dead_holder.as_deref(), &holder, clock.now(), ttl)?;
                store_lease(tx, &lease).await?;
                Ok(lease)
            })
        })
        .await
    }
}

/// Whether `decision` may be recorded (`check_decision`, against the run's requests and
/// decisions read inside `tx`), and the open requests of the run's current wait.
async fn decidable(
    tx: &mut sqlx::SqliteConnection,
    run_id: &RunId,
    decision: &ApprovalDecided,
) -> Result<Waiting> {
    // A host's request is decided only while its call runs: the calls' completions too,
    // for such a decision only (they carry outputs, which a call's decision need not read).
    let host = toren_protocol::is_host_approval_id(&decision.call_id);
    let rows = sqlx::query_as::<_, EventRow>(
        "SELECT run_id, seq, payload FROM events
         WHERE run_id = ? AND (kind IN ('approval_requested', 'host_approval_requested',
                                        'approval_decided', 'rewound')
                               OR (? AND kind = 'tool_completed'))
         ORDER BY seq",
    )
    .bind(run_id.as_str())
    .bind(host)
    .fetch_all(&mut *tx)
    .await?;
    // The current wait began after the last event that is no request, decision or
    // connection record.
    let [a, b, c, d] = Waiting::KINDS;
    let wait_began = sqlx::query_scalar::<_, i64>(
        "SELECT seq FROM events WHERE run_id = ? AND kind NOT IN (?, ?, ?, ?)
         ORDER BY seq DESC LIMIT 1",
    )
    .bind(run_id.as_str())
    .bind(a)
    .bind(b)
    .bind(c)
    .bind(d)
    .fetch_optional(&mut *tx)
    .await?
    .unwrap_or(0);
    check_decision(
        run_id,
        decision,
        rows.into_iter().map(EventRow::decode),
        u64::try_from(wait_began).unwrap_or(0),
    )
}

/// Inserts a new run with its `run_created` event and its first lease, inside `tx`: shared
/// by [`EventLog::create_run`] and the creation of a session's turn.
pub(super) async fn insert_run(
    tx: &mut sqlx::SqliteConnection,
    now: jiff::Timestamp,
    run_id: &RunId,
    created: RunCreated,
    holder: &str,
    ttl: Duration,
) -> Result<(Event, Lease)> {
    let lease = first_lease(run_id, holder, now, ttl);
    let event = insert_run_row(tx, now, run_id, created, Some(&lease)).await?;
    Ok((event, lease))
}

/// Inserts a new run with its `run_created` event, leased to `lease` or to nobody (token 0,
/// so its first acquisition gets [`backend::FIRST_TOKEN`]).
async fn insert_run_row(
    tx: &mut sqlx::SqliteConnection,
    now: jiff::Timestamp,
    run_id: &RunId,
    created: RunCreated,
    lease: Option<&Lease>,
) -> Result<Event> {
    let taken = sqlx::query_scalar::<_, i64>("SELECT 1 FROM runs WHERE id = ?")
        .bind(run_id.as_str())
        .fetch_optional(&mut *tx)
        .await?;
    if taken.is_some() {
        return Err(Error::RunExists(run_id.clone()));
    }
    sqlx::query(
        "INSERT INTO runs (id, agent, status, created_at, updated_at, last_seq,
                           lease_token, lease_holder, lease_expires_at,
                           volume, backend, channel)
         VALUES (?, ?, ?, ?, ?, 0, ?, ?, ?, ?, ?, ?)",
    )
    .bind(run_id.as_str())
    .bind(&created.agent.name)
    .bind(RunStatus::Queued.as_str())
    .bind(stamp(now))
    .bind(stamp(now))
    .bind(to_sql(lease.map_or(0, |l| l.token)))
    .bind(lease.map(|l| l.holder.clone()))
    .bind(lease.map(|l| stamp(l.expires_at)))
    .bind(created.policy.as_ref().and_then(|p| p.volume.clone()))
    .bind(created.policy.as_ref().map(|p| p.backend.clone()))
    .bind(created.channel.as_ref().map(|c| c.kind.clone()))
    .execute(&mut *tx)
    .await?;
    let mut batch = Batch::new(run_id, now, 0, RunStatus::Queued);
    let event = batch.push(&mut *tx, EventKind::RunCreated(created)).await?;
    batch.finish(&mut *tx).await?;
    Ok(event)
}
