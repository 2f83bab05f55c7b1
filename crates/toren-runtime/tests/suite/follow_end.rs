//! A follower never misses a run's end: the last events may be appended between its read
//! of the log (nothing new) and its look at the run's status (ended); it must still give
//! them before it stops. The store is real SQLite, wrapped to append at that very moment.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use toren_protocol::{
    AgentSpec, ApprovalDecided, AssistantMessage, Event, EventKind, ModelResponded, RunCancelled,
    RunCompleted, RunCreated, RunId,
};
use toren_runtime::{Followed, PolicySettings, RunService, ServiceSettings};
use toren_store::{EventLog, Lease, RunSummary, SqliteStore};

use super::follow::events_of;
use super::support::{types, within};

/// SQLite, except that the next look at the run's summary first appends `pending` (as a
/// worker finishing the run at that moment would).
struct EndsWhileLooked {
    inner: SqliteStore,
    pending: Mutex<Option<(Lease, u64, Vec<EventKind>)>>,
}

#[async_trait]
impl EventLog for EndsWhileLooked {
    async fn create_run(
        &self,
        run_id: &RunId,
        created: RunCreated,
        holder: &str,
        ttl: Duration,
    ) -> toren_store::Result<(Event, Lease)> {
        self.inner.create_run(run_id, created, holder, ttl).await
    }
    async fn append(
        &self,
        lease: &Lease,
        after_seq: u64,
        kinds: Vec<EventKind>,
    ) -> toren_store::Result<Vec<Event>> {
        self.inner.append(lease, after_seq, kinds).await
    }
    async fn read(&self, run_id: &RunId, after_seq: u64) -> toren_store::Result<Vec<Event>> {
        self.inner.read(run_id, after_seq).await
    }
    async fn run(&self, run_id: &RunId) -> toren_store::Result<RunSummary> {
        let pending = self.pending.lock().unwrap().take();
        if let Some((lease, after, kinds)) = pending {
            self.inner.append(&lease, after, kinds).await?;
        }
        self.inner.run(run_id).await
    }
    async fn list_runs(&self, limit: u32) -> toren_store::Result<Vec<RunSummary>> {
        self.inner.list_runs(limit).await
    }

    async fn query_runs(
        &self,
        query: &toren_store::RunQuery,
    ) -> toren_store::Result<toren_store::RunPage> {
        self.inner.query_runs(query).await
    }

    async fn claimable_runs(
        &self,
        query: &toren_store::ClaimQuery,
    ) -> toren_store::Result<Vec<RunSummary>> {
        self.inner.claimable_runs(query).await
    }

    async fn claim(
        &self,
        request: &toren_store::ClaimRequest,
    ) -> toren_store::Result<Option<(RunSummary, Lease)>> {
        self.inner.claim(request).await
    }
    async fn decide_approval(
        &self,
        run_id: &RunId,
        decision: ApprovalDecided,
    ) -> toren_store::Result<Event> {
        self.inner.decide_approval(run_id, decision).await
    }
    async fn cancel_run(
        &self,
        run_id: &RunId,
        cancelled: RunCancelled,
    ) -> toren_store::Result<Event> {
        self.inner.cancel_run(run_id, cancelled).await
    }

    async fn raise_budget(
        &self,
        run_id: &RunId,
        raised: toren_protocol::BudgetRaised,
    ) -> toren_store::Result<Event> {
        self.inner.raise_budget(run_id, raised).await
    }
    async fn acquire_lease(
        &self,
        run_id: &RunId,
        holder: &str,
        ttl: Duration,
    ) -> toren_store::Result<Lease> {
        self.inner.acquire_lease(run_id, holder, ttl).await
    }
    async fn take_over_lease(
        &self,
        run_id: &RunId,
        dead_holder: &str,
        holder: &str,
        ttl: Duration,
    ) -> toren_store::Result<Lease> {
        self.inner
            .take_over_lease(run_id, dead_holder, holder, ttl)
            .await
    }
    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> toren_store::Result<Lease> {
        self.inner.renew_lease(lease, ttl).await
    }
    async fn release_lease(&self, lease: &Lease) -> toren_store::Result<()> {
        self.inner.release_lease(lease).await
    }
    async fn count_runs(&self) -> toren_store::Result<toren_store::RunCounts> {
        self.inner.count_runs().await
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_follower_gets_the_last_event_even_when_it_is_appended_while_it_looks() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("toren.db").display());
    let store = Arc::new(EndsWhileLooked {
        inner: SqliteStore::open(&url).await.unwrap(),
        pending: Mutex::new(None),
    });
    let service = RunService::new(
        Arc::clone(&store) as Arc<dyn EventLog>,
        ServiceSettings {
            policy: PolicySettings {
                backend: None,
                sandbox_root: dir.path().join("sandboxes"),
                volume: None,
                asks_hosts: true,
            },
            lease_ttl: Duration::from_secs(30),
            follow_poll: Duration::from_millis(20),
            streams: None,
        },
    );
    let agent = AgentSpec {
        budget: None,
        name: "plain".into(),
        model: "scripted/none.yaml".into(),
        instructions: None,
        sandbox: None,
        max_turns: 10,
        context_tokens: None,
        source: None,
    };
    let created = service.create(agent, "hi".into(), "me").await.unwrap();
    let mut follow = service.follow(&created.run_id, 0);
    let Some(Followed::Event(first)) = follow.next().await.unwrap() else {
        panic!("no run_created");
    };
    assert_eq!(first.kind.name(), "run_created");
    // The run's last events land between the follower's read (nothing new) and its look
    // at the run's status (ended).
    let answer = ModelResponded {
        message: AssistantMessage {
            text: "done".into(),
            tool_calls: Vec::new(),
        },
        stop_reason: "end_turn".into(),
        usage: Default::default(),
        model: "scripted".into(),
    };
    *store.pending.lock().unwrap() = Some((
        created.lease,
        1,
        vec![
            EventKind::ModelResponded(answer),
            EventKind::RunCompleted(RunCompleted {
                output: "done".into(),
            }),
        ],
    ));
    let mut rest = Vec::new();
    while let Some(item) = within("the follower", follow.next()).await.unwrap() {
        rest.push(item);
    }
    assert_eq!(
        types(&events_of(&rest)),
        ["model_responded", "run_completed"],
        "{rest:?}"
    );
}
