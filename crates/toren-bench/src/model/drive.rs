//! One run driven by a [`Worker`] over a real SQLite store and the real `local` backend,
//! whose model is a real provider of `toren-model` (or the scripted one): every turn but
//! the last asks for `bash: true`. What is kept per call: when the provider's `respond`
//! returned, and when `model_responded` and `tool_started` were committed (the worker's
//! observer is told after each append returned).

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::bail;
use async_trait::async_trait;
use tokio_util::sync::CancellationToken;
use toren_model::{ModelProvider, ModelRequest, ModelResponse, TextSink};
use toren_protocol::{
    AgentSpec, ApprovalPolicy, Event, EventKind, ResolvedPolicy, RunCreated, RunId, RunStatus,
    SandboxSpec,
};
use toren_sandbox::{LocalBackend, LocalSettings, SandboxBackend, Workspace};
use toren_store::{EventLog, SqliteStore};
use toren_tools::Toolkit;
use toren_worker::{Observer, Outcome, Worker, WorkerConfig};

/// The moments of one model turn that asked for a call.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Turn {
    /// The provider's `respond` returned its answer.
    pub(crate) answered: Instant,
    /// `model_responded` committed.
    pub(crate) responded: Instant,
    /// `tool_started` committed.
    pub(crate) started: Instant,
}

/// Drives one run of `turns` model answers from `provider` (each but the last a call);
/// the moments of each turn that made a call, in order.
pub(crate) async fn drive(
    provider: Arc<dyn ModelProvider>,
    turns: usize,
) -> anyhow::Result<Vec<Turn>> {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("toren.db").display());
    let store: Arc<dyn EventLog> = Arc::new(SqliteStore::open(&url).await?);
    let settings = LocalSettings {
        sandbox_root: dir.path().join("sandboxes"),
        bwrap: None,
    };
    let backend = Arc::new(LocalBackend::new(settings.clone()));
    backend.check()?;
    let timed = Arc::new(Timed {
        inner: provider,
        answered: Mutex::default(),
    });
    let marks = Arc::new(Marks::default());
    let worker = Worker::new(WorkerConfig {
        store: Arc::clone(&store),
        models: Arc::new(Arc::clone(&timed) as Arc<dyn ModelProvider>),
        backends: vec![Arc::clone(&backend) as Arc<dyn SandboxBackend>],
        toolkit: Toolkit::default(),
        env: Arc::new(|_: &str| None),
        observer: marks.clone(),
        approver: None,
        max_tokens: 1024,
        approval_poll: Duration::from_millis(200),
        holder: "toren-bench".into(),
        lease_ttl: Duration::from_secs(60),
    });
    let run = RunId::new();
    let workspace = Workspace::create(&settings.sandbox_root, run.as_str())?;
    let policy = ResolvedPolicy {
        checkpoints: Default::default(),
        backend: LocalBackend::NAME.to_owned(),
        image: None,
        network: false,
        egress: None,
        approval: ApprovalPolicy::Never,
        env: Vec::new(),
        limits: Default::default(),
        workspace: Some(workspace.path().display().to_string()),
        on_interrupt: Default::default(),
        sandbox_key: None,
        volume: None,
    };
    let created = RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "bench".into(),
            model: "bench".into(),
            instructions: None,
            sandbox: Some(SandboxSpec {
                checkpoints: Default::default(),
                image: None,
                network: false,
                egress: None,
                approval: ApprovalPolicy::Never,
                env: Vec::new(),
                limits: policy.limits,
                on_interrupt: Default::default(),
            }),
            max_turns: u32::try_from(turns + 10).unwrap_or(u32::MAX),
            context_tokens: Some(100_000_000),
            source: None,
        },
        policy: Some(policy),
        input: "run true".into(),
        session: None,
        channel: None,
        start: None,
    };
    let (_, lease) = store
        .create_run(&run, created, "toren-bench", Duration::from_secs(60))
        .await?;
    let outcome = worker.drive(lease, &CancellationToken::new()).await?;
    let _ = backend.finish(&run).await;
    match outcome {
        Outcome::Ended {
            status: RunStatus::Completed,
            ..
        } => {}
        other => bail!("the benchmark run did not complete: {other:?}"),
    }
    let answered = std::mem::take(
        &mut *timed
            .answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner),
    );
    let marks = std::mem::take(&mut *marks.0.lock().unwrap_or_else(PoisonError::into_inner));
    pair(&answered, &marks, turns)
}

/// Lines up the answers with the commits: turn n's `model_responded`, then its
/// `tool_started`.
fn pair(
    answered: &[Instant],
    marks: &[(bool, Instant)],
    turns: usize,
) -> anyhow::Result<Vec<Turn>> {
    if answered.len() != turns {
        bail!(
            "the provider answered {} times, {turns} expected",
            answered.len()
        );
    }
    let responded: Vec<Instant> = marks.iter().filter(|m| !m.0).map(|m| m.1).collect();
    let started: Vec<Instant> = marks.iter().filter(|m| m.0).map(|m| m.1).collect();
    if responded.len() != turns || started.len() != turns - 1 {
        bail!(
            "{} model_responded and {} tool_started for {turns} turns",
            responded.len(),
            started.len()
        );
    }
    Ok((0..turns - 1)
        .map(|n| Turn {
            answered: answered[n],
            responded: responded[n],
            started: started[n],
        })
        .collect())
}

/// A provider that notes when each answer was complete.
struct Timed {
    inner: Arc<dyn ModelProvider>,
    answered: Mutex<Vec<Instant>>,
}

#[async_trait]
impl ModelProvider for Timed {
    async fn respond(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelResponse, toren_model::Error> {
        let answer = self.inner.respond(request, on_text).await;
        let at = Instant::now();
        self.answered
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(at);
        answer
    }
}

/// When `model_responded` (false) and `tool_started` (true) were committed.
#[derive(Default)]
struct Marks(Mutex<Vec<(bool, Instant)>>);

impl Observer for Marks {
    fn event(&self, event: &Event) {
        let at = Instant::now();
        let started = match &event.kind {
            EventKind::ModelResponded(_) => false,
            EventKind::ToolStarted(_) => true,
            _ => return,
        };
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((started, at));
    }
}
