//! [`EventLog`] on Postgres. Every write is one transaction that locks the run's row first
//! (`state.rs`), checks it in the order the trait documents, writes the events (one
//! statement for a whole batch) and the run's columns, queues a notice (`pg_notify`) when
//! the write should wake a worker, and commits; an error drops the transaction, which rolls
//! it back, so a refused call writes nothing and notifies nobody.

use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use sqlx::PgConnection;
use toren_protocol::{
    ApprovalDecided, BudgetRaised, EVENT_FORMAT_VERSION, Event, EventKind, RunCancelled,
    RunCreated, RunId, RunStatus, Waiting,
};
use toren_store::backend::{self, Sequence, check_decision, first_lease};
use toren_store::{
    ClaimQuery, ClaimRequest, Error, EventLog, Lease, Result, RunCounts, RunPage, RunQuery,
    RunSummary,
};

use crate::rows::{RunRow, decode_event, nanos, run_columns, to_sql};
use crate::state::{clear_lease, lock_run, store_lease};
use crate::store::{CHANNEL, PostgresStore, finish, notify};

#[async_trait]
impl EventLog for PostgresStore {
    async fn create_run(
        &self,
        run_id: &RunId,
        created: RunCreated,
        holder: &str,
        ttl: Duration,
    ) -> Result<(Event, Lease)> {
        self.bounded(async {
            let mut tx = self.begin().await?;
            let result: Result<_> = async {
                let created =
                    insert_run(&mut tx, self.clock.now(), run_id, created, holder, ttl).await?;
                Ok(created)
            }
            .await;
            finish(tx, result).await
        })
        .await
    }

    async fn create_queued(&self, run_id: &RunId, created: RunCreated) -> Result<Event> {
        self.bounded(async {
            let mut tx = self.begin().await?;
            let result: Result<_> = async {
                let event =
                    insert_run_row(&mut tx, self.clock.now(), run_id, created, None).await?;
                Ok(event)
            }
            .await;
            finish(tx, result).await
        })
        .await
    }

    async fn append(
        &self,
        lease: &Lease,
        after_seq: u64,
        kinds: Vec<EventKind>,
    ) -> Result<Vec<Event>> {
        self.bounded(async {
            let run_id = &lease.run_id;
            let mut tx = self.begin().await?;
            let result: Result<_> = async {
                let state = lock_run(&mut tx, run_id).await?;
                state.check_append(lease, after_seq)?;
                if kinds.is_empty() {
                    return Ok(Vec::new());
                }
                let sequence =
                    Sequence::new(run_id, self.clock.now(), state.last_seq, state.status);
                let events = write_events(&mut tx, sequence, kinds).await?;
                Ok(events)
            }
            .await;
            finish(tx, result).await
        })
        .await
    }

    async fn read(&self, run_id: &RunId, after_seq: u64) -> Result<Vec<Event>> {
        self.bounded(async {
            let rows = sqlx::query_as::<_, (i64, String)>(
                "SELECT seq, payload FROM events WHERE run_id = $1 AND seq > $2 ORDER BY seq",
            )
            .bind(run_id.as_str())
            .bind(to_sql(after_seq))
            .fetch_all(&self.pool)
            .await?;
            if rows.is_empty() {
                // Tell "no new events" from "no such run".
                self.summary(run_id).await?;
            }
            rows.iter()
                .map(|(seq, payload)| decode_event(run_id.as_str(), *seq, payload))
                .collect()
        })
        .await
    }

    async fn run(&self, run_id: &RunId) -> Result<RunSummary> {
        self.bounded(self.summary(run_id)).await
    }

    async fn query_runs(&self, query: &RunQuery) -> Result<RunPage> {
        self.bounded(self.select_runs(query)).await
    }

    async fn claimable_runs(&self, query: &ClaimQuery) -> Result<Vec<RunSummary>> {
        self.bounded(self.select_claimable(query)).await
    }

    async fn claim(&self, request: &ClaimRequest) -> Result<Option<(RunSummary, Lease)>> {
        self.bounded(self.claim_one(request)).await
    }

    async fn decide_approval(&self, run_id: &RunId, decision: ApprovalDecided) -> Result<Event> {
        self.bounded(self.write_unleased(run_id, EventKind::ApprovalDecided(decision)))
            .await
    }

    async fn cancel_run(&self, run_id: &RunId, cancelled: RunCancelled) -> Result<Event> {
        self.bounded(self.write_unleased(run_id, EventKind::RunCancelled(cancelled)))
            .await
    }

    async fn raise_budget(&self, run_id: &RunId, raised: BudgetRaised) -> Result<Event> {
        self.bounded(self.write_unleased(run_id, EventKind::BudgetRaised(raised)))
            .await
    }

    async fn acquire_lease(&self, run_id: &RunId, holder: &str, ttl: Duration) -> Result<Lease> {
        self.bounded(self.lease_run(run_id, None, holder, ttl))
            .await
    }

    async fn take_over_lease(
        &self,
        run_id: &RunId,
        dead_holder: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Lease> {
        self.bounded(self.lease_run(run_id, Some(dead_holder), holder, ttl))
            .await
    }

    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        self.bounded(async {
            let mut tx = self.begin().await?;
            let result: Result<_> = async {
                let state = lock_run(&mut tx, &lease.run_id).await?;
                let renewed = state.renewed(lease, self.clock.now(), ttl)?;
                store_lease(&mut tx, &renewed).await?;
                Ok(renewed)
            }
            .await;
            finish(tx, result).await
        })
        .await
    }

    async fn release_lease(&self, lease: &Lease) -> Result<()> {
        self.bounded(async {
            let mut tx = self.begin().await?;
            let result: Result<_> = async {
                let state = lock_run(&mut tx, &lease.run_id).await?;
                if !state.holds(lease) {
                    return Ok(());
                }
                clear_lease(&mut tx, &lease.run_id).await?;
                notify(&mut tx, &lease.run_id).await?;
                Ok(())
            }
            .await;
            finish(tx, result).await
        })
        .await
    }

    async fn count_runs(&self) -> Result<RunCounts> {
        self.bounded(async {
            // One statement, so one snapshot. A lease is free once its expiry is not after
            // now (`LeaseInfo::is_live`).
            let rows = sqlx::query_as::<_, (String, i64, i64)>(
                "SELECT status, COUNT(*),
                        COUNT(*) FILTER (WHERE status IN ('queued', 'running')
                                         AND (lease_expires_at IS NULL OR lease_expires_at <= $1))
                 FROM runs GROUP BY status",
            )
            .bind(nanos(self.clock.now()))
            .fetch_all(&self.pool)
            .await?;
            backend::rows::run_counts(rows)
        })
        .await
    }

    fn moves(&self) -> Option<tokio::sync::broadcast::Receiver<RunId>> {
        Some(self.subscribe())
    }
}

impl PostgresStore {
    async fn summary(&self, run_id: &RunId) -> Result<RunSummary> {
        let row = sqlx::query_as::<_, RunRow>(concat!(
            "SELECT ",
            run_columns!(),
            " FROM runs WHERE id = $1"
        ))
        .bind(run_id.as_str())
        .fetch_optional(&self.pool)
        .await?;
        row.ok_or_else(|| Error::RunNotFound(run_id.clone()))?
            .decode()
    }

    /// Writes one event that needs no lease (a decision, a cancellation, a raised budget)
    /// in its own transaction, the run's row locked: a decision is checked against the log
    /// first (`check_decision`, which also says what else the run waits on), then the
    /// row (`RunState::check_unleased`).
    async fn write_unleased(&self, run_id: &RunId, kind: EventKind) -> Result<Event> {
        let mut tx = self.begin().await?;
        let result: Result<_> = async {
            let state = lock_run(&mut tx, run_id).await?;
            let waiting = match &kind {
                EventKind::ApprovalDecided(decision) => {
                    decidable(&mut tx, run_id, decision).await?
                }
                _ => Waiting::default(),
            };
            state.check_unleased(run_id, &kind)?;
            let sequence = Sequence::new(run_id, self.clock.now(), state.last_seq, state.status)
                .waiting_on(waiting);
            let mut events = write_events(&mut tx, sequence, vec![kind]).await?;
            events.pop().ok_or_else(|| unwritten(run_id))
        }
        .await;
        finish(tx, result).await
    }

    /// Acquires the run's lease; a live lease of `dead_holder` (if given) is overridden.
    async fn lease_run(
        &self,
        run_id: &RunId,
        dead_holder: Option<&str>,
        holder: &str,
        ttl: Duration,
    ) -> Result<Lease> {
        let mut tx = self.begin().await?;
        let result: Result<_> = async {
            let state = lock_run(&mut tx, run_id).await?;
            let lease = state.next_lease(run_id, dead_holder, holder, self.clock.now(), ttl)?;
            store_lease(&mut tx, &lease).await?;
            Ok(lease)
        }
        .await;
        finish(tx, result).await
    }
}

/// Whether `decision` may be recorded (`check_decision`, against the run's requests and
/// decisions read inside `tx`), and the open requests of the run's current wait.
async fn decidable(
    tx: &mut PgConnection,
    run_id: &RunId,
    decision: &ApprovalDecided,
) -> Result<Waiting> {
    // A host's request is decided only while its call runs: the calls' completions too,
    // for such a decision only (they carry outputs, which a call's decision need not read).
    let host = toren_protocol::is_host_approval_id(&decision.call_id);
    let rows = sqlx::query_as::<_, (i64, String)>(
        "SELECT seq, payload FROM events
         WHERE run_id = $1 AND (kind IN ('approval_requested', 'host_approval_requested',
                                         'approval_decided', 'rewound')
                                OR ($2 AND kind = 'tool_completed'))
         ORDER BY seq",
    )
    .bind(run_id.as_str())
    .bind(host)
    .fetch_all(&mut *tx)
    .await?;
    // The current wait began after the last event that is no request, decision or
    // connection record.
    let wait_began = sqlx::query_scalar::<_, i64>(
        "SELECT seq FROM events WHERE run_id = $1 AND kind <> ALL($2)
         ORDER BY seq DESC LIMIT 1",
    )
    .bind(run_id.as_str())
    .bind(&Waiting::KINDS[..])
    .fetch_optional(&mut *tx)
    .await?
    .unwrap_or(0);
    let earlier = rows
        .iter()
        .map(|(seq, payload)| decode_event(run_id.as_str(), *seq, payload));
    check_decision(
        run_id,
        decision,
        earlier,
        u64::try_from(wait_began).unwrap_or(0),
    )
}

/// A batch that returned no event although it was given one: cannot happen, but an error
/// is better than a panic.
fn unwritten(run_id: &RunId) -> Error {
    Error::CorruptRun {
        run_id: run_id.as_str().to_owned(),
        reason: "a write of one event returned none".to_owned(),
    }
}

/// Inserts a new run with its `run_created` event and its first lease, inside `tx`: shared
/// by [`EventLog::create_run`] and the creation of a session's turn.
pub(crate) async fn insert_run(
    tx: &mut PgConnection,
    now: Timestamp,
    run_id: &RunId,
    created: RunCreated,
    holder: &str,
    ttl: Duration,
) -> Result<(Event, Lease)> {
    let lease = first_lease(run_id, holder, now, ttl);
    let event = insert_run_row(tx, now, run_id, created, Some(&lease)).await?;
    Ok((event, lease))
}

/// Inserts a new run with its `run_created` event, leased to `lease` or to nobody (token
/// 0, so its first acquisition gets [`backend::FIRST_TOKEN`]), and notifies: a queued run wakes
/// the workers at once, a leased one when its lease is released or expires.
async fn insert_run_row(
    tx: &mut PgConnection,
    now: Timestamp,
    run_id: &RunId,
    created: RunCreated,
    lease: Option<&Lease>,
) -> Result<Event> {
    // A concurrent insert of the same id waits on the primary key, then does nothing.
    let inserted = sqlx::query(
        "INSERT INTO runs (id, agent, status, created_at, updated_at, last_seq,
                           lease_token, lease_holder, lease_expires_at,
                           volume, backend, channel)
         VALUES ($1, $2, $3, $4, $4, 0, $5, $6, $7, $8, $9, $10)
         ON CONFLICT (id) DO NOTHING",
    )
    .bind(run_id.as_str())
    .bind(&created.agent.name)
    .bind(RunStatus::Queued.as_str())
    .bind(nanos(now))
    .bind(to_sql(lease.map_or(0, |l| l.token)))
    .bind(lease.map(|l| l.holder.clone()))
    .bind(lease.map(|l| nanos(l.expires_at)))
    .bind(created.policy.as_ref().and_then(|p| p.volume.clone()))
    .bind(created.policy.as_ref().map(|p| p.backend.clone()))
    .bind(created.channel.as_ref().map(|c| c.kind.clone()))
    .execute(&mut *tx)
    .await?;
    if inserted.rows_affected() == 0 {
        return Err(Error::RunExists(run_id.clone()));
    }
    let sequence = Sequence::new(run_id, now, 0, RunStatus::Queued);
    let mut events = write_events(tx, sequence, vec![EventKind::RunCreated(created)]).await?;
    events.pop().ok_or_else(|| unwritten(run_id))
}

/// Writes `kinds` as `sequence` numbers and stamps them (after the run's last seq, in its
/// status), brings the run's row in step (status, `updated_at`, `last_seq`; an ended run's lease released) and
/// queues the notice that the run moved, all in one statement. A batch that goes on after its own terminal event is
/// [`Error::RunEnded`] and writes nothing.
async fn write_events(
    tx: &mut PgConnection,
    mut sequence: Sequence,
    kinds: Vec<EventKind>,
) -> Result<Vec<Event>> {
    let (run_id, at) = (sequence.run_id().clone(), sequence.at());
    let mut events = Vec::with_capacity(kinds.len());
    let (mut seqs, mut names, mut payloads) = (Vec::new(), Vec::new(), Vec::new());
    for kind in kinds {
        let (event, payload) = sequence.next(kind)?;
        seqs.push(to_sql(event.seq));
        names.push(event.kind.name().to_owned());
        payloads.push(payload);
        events.push(event);
    }
    if events.is_empty() {
        return Ok(events);
    }
    let (status, last, ended) = (sequence.status(), sequence.last_seq(), sequence.ended());
    // One statement, one round trip: the events, the run's row, and the notice (sent when
    // the transaction commits). Every data-modifying part runs whatever the query reads.
    sqlx::query(
        "WITH inserted AS (
             INSERT INTO events (run_id, seq, kind, v, at, payload)
             SELECT $1, seq, kind, $2, $3, payload
             FROM UNNEST($4::BIGINT[], $5::TEXT[], $6::TEXT[]) AS e (seq, kind, payload)
         ), updated AS (
             UPDATE runs SET status = $7, updated_at = $3, last_seq = $8,
                 lease_holder = CASE WHEN $9 THEN NULL ELSE lease_holder END,
                 lease_expires_at = CASE WHEN $9 THEN NULL ELSE lease_expires_at END
             WHERE id = $1
             RETURNING id
         )
         SELECT pg_notify($10, id) FROM updated",
    )
    .bind(run_id.as_str())
    .bind(i32::try_from(EVENT_FORMAT_VERSION).unwrap_or(i32::MAX))
    .bind(nanos(at))
    .bind(&seqs)
    .bind(&names)
    .bind(&payloads)
    .bind(status.as_str())
    .bind(to_sql(last))
    .bind(ended)
    .bind(CHANNEL)
    .execute(&mut *tx)
    .await?;
    Ok(events)
}
