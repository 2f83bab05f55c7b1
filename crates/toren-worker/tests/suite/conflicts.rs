//! A side effect never starts without its durable `tool_started`, and a finished tool's
//! result is not lost, when an append finds that the log moved on (`Conflict`: another
//! process wrote to the run, e.g. a decision or a cancellation). The store is real SQLite,
//! wrapped so that chosen appends conflict once without writing; the commands run in the
//! real bubblewrap sandbox and leave a trace in the workspace for each execution.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use toren_model::scripted::{Script, ScriptedProvider};
use toren_protocol::{
    AgentSpec, ApprovalDecided, ApprovalPolicy, Event, EventKind, ResolvedPolicy, RunCreated,
    RunId, RunStatus, SandboxSpec,
};
use toren_sandbox::{LocalBackend, LocalSettings};
use toren_store::{EventLog, Lease, RunSummary, SqliteStore};
use toren_tools::{ToolSettings, Toolkit};
use toren_worker::{Outcome, Worker, WorkerConfig, holder};

/// The real store, except that the first append of a batch holding an event of kind
/// `conflict_on` fails with `Conflict` and writes nothing.
struct ConflictOnce {
    inner: SqliteStore,
    conflict_on: &'static str,
    fired: Mutex<bool>,
}

#[async_trait]
impl EventLog for ConflictOnce {
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
        let hit = kinds.iter().any(|k| k.name() == self.conflict_on);
        if hit && !std::mem::replace(&mut *self.fired.lock().unwrap(), true) {
            return Err(toren_store::Error::Conflict {
                run_id: lease.run_id.clone(),
                expected: after_seq,
                actual: after_seq,
            });
        }
        self.inner.append(lease, after_seq, kinds).await
    }

    async fn read(&self, run_id: &RunId, after_seq: u64) -> toren_store::Result<Vec<Event>> {
        self.inner.read(run_id, after_seq).await
    }

    async fn run(&self, run_id: &RunId) -> toren_store::Result<RunSummary> {
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
        cancelled: toren_protocol::RunCancelled,
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

struct NoObserver;
impl toren_worker::Observer for NoObserver {}

/// Drives a run of one bash call that appends a line to `ran.txt` for each execution,
/// under a store whose first append holding `conflict_on` conflicts. Returns the log and
/// the workspace's `ran.txt`.
async fn drive_with_conflict(conflict_on: &'static str) -> (Vec<Event>, String) {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("toren.db").display());
    let store = Arc::new(ConflictOnce {
        inner: SqliteStore::open(&url).await.unwrap(),
        conflict_on,
        fired: Mutex::new(false),
    });
    let script = "turns:\n  - tool_calls:\n      - bash: {command: \"echo ran >> ran.txt\"}\n  - text: finished\n";
    let path = dir.path().join("script.yaml");
    let model = ScriptedProvider::new(Script::parse(script, &path).unwrap(), path);
    let root = dir.path().join("sandboxes");
    let sandbox = LocalBackend::new(LocalSettings {
        sandbox_root: root.clone(),
        bwrap: None,
    });
    sandbox.check().unwrap();
    let spec = SandboxSpec {
        checkpoints: Default::default(),
        image: None,
        network: false,
        egress: None,
        approval: ApprovalPolicy::Never,
        env: Vec::new(),
        limits: Default::default(),
        on_interrupt: Default::default(),
    };
    let created = RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "a".into(),
            model: "scripted/script.yaml".into(),
            instructions: None,
            sandbox: Some(spec),
            max_turns: 10,
            context_tokens: None,
            source: None,
        },
        policy: Some(ResolvedPolicy {
            checkpoints: Default::default(),
            backend: LocalBackend::NAME.to_owned(),
            image: None,
            network: false,
            egress: None,
            approval: ApprovalPolicy::Never,
            env: Vec::new(),
            limits: Default::default(),
            workspace: None,
            on_interrupt: Default::default(),
            sandbox_key: None,
            volume: None,
        }),
        input: "go".into(),
        session: None,
        channel: None,
        start: None,
    };
    let run = RunId::new();
    let ttl = Duration::from_secs(30);
    let holder = holder::this_process();
    let (_, lease) = store.create_run(&run, created, &holder, ttl).await.unwrap();
    let driver = Worker::new(WorkerConfig {
        store: store.clone(),
        models: Arc::new(Arc::new(model) as Arc<dyn toren_model::ModelProvider>),
        backends: vec![Arc::new(sandbox)],
        toolkit: Toolkit::new(ToolSettings::default()),
        env: Arc::new(|_: &str| None),
        observer: Arc::new(NoObserver),
        approver: None,
        max_tokens: 1024,
        approval_poll: Duration::from_millis(50),
        holder,
        lease_ttl: ttl,
    });
    let outcome = driver
        .drive(lease, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Outcome::Ended {
            status: RunStatus::Completed,
            output: "finished".into()
        }
    );
    assert!(*store.fired.lock().unwrap(), "the conflict was injected");
    let events = store.read(&run, 0).await.unwrap();
    let ran =
        std::fs::read_to_string(toren_sandbox::workspace_path(&root, run.as_str()).join("ran.txt"))
            .unwrap_or_default();
    (events, ran)
}

fn count(events: &[Event], kind: &str) -> usize {
    events.iter().filter(|e| e.kind.name() == kind).count()
}

#[tokio::test(flavor = "multi_thread")]
async fn no_tool_runs_when_its_tool_started_did_not_commit() {
    let (events, ran) = drive_with_conflict("tool_started").await;
    // Each execution left one line; each needs its own committed tool_started.
    assert_eq!(
        ran, "ran\n",
        "the command ran once, after a durable tool_started"
    );
    assert_eq!(count(&events, "tool_started"), 1);
    assert_eq!(count(&events, "tool_completed"), 1);
    let started = events
        .iter()
        .position(|e| e.kind.name() == "tool_started")
        .unwrap();
    let completed = events
        .iter()
        .position(|e| e.kind.name() == "tool_completed")
        .unwrap();
    assert!(started < completed);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_finished_tools_result_survives_a_conflict_and_it_is_not_run_again() {
    let (events, ran) = drive_with_conflict("tool_completed").await;
    assert_eq!(ran, "ran\n", "the command was not run a second time");
    assert_eq!(count(&events, "tool_started"), 1);
    assert_eq!(count(&events, "tool_completed"), 1);
}
