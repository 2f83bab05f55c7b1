//! The whole trivial tool call through a [`Worker`] over a real SQLite store (a temporary
//! file, WAL, as `toren` opens it) and the real `local` backend: a model that answers at
//! once asks for `bash: true` again and again, and each call is timed from its
//! `model_responded` being committed to its `tool_completed` being committed — the
//! `tool_started` append, the command in the sandbox, and the `tool_completed` append.
//! The share of the two appends is shown too (`model_responded` → `tool_started`, and
//! `tool_started` → `tool_completed` minus the bare exec measured by `floors`). The model
//! runs the host floor (`bash -c true`) before each answer, so the ratio compares samples
//! taken side by side.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use async_trait::async_trait;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use toren_model::{ModelProvider, ModelRequest, ModelResponse, TextSink};
use toren_protocol::{
    AgentSpec, ApprovalPolicy, AssistantMessage, Event, EventKind, ResolvedPolicy, RunCreated,
    RunId, RunStatus, SandboxSpec, ToolCall, Usage,
};
use toren_sandbox::{ExecOutput, ExecRequest, LocalBackend, Sandbox, SandboxBackend, Workspace};
use toren_store::{EventLog, SqliteStore};
use toren_tools::Toolkit;
use toren_worker::{Observer, Outcome, Worker, WorkerConfig};

use crate::floors::{bash_true, local_policy};
use crate::stats::{Paired, Summary};

/// Not counted: the first calls open the sandbox and warm the store.
const WARM_UP: usize = 10;

/// What one run of `bash: true` calls measured.
#[derive(Clone, Debug)]
pub(crate) struct ToolCallFigures {
    /// `model_responded` committed → `tool_completed` committed, with the host floor
    /// measured between calls.
    pub(crate) call: Paired,
    /// `model_responded` committed → `tool_started` committed (the decision and one append).
    pub(crate) to_started: Summary,
    /// `tool_started` committed → `tool_completed` committed (the exec and one append).
    pub(crate) started_to_completed: Summary,
    /// The sandbox's `exec` alone, timed inside the worker.
    pub(crate) exec: Summary,
    /// Per call, the whole call minus its exec: the two appends and the worker's work.
    pub(crate) besides_exec: Summary,
}

/// Drives one run making `iterations` (+ warm-up) `bash: true` calls.
pub(crate) async fn tool_call(
    local: anyhow::Result<LocalBackend>,
    sandbox_root: &Path,
    iterations: usize,
) -> anyhow::Result<ToolCallFigures> {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("toren.db").display());
    let store: Arc<dyn EventLog> = Arc::new(SqliteStore::open(&url).await?);
    let local = local?;
    let calls = WARM_UP + iterations;
    let observer = Arc::new(Times::default());
    let host = Arc::new(Mutex::new(Vec::new()));
    let execs = Arc::new(Mutex::new(Vec::new()));
    let worker = Worker::new(WorkerConfig {
        store: Arc::clone(&store),
        models: Arc::new(Arc::new(TrueCaller {
            calls,
            made: AtomicUsize::new(0),
            host: Arc::clone(&host),
        }) as Arc<dyn ModelProvider>),
        backends: vec![Arc::new(Timed {
            inner: local,
            execs: Arc::clone(&execs),
        })],
        toolkit: Toolkit::default(),
        env: Arc::new(|_: &str| None),
        observer: observer.clone(),
        approver: None,
        max_tokens: 1024,
        approval_poll: Duration::from_millis(200),
        holder: "local-bench".into(),
        lease_ttl: Duration::from_secs(60),
    });

    let run = RunId::new();
    let workspace = Workspace::create(sandbox_root, run.as_str())?;
    let mut policy = local_policy();
    policy.workspace = Some(workspace.path().display().to_string());
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
                limits: Default::default(),
                on_interrupt: Default::default(),
            }),
            max_turns: u32::try_from(calls + 10).unwrap_or(u32::MAX),
            context_tokens: Some(10_000_000),
            source: None,
        },
        policy: Some(policy),
        input: "run true".into(),
        session: None,
        channel: None,
        start: None,
    };
    let (_, lease) = store
        .create_run(&run, created, "local-bench", Duration::from_secs(60))
        .await?;
    let outcome = worker.drive(lease, &CancellationToken::new()).await?;
    match outcome {
        Outcome::Ended {
            status: RunStatus::Completed,
            ..
        } => {}
        other => bail!("the benchmark run did not complete: {other:?}"),
    }
    let marks = std::mem::take(&mut *observer.0.lock().unwrap_or_else(PoisonError::into_inner));
    let host = std::mem::take(&mut *host.lock().unwrap_or_else(PoisonError::into_inner));
    let execs = std::mem::take(&mut *execs.lock().unwrap_or_else(PoisonError::into_inner));
    figures(&marks, host, execs, calls)
}

/// Pairs each call's three marks and summarises all but the warm-up.
fn figures(
    marks: &[(Mark, Instant)],
    host: Vec<Duration>,
    execs: Vec<Duration>,
    calls: usize,
) -> anyhow::Result<ToolCallFigures> {
    let mut call = Vec::new();
    let mut to_started = Vec::new();
    let mut started_to_completed = Vec::new();
    let mut responded = None;
    let mut started = None;
    for (mark, at) in marks {
        match mark {
            Mark::Responded => responded = Some(*at),
            Mark::Started => started = Some(*at),
            Mark::Completed => {
                let (Some(r), Some(s)) = (responded.take(), started.take()) else {
                    bail!("a tool_completed without its model answer and tool_started");
                };
                call.push(*at - r);
                to_started.push(s - r);
                started_to_completed.push(*at - s);
            }
        }
    }
    if call.len() != calls || execs.len() != calls {
        bail!(
            "{} tool calls completed and {} commands ran, {calls} expected",
            call.len(),
            execs.len()
        );
    }
    let besides_exec = call
        .iter()
        .zip(&execs)
        .map(|(c, e)| c.saturating_sub(*e))
        .collect();
    let counted = |mut v: Vec<Duration>| Summary::of(v.split_off(WARM_UP)).context("no samples");
    Ok(ToolCallFigures {
        call: Paired {
            it: counted(call)?,
            host: counted(host)?,
        },
        to_started: counted(to_started)?,
        started_to_completed: counted(started_to_completed)?,
        exec: counted(execs)?,
        besides_exec: counted(besides_exec)?,
    })
}

/// Asks for `bash: true` `calls` times, then ends the run; times a `bash -c true` on the
/// host before each answer.
struct TrueCaller {
    calls: usize,
    made: AtomicUsize,
    host: Arc<Mutex<Vec<Duration>>>,
}

#[async_trait]
impl ModelProvider for TrueCaller {
    async fn respond(
        &self,
        _request: &ModelRequest,
        _on_text: TextSink<'_>,
    ) -> Result<ModelResponse, toren_model::Error> {
        let t = Instant::now();
        if let Err(e) = bash_true().await {
            return Err(toren_model::Error::Client {
                detail: e.to_string(),
            });
        }
        let floor = t.elapsed();
        self.host
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(floor);
        let n = self.made.fetch_add(1, Ordering::Relaxed);
        let (tool_calls, stop_reason) = if n < self.calls {
            let call = ToolCall {
                id: format!("call_{n}"),
                name: "bash".into(),
                arguments: json!({ "command": "true" }),
                wire_id: None,
            };
            (vec![call], "tool_use")
        } else {
            (Vec::new(), "end_turn")
        };
        Ok(ModelResponse {
            message: AssistantMessage {
                text: String::new(),
                tool_calls,
            },
            stop_reason: stop_reason.into(),
            usage: Usage::default(),
            model: "bench".into(),
        })
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mark {
    Responded,
    Started,
    Completed,
}

/// When each event of interest was committed.
#[derive(Default)]
struct Times(Mutex<Vec<(Mark, Instant)>>);

impl Observer for Times {
    fn event(&self, event: &Event) {
        let at = Instant::now();
        let mark = match &event.kind {
            EventKind::ModelResponded(_) => Mark::Responded,
            EventKind::ToolStarted(_) => Mark::Started,
            EventKind::ToolCompleted(_) => Mark::Completed,
            _ => return,
        };
        self.0
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push((mark, at));
    }
}

/// The local backend, with every command's `exec` timed.
struct Timed {
    inner: LocalBackend,
    execs: Arc<Mutex<Vec<Duration>>>,
}

#[async_trait]
impl SandboxBackend for Timed {
    fn name(&self) -> &'static str {
        self.inner.name()
    }

    async fn open(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
    ) -> toren_sandbox::Result<Arc<dyn Sandbox>> {
        let inner = SandboxBackend::open(&self.inner, run, policy, env).await?;
        Ok(Arc::new(TimedSandbox {
            inner,
            execs: Arc::clone(&self.execs),
        }))
    }
}

#[derive(Debug)]
struct TimedSandbox {
    inner: Arc<dyn Sandbox>,
    execs: Arc<Mutex<Vec<Duration>>>,
}

#[async_trait]
impl Sandbox for TimedSandbox {
    fn workspace(&self) -> &Workspace {
        self.inner.workspace()
    }

    fn backend(&self) -> &'static str {
        self.inner.backend()
    }

    fn instance_id(&self) -> String {
        self.inner.instance_id()
    }

    async fn exec(&self, req: ExecRequest) -> toren_sandbox::Result<ExecOutput> {
        let t = Instant::now();
        let out = self.inner.exec(req).await;
        let took = t.elapsed();
        self.execs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(took);
        out
    }
}
