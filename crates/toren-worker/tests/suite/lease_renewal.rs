//! A worker that cannot renew its lease must stop the run's work before the lease can
//! expire: the running command is killed (nothing of it left on the host) and the driver
//! stops with [`Error::LeaseExpiring`], instead of running on beside a process that may
//! take the run over. The store is real SQLite, wrapped so that renewing fails or hangs;
//! the command runs in the real bubblewrap sandbox.

use std::path::Path;
use std::sync::atomic::{AtomicBool, AtomicU32, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;
use toren_model::scripted::{Script, ScriptedProvider};
use toren_protocol::{
    AgentSpec, ApprovalDecided, ApprovalPolicy, Event, EventKind, ResolvedPolicy, RunCreated,
    RunId, RunStatus, SandboxSpec,
};
use toren_sandbox::{LocalBackend, LocalSettings};
use toren_store::{EventLog, Lease, RunSummary, SqliteStore};
use toren_tools::{ToolSettings, Toolkit};
use toren_worker::{Error, Outcome, Worker, WorkerConfig, holder};

/// What `renew_lease` does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Renew {
    /// Fails every time with a database error (not `LeaseLost`).
    Fails,
    /// Never answers.
    Hangs,
    /// Fails once, then works.
    FailsOnce,
    /// Works.
    Works,
}

/// The real store, except for renewing the lease.
struct FlakyRenewals {
    inner: SqliteStore,
    renew: Renew,
    attempts: Mutex<u32>,
    /// Appending a `rewound` waits for three renewals (or for the lease to expire), as
    /// a rewind whose work outlasts its lease would.
    hold_rewound: AtomicBool,
    /// When the lease held now expires (the last one given or renewed).
    expires: Mutex<Option<jiff::Timestamp>>,
    /// A renewal or an append came after the lease had expired.
    lapsed: AtomicBool,
    renewed: AtomicU32,
}

impl FlakyRenewals {
    /// Whether the lease (as last given or renewed) has expired by now; remembers it.
    fn check_lapse(&self, lease: &Lease) -> bool {
        let expires = self.expires.lock().unwrap().unwrap_or(lease.expires_at);
        let lapsed = jiff::Timestamp::now() >= expires.max(lease.expires_at);
        if lapsed {
            self.lapsed.store(true, Ordering::SeqCst);
        }
        lapsed
    }
}

fn database_busy() -> toren_store::Error {
    toren_store::Error::Lock {
        path: "toren.db".into(),
        source: std::io::Error::other("database is locked"),
    }
}

#[async_trait]
impl EventLog for FlakyRenewals {
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
        let rewound = kinds.iter().any(|k| matches!(k, EventKind::Rewound(_)));
        if rewound && self.hold_rewound.load(Ordering::SeqCst) {
            // Synchronisation, not timing: done once the heartbeat renewed three times
            // (by then the first lease would have run out) or the lease ran out.
            while self.renewed.load(Ordering::SeqCst) < 3 && !self.check_lapse(lease) {
                tokio::time::sleep(Duration::from_millis(10)).await;
            }
            self.check_lapse(lease);
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
        let attempt = {
            let mut attempts = self.attempts.lock().unwrap();
            *attempts += 1;
            *attempts
        };
        match self.renew {
            Renew::Fails => Err(database_busy()),
            Renew::Hangs => std::future::pending().await,
            Renew::FailsOnce if attempt == 1 => Err(database_busy()),
            Renew::FailsOnce => self.inner.renew_lease(lease, ttl).await,
            Renew::Works => {
                self.check_lapse(lease);
                let renewed = self.inner.renew_lease(lease, ttl).await?;
                *self.expires.lock().unwrap() = Some(renewed.expires_at);
                self.renewed.fetch_add(1, Ordering::SeqCst);
                Ok(renewed)
            }
        }
    }

    async fn release_lease(&self, lease: &Lease) -> toren_store::Result<()> {
        self.inner.release_lease(lease).await
    }
    async fn count_runs(&self) -> toren_store::Result<toren_store::RunCounts> {
        self.inner.count_runs().await
    }
}

/// A run with one bash call, created in a fresh store whose renewals behave as `renew`.
struct Fixture {
    _dir: TempDir,
    store: Arc<FlakyRenewals>,
    driver: Worker,
    run: RunId,
    lease: Lease,
}

async fn fixture(renew: Renew, ttl: Duration, command: &str) -> Fixture {
    fixture_with(renew, ttl, &[command], false).await
}

/// `commands` are bash calls, one per turn, then the run finishes. `rewindable`: each call
/// waits for approval (the driver lets go of the run meanwhile) and is checkpointed.
async fn fixture_with(renew: Renew, ttl: Duration, commands: &[&str], rewindable: bool) -> Fixture {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("toren.db").display());
    let store = Arc::new(FlakyRenewals {
        inner: SqliteStore::open(&url).await.unwrap(),
        renew,
        attempts: Mutex::new(0),
        hold_rewound: AtomicBool::new(false),
        expires: Mutex::new(None),
        lapsed: AtomicBool::new(false),
        renewed: AtomicU32::new(0),
    });
    let mut script = "turns:\n".to_owned();
    for command in commands {
        script.push_str(&format!(
            "  - tool_calls:\n      - bash: {{command: {}}}\n",
            serde_json::to_string(command).unwrap()
        ));
    }
    script.push_str("  - text: finished\n");
    let approval = if rewindable {
        ApprovalPolicy::Always
    } else {
        ApprovalPolicy::Never
    };
    let path = dir.path().join("script.yaml");
    let model = ScriptedProvider::new(Script::parse(&script, &path).unwrap(), path);
    let sandbox = LocalBackend::new(LocalSettings {
        sandbox_root: dir.path().join("sandboxes"),
        bwrap: None,
    });
    sandbox.check().unwrap();
    let policy = ResolvedPolicy {
        checkpoints: Default::default(),
        backend: LocalBackend::NAME.to_owned(),
        image: None,
        network: false,
        egress: None,
        approval,
        env: Vec::new(),
        limits: Default::default(),
        workspace: None,
        on_interrupt: Default::default(),
        sandbox_key: None,
        volume: None,
    };
    let created = RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "a".into(),
            model: "scripted/script.yaml".into(),
            instructions: None,
            sandbox: Some(SandboxSpec {
                checkpoints: Default::default(),
                image: None,
                network: false,
                egress: None,
                approval,
                env: Vec::new(),
                limits: Default::default(),
                on_interrupt: Default::default(),
            }),
            max_turns: 10,
            context_tokens: None,
            source: None,
        },
        policy: Some(policy),
        input: "go".into(),
        session: None,
        channel: None,
        start: None,
    };
    let run = RunId::new();
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
    let driver = if rewindable {
        driver.with_checkpoints().parking_approvals()
    } else {
        driver
    };
    Fixture {
        _dir: dir,
        store,
        driver,
        run,
        lease,
    }
}

struct NoObserver;
impl toren_worker::Observer for NoObserver {}

/// Pids of the host's processes whose command line contains `marker`.
fn processes_with(marker: &str) -> Vec<u32> {
    let mut found = Vec::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = entry.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let Ok(cmdline) = std::fs::read(entry.path().join("cmdline")) else {
            continue;
        };
        if String::from_utf8_lossy(&cmdline).contains(marker) {
            found.push(pid);
        }
    }
    found
}

fn types(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.name()).collect()
}

async fn cannot_renew(renew: Renew, marker: &str) {
    let ttl = Duration::from_secs(3);
    let f = fixture(renew, ttl, &format!("touch started; sleep {marker}")).await;
    let started = Instant::now();
    let cancel = CancellationToken::new();
    let drive = f.driver.drive(f.lease.clone(), &cancel);
    // Before the lease's expiry the driver must have given up; allow the test a margin.
    let outcome = tokio::time::timeout(ttl * 2, drive)
        .await
        .unwrap_or_else(|_| {
            panic!(
                "{renew:?}: the worker kept driving the run for {:?} although it could not \
             renew its lease (ttl {ttl:?}); its command still runs: {:?}",
                started.elapsed(),
                processes_with(marker)
            )
        });
    let Err(Error::LeaseExpiring { run, error }) = outcome else {
        panic!("{renew:?}: {outcome:?}");
    };
    assert_eq!(run, f.run.to_string());
    assert!(!error.is_empty());
    // The command is gone (bwrap, bash, sleep), and that before anyone could take over.
    let deadline = Instant::now() + Duration::from_secs(5);
    while !processes_with(marker).is_empty() {
        assert!(Instant::now() < deadline, "{:?}", processes_with(marker));
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    assert!(
        jiff::Timestamp::now() < f.lease.expires_at,
        "{renew:?}: stopped only at {:?}, the lease expired at {}",
        started.elapsed(),
        f.lease.expires_at
    );
    assert!(*f.store.attempts.lock().unwrap() >= 1);
    // The command had started, and nothing was written after it: the run is kept as it is.
    let events = f.store.read(&f.run, 0).await.unwrap();
    assert_eq!(
        types(&events),
        [
            "run_created",
            "model_responded",
            "sandbox_provisioned",
            "tool_started"
        ]
    );
    let EventKind::SandboxProvisioned(sandbox) = &events[2].kind else {
        unreachable!()
    };
    assert!(Path::new(&sandbox.workspace).join("started").exists());
}

#[tokio::test(flavor = "multi_thread")]
async fn a_failing_renewal_stops_the_work_before_the_lease_expires() {
    cannot_renew(Renew::Fails, "31415").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_hanging_renewal_stops_the_work_before_the_lease_expires() {
    cannot_renew(Renew::Hangs, "27182").await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_renewal_that_fails_once_lets_the_run_go_on() {
    // The command outlives the first lease by far; renewing works from the second try on.
    let ttl = Duration::from_secs(2);
    let f = fixture(Renew::FailsOnce, ttl, "sleep 2.5; echo done").await;
    let outcome = f
        .driver
        .drive(f.lease.clone(), &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(
        outcome,
        Outcome::Ended {
            status: RunStatus::Completed,
            output: "finished".into()
        }
    );
    assert!(*f.store.attempts.lock().unwrap() > 2);
}

/// A rewind renews its lease while it works: here its `rewound` append is held until the
/// heartbeat has renewed three times (past when the first lease would have run out), and
/// neither a renewal nor the append came after the lease had expired; the restore then
/// gives back the workspace as it was before the first call.
#[tokio::test(flavor = "multi_thread")]
async fn a_rewind_renews_its_lease_while_it_works() {
    let ttl = Duration::from_millis(900);
    let f = fixture_with(
        Renew::Works,
        ttl,
        &["echo one > f.txt", "echo two > f.txt"],
        true,
    )
    .await;
    let approve = |call_id: String| ApprovalDecided {
        call_id,
        approved: true,
        by: "test".into(),
        via: "test".into(),
        reason: None,
    };
    let outcome = f
        .driver
        .drive(f.lease.clone(), &CancellationToken::new())
        .await;
    let Ok(Outcome::AwaitingApproval { call_id }) = outcome else {
        panic!("{outcome:?}");
    };
    f.store
        .decide_approval(&f.run, approve(call_id))
        .await
        .unwrap();
    let holder = holder::this_process();
    let lease = f.store.acquire_lease(&f.run, &holder, ttl).await.unwrap();
    let outcome = f.driver.drive(lease, &CancellationToken::new()).await;
    assert!(
        matches!(outcome, Ok(Outcome::AwaitingApproval { .. })),
        "{outcome:?}"
    );
    let events = f.store.read(&f.run, 0).await.unwrap();
    let workspace = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::SandboxProvisioned(s) => Some(std::path::PathBuf::from(&s.workspace)),
            _ => None,
        })
        .unwrap();
    assert_eq!(
        std::fs::read_to_string(workspace.join("f.txt")).unwrap(),
        "one\n"
    );

    f.store.renewed.store(0, Ordering::SeqCst);
    *f.store.expires.lock().unwrap() = None;
    f.store.lapsed.store(false, Ordering::SeqCst);
    f.store.hold_rewound.store(true, Ordering::SeqCst);
    let rewound = toren_worker::rewind(
        f.store.as_ref(),
        &toren_worker::NoBackends,
        &f.run,
        1,
        Some("test".into()),
        &holder,
        ttl,
    )
    .await
    .unwrap();
    assert!(rewound.checkpoint.is_some(), "{rewound:?}");
    assert!(f.store.renewed.load(Ordering::SeqCst) >= 3);
    assert!(
        !f.store.lapsed.load(Ordering::SeqCst),
        "the lease expired while the rewind worked"
    );
    assert!(
        !workspace.join("f.txt").exists(),
        "restored to before the first call"
    );
}
