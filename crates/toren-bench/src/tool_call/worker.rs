//! The whole trivial tool call through a [`Worker`] over a real SQLite store (a temporary
//! file, WAL, as `toren` opens it) and a real sandbox backend: a model that answers at once
//! asks for `bash: true` again and again, and each call is timed from its `model_responded`
//! being committed to its `tool_completed` being committed — the decision, the
//! `tool_started` append, the command in the sandbox and the `tool_completed` append. The
//! two halves are kept apart (`model_responded` → `tool_started`, `tool_started` →
//! `tool_completed`) to show the journal's share.
//!
//! Any backend can be measured this way: the worker only sees a `SandboxBackend`.

use std::path::Path;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use async_trait::async_trait;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use toren_model::{ModelProvider, ModelRequest, ModelResponse, TextSink};
use toren_protocol::{
    AgentSpec, ApprovalPolicy, AssistantMessage, Event, EventKind, ResolvedPolicy, RunCreated,
    RunId, RunStatus, SandboxSpec, ToolCall, Usage,
};
use toren_sandbox::{ExecOutput, ExecRequest, Sandbox, SandboxBackend, Workspace};
use toren_store::{EventLog, SqliteStore};
use toren_tools::Toolkit;
use toren_worker::{Observer, Outcome, Worker, WorkerConfig};

use super::floors::WARM_UP;

/// The latencies of one run's `bash: true` calls (warm-up left out).
#[derive(Clone, Debug, Default)]
pub(crate) struct CallTimes {
    /// `model_responded` committed → `tool_completed` committed.
    pub(crate) call: Vec<Duration>,
    /// `model_responded` committed → `tool_started` committed (the decision and one append).
    pub(crate) to_started: Vec<Duration>,
    /// `tool_started` committed → `tool_completed` committed (the exec and one append).
    pub(crate) started_to_completed: Vec<Duration>,
    /// The sandbox's `exec` alone, timed inside the worker (around the backend's call).
    pub(crate) exec: Vec<Duration>,
    /// Per call, the whole call minus its exec: the decision, the two appends and the
    /// worker's own work around the command.
    pub(crate) besides_exec: Vec<Duration>,
}

/// Drives one run of `backend` under `policy` making `iterations` (+ warm-up) `bash: true`
/// calls; the run's workspace is made under `sandbox_root`, its store in a temporary file.
pub(crate) async fn tool_calls(
    backend: Arc<dyn SandboxBackend>,
    mut policy: ResolvedPolicy,
    sandbox_root: &Path,
    iterations: usize,
) -> anyhow::Result<CallTimes> {
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("toren.db").display());
    let store: Arc<dyn EventLog> = Arc::new(SqliteStore::open(&url).await?);
    let calls = WARM_UP + iterations;
    let observer = Arc::new(Marks::default());
    let execs = Arc::new(Mutex::new(Vec::new()));
    let backend: Arc<dyn SandboxBackend> = Arc::new(Timed {
        inner: backend,
        execs: Arc::clone(&execs),
    });
    let worker = Worker::new(WorkerConfig {
        store: Arc::clone(&store),
        models: Arc::new(Arc::new(TrueCaller {
            calls,
            made: AtomicUsize::new(0),
        }) as Arc<dyn ModelProvider>),
        backends: vec![Arc::clone(&backend)],
        toolkit: Toolkit::default(),
        env: Arc::new(|_: &str| None),
        observer: observer.clone(),
        approver: None,
        max_tokens: 1024,
        approval_poll: Duration::from_millis(200),
        holder: "toren-bench".into(),
        lease_ttl: Duration::from_secs(60),
    });

    let run = RunId::new();
    let workspace = Workspace::create(sandbox_root, run.as_str())?;
    policy.workspace = Some(workspace.path().display().to_string());
    let created = RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "bench".into(),
            model: "bench".into(),
            instructions: None,
            sandbox: Some(SandboxSpec {
                checkpoints: Default::default(),
                image: policy.image.clone(),
                network: false,
                egress: None,
                approval: ApprovalPolicy::Never,
                env: Vec::new(),
                limits: policy.limits,
                on_interrupt: Default::default(),
            }),
            max_turns: u32::try_from(calls + 10).unwrap_or(u32::MAX),
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
    let outcome = worker.drive(lease, &CancellationToken::new()).await;
    // Whatever happened, the run's container (docker) goes.
    let finished = backend.finish(&run).await;
    match outcome? {
        Outcome::Ended {
            status: RunStatus::Completed,
            ..
        } => {}
        other => bail!("the benchmark run did not complete: {other:?}"),
    }
    finished.context("cannot finish the benchmark run's sandbox")?;
    let marks = std::mem::take(&mut *observer.0.lock().unwrap_or_else(PoisonError::into_inner));
    let execs = std::mem::take(&mut *execs.lock().unwrap_or_else(PoisonError::into_inner));
    pair(&marks, &execs, calls)
}

/// Pairs each call's three marks, and its exec (one per call, in order), and keeps all
/// but the warm-up.
fn pair(marks: &[(Mark, Instant)], execs: &[Duration], calls: usize) -> anyhow::Result<CallTimes> {
    let mut times = CallTimes::default();
    let (mut responded, mut started) = (None, None);
    for (mark, at) in marks {
        match mark {
            Mark::Responded => responded = Some(*at),
            Mark::Started => started = Some(*at),
            Mark::Completed => {
                let (Some(r), Some(s)) = (responded.take(), started.take()) else {
                    bail!("a tool_completed without its model answer and tool_started");
                };
                times.call.push(*at - r);
                times.to_started.push(s - r);
                times.started_to_completed.push(*at - s);
            }
        }
    }
    ensure!(
        times.call.len() == calls,
        "{} tool calls completed, {calls} expected",
        times.call.len()
    );
    ensure!(
        execs.len() == calls,
        "{} execs for {calls} tool calls",
        execs.len()
    );
    times.exec = execs.to_vec();
    times.besides_exec = times
        .call
        .iter()
        .zip(execs)
        .map(|(call, exec)| call.saturating_sub(*exec))
        .collect();
    for v in [
        &mut times.call,
        &mut times.to_started,
        &mut times.started_to_completed,
        &mut times.exec,
        &mut times.besides_exec,
    ] {
        v.drain(..WARM_UP.min(v.len()));
    }
    Ok(times)
}

/// Asks for `bash: true` `calls` times, then ends the run.
struct TrueCaller {
    calls: usize,
    made: AtomicUsize,
}

#[async_trait]
impl ModelProvider for TrueCaller {
    async fn respond(
        &self,
        _request: &ModelRequest,
        _on_text: TextSink<'_>,
    ) -> Result<ModelResponse, toren_model::Error> {
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

/// A backend whose sandboxes time each `exec` (everything else passes through).
struct Timed {
    inner: Arc<dyn SandboxBackend>,
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
        let inner = self.inner.open(run, policy, env).await?;
        Ok(Arc::new(TimedSandbox {
            inner,
            execs: Arc::clone(&self.execs),
        }))
    }

    async fn finish(&self, run: &RunId) -> toren_sandbox::Result<()> {
        self.inner.finish(run).await
    }

    async fn ready(&self) -> toren_sandbox::Result<()> {
        self.inner.ready().await
    }

    async fn release(&self, key: &str) -> toren_sandbox::Result<()> {
        self.inner.release(key).await
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
        let began = Instant::now();
        let out = self.inner.exec(req).await;
        let took = began.elapsed();
        self.execs
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .push(took);
        out
    }
}

#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mark {
    Responded,
    Started,
    Completed,
}

/// When each event of interest was committed (the worker tells its observer right after).
#[derive(Default)]
struct Marks(Mutex<Vec<(Mark, Instant)>>);

impl Observer for Marks {
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

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn marks_pair_into_calls_without_the_warm_up() {
        let t0 = Instant::now();
        let at = |ms: u64| t0 + Duration::from_millis(ms);
        let mut marks = Vec::new();
        for i in 0..(WARM_UP as u64 + 2) {
            let base = i * 100;
            marks.push((Mark::Responded, at(base)));
            marks.push((Mark::Started, at(base + 2)));
            marks.push((Mark::Completed, at(base + 2 + 10 + i)));
        }
        let execs: Vec<Duration> = (0..(WARM_UP as u64 + 2))
            .map(|i| Duration::from_millis(5 + i))
            .collect();
        let times = pair(&marks, &execs, WARM_UP + 2).unwrap();
        let w = WARM_UP as u64;
        let ms = Duration::from_millis;
        assert_eq!(times.call, vec![ms(12 + w), ms(13 + w)]);
        assert_eq!(times.to_started, vec![ms(2), ms(2)]);
        assert_eq!(times.started_to_completed, vec![ms(10 + w), ms(11 + w)]);
        assert_eq!(times.exec, vec![ms(5 + w), ms(6 + w)]);
        assert_eq!(times.besides_exec, vec![ms(7), ms(7)]);
        assert!(pair(&marks, &execs, WARM_UP + 3).is_err());
        assert!(pair(&marks, &execs[1..], WARM_UP + 2).is_err());
    }
}
