//! A call an earlier driver started and never finished is run again only after whatever
//! that attempt left running in the sandbox is stopped: the backend's
//! `stop_processes` (docker: the container removed, its processes killed) comes before the
//! sandbox is opened for the next attempt and before its `tool_started`.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use toren_model::scripted::{Script, ScriptedProvider};
use toren_protocol::{
    AgentSpec, ApprovalDecided, ApprovalPolicy, Event, EventKind, ResolvedPolicy, RunCreated,
    RunId, RunStatus, SandboxSpec,
};
use toren_sandbox::{EgressHooks, LocalBackend, LocalSettings, Sandbox, SandboxBackend};
use toren_store::{EventLog, Lease, RunSummary, SqliteStore};
use toren_tools::{ToolSettings, Toolkit};
use toren_worker::{Outcome, Worker, WorkerConfig};

/// The real store, except that the first batch holding a `tool_started` is written and
/// then answered with an error: the driver stops as if killed while the command ran.
struct CrashAfterStart {
    inner: SqliteStore,
    fired: Mutex<bool>,
}

#[async_trait]
impl EventLog for CrashAfterStart {
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
        let hit = kinds.iter().any(|k| k.name() == "tool_started");
        let written = self.inner.append(lease, after_seq, kinds).await?;
        if hit && !std::mem::replace(&mut *self.fired.lock().unwrap(), true) {
            return Err(toren_store::Error::CorruptRun {
                run_id: lease.run_id.to_string(),
                reason: "injected: the driver died with its command running".into(),
            });
        }
        Ok(written)
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

/// The local backend, noting each open and each stop (with how many `tool_started` the
/// log held then).
struct Recording {
    inner: LocalBackend,
    store: Arc<CrashAfterStart>,
    run: RunId,
    calls: Mutex<Vec<String>>,
}

impl Recording {
    async fn note(&self, what: &str) {
        let started = self
            .store
            .read(&self.run, 0)
            .await
            .unwrap()
            .iter()
            .filter(|e| e.kind.name() == "tool_started")
            .count();
        self.calls
            .lock()
            .unwrap()
            .push(format!("{what} after {started} tool_started"));
    }
}

#[async_trait]
impl SandboxBackend for Recording {
    fn name(&self) -> &'static str {
        LocalBackend::NAME
    }

    async fn open(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
    ) -> toren_sandbox::Result<Arc<dyn Sandbox>> {
        self.open_with(run, policy, env, EgressHooks::default())
            .await
    }

    async fn open_with(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
        hooks: EgressHooks,
    ) -> toren_sandbox::Result<Arc<dyn Sandbox>> {
        self.note("open").await;
        self.inner.open_with(run, policy, env, hooks).await
    }

    async fn stop_processes(&self, key: &str) -> toren_sandbox::Result<()> {
        assert_eq!(key, self.run.as_str(), "the run's own sandbox is stopped");
        self.note("stop").await;
        self.inner.stop_processes(key).await
    }
}

fn worker(
    store: Arc<CrashAfterStart>,
    backend: Arc<Recording>,
    model: ScriptedProvider,
    holder: &str,
    ttl: Duration,
) -> Worker {
    Worker::new(WorkerConfig {
        store,
        models: Arc::new(Arc::new(model) as Arc<dyn toren_model::ModelProvider>),
        backends: vec![backend],
        toolkit: Toolkit::new(ToolSettings::default()),
        env: Arc::new(|_: &str| None),
        observer: Arc::new(NoObserver),
        approver: None,
        max_tokens: 1024,
        approval_poll: Duration::from_millis(50),
        holder: holder.to_owned(),
        lease_ttl: ttl,
    })
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupted_call_runs_again_only_after_its_first_attempt_is_stopped() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("toren.db").display());
    let store = Arc::new(CrashAfterStart {
        inner: SqliteStore::open(&url).await.unwrap(),
        fired: Mutex::new(false),
    });
    let script = "turns:\n  - tool_calls:\n      - bash: {command: \"echo ran >> ran.txt\"}\n  - text: finished\n";
    let path = dir.path().join("script.yaml");
    let model = || ScriptedProvider::new(Script::parse(script, &path).unwrap(), path.clone());
    let root = dir.path().join("sandboxes");
    let local = LocalBackend::new(LocalSettings {
        sandbox_root: root.clone(),
        bwrap: None,
    });
    local.check().unwrap();
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
    let (_, lease) = store.create_run(&run, created, "first", ttl).await.unwrap();
    let backend = Arc::new(Recording {
        inner: local,
        store: Arc::clone(&store),
        run: run.clone(),
        calls: Mutex::new(Vec::new()),
    });

    // The first driver dies once its call has started.
    let first = worker(
        Arc::clone(&store),
        Arc::clone(&backend),
        model(),
        "first",
        ttl,
    );
    let died = first.drive(lease, &CancellationToken::new()).await;
    assert!(died.is_err(), "the injected crash stops the first driver");
    assert_eq!(
        *backend.calls.lock().unwrap(),
        ["open after 0 tool_started"],
        "attempt 1 needs nothing stopped"
    );

    // The next one stops what attempt 1 may have left running before attempt 2 starts.
    let lease = match store.acquire_lease(&run, "second", ttl).await {
        Ok(lease) => lease,
        Err(_) => store
            .take_over_lease(&run, "first", "second", ttl)
            .await
            .unwrap(),
    };
    let second = worker(
        Arc::clone(&store),
        Arc::clone(&backend),
        model(),
        "second",
        ttl,
    );
    let outcome = second
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
    assert_eq!(
        *backend.calls.lock().unwrap(),
        [
            "open after 0 tool_started",
            "stop after 1 tool_started",
            "open after 1 tool_started",
        ],
        "the earlier attempt is stopped before the sandbox is reopened and attempt 2 starts"
    );
    let events: Vec<Event> = store.read(&run, 0).await.unwrap();
    let attempts: Vec<u32> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolStarted(s) => Some(s.attempt),
            _ => None,
        })
        .collect();
    assert_eq!(attempts, [1, 2]);
}
