//! What every test here shares: a temp home (SQLite store, sandbox root, a [`RunService`]
//! and a [`Worker`] over the real `local` bubblewrap backend), scripted agents written as
//! `turns:` files beside their spec, the model requests each run made (recorded around
//! the real providers), and waits for a condition — an event in a run's log, a file, a
//! process gone — with a deadline instead of sleeps.
//!
//! A run in about ten lines:
//!
//! ```ignore
//! let home = Home::new().await;
//! let agent = home.agent("a", Some(sandbox(ApprovalPolicy::Never)), &[
//!     calls(vec![bash("echo hi > f")]),
//!     say("done"),
//! ]);
//! let (run, outcome) = home.run(agent, "go").await;
//! assert_eq!(outcome, completed("done"));
//! assert_eq!(std::fs::read_to_string(home.workspace(&run).join("f")).unwrap(), "hi\n");
//! ```

use std::collections::BTreeMap;
use std::future::Future;
use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::{Value, json};
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;
use toren_model::{ModelProvider, ModelRequest, ModelResponse, ProviderSettings, TextSink};
use toren_protocol::{
    AgentSpec, ApprovalPolicy, Event, EventKind, RunId, RunStatus, SandboxSpec, ToolCompleted,
};
use toren_runtime::{Actor, Created, Followed, PolicySettings, RunService, ServiceSettings};
use toren_sandbox::{LocalBackend, LocalSettings};
use toren_store::{EventLog, SqliteStore};
use toren_tools::Toolkit;
use toren_worker::{ModelFactory, Outcome, Worker, WorkerConfig, holder};

/// How long any wait for a condition may take before the test fails.
pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// The operator's variables a sandbox may be granted (by name, in the agent's `env`).
pub(crate) const OPERATOR_ENV: [(&str, &str); 3] =
    [("ALPHA", "alpha"), ("BETA", "beta"), ("GAMMA", "gamma")];

/// One scripted model turn: text and tool calls (`{tool: arguments}` each).
#[derive(Clone, Debug, Default)]
pub(crate) struct Turn {
    text: Option<String>,
    calls: Vec<Value>,
}

/// A turn that says `text` (the final answer when it has no calls).
pub(crate) fn say(text: &str) -> Turn {
    Turn {
        text: Some(text.to_owned()),
        ..Turn::default()
    }
}

/// A turn that makes `calls`.
pub(crate) fn calls(calls: Vec<Value>) -> Turn {
    Turn {
        calls,
        ..Turn::default()
    }
}

impl Turn {
    /// The same turn, saying `text` besides its calls.
    pub(crate) fn saying(self, text: &str) -> Self {
        Self {
            text: Some(text.to_owned()),
            ..self
        }
    }
}

/// A `bash` call.
pub(crate) fn bash(command: &str) -> Value {
    json!({ "bash": { "command": command } })
}

/// A call of `tool` with `args`.
pub(crate) fn tool(name: &str, args: Value) -> Value {
    json!({ name: args })
}

/// The script file of `turns`, as JSON (which is YAML).
pub(crate) fn script(turns: &[Turn]) -> String {
    let turns: Vec<Value> = turns
        .iter()
        .map(|t| json!({ "text": t.text, "tool_calls": t.calls }))
        .collect();
    serde_json::to_string_pretty(&json!({ "turns": turns })).unwrap()
}

/// A sandbox with `approval` and everything else at its default.
pub(crate) fn sandbox(approval: ApprovalPolicy) -> SandboxSpec {
    SandboxSpec {
        image: None,
        network: false,
        approval,
        env: Vec::new(),
        limits: Default::default(),
        on_interrupt: Default::default(),
    }
}

/// The outcome of a run that completed with `output`.
pub(crate) fn completed(output: &str) -> Outcome {
    Outcome::Ended {
        status: RunStatus::Completed,
        output: output.to_owned(),
    }
}

/// Who the tests act as.
pub(crate) fn actor() -> Actor {
    Actor {
        by: "tester".into(),
        via: "test".into(),
    }
}

/// How a home is set up; [`Options::default`] suits most tests.
pub(crate) struct Options {
    pub(crate) follow_poll: Duration,
    pub(crate) lease_ttl: Duration,
    /// The models; `None`: the real providers (`scripted/…` relative to the agent's file).
    pub(crate) models: Option<Arc<dyn ModelFactory>>,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            follow_poll: Duration::from_millis(100),
            lease_ttl: Duration::from_secs(30),
            models: None,
        }
    }
}

/// A model request, and the agent whose run made it.
pub(crate) type Requests = Arc<Mutex<Vec<(String, ModelRequest)>>>;

/// A temp Toren home with a run service and one worker serving the `local` backend.
pub(crate) struct Home {
    pub(crate) dir: TempDir,
    /// `TOREN_SANDBOX_ROOT`.
    pub(crate) root: PathBuf,
    pub(crate) store: Arc<dyn EventLog>,
    pub(crate) service: RunService,
    pub(crate) worker: Arc<Worker>,
    pub(crate) holder: String,
    /// Every model request of every run, in order.
    pub(crate) requests: Requests,
}

impl Home {
    pub(crate) async fn new() -> Self {
        Self::with(Options::default()).await
    }

    pub(crate) async fn with(options: Options) -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sandboxes");
        let url = format!("sqlite://{}", dir.path().join("toren.db").display());
        let store: Arc<dyn EventLog> = Arc::new(SqliteStore::open(&url).await.unwrap());
        let service = RunService::new(
            Arc::clone(&store),
            ServiceSettings {
                policy: PolicySettings {
                    backend: Some(LocalBackend::NAME.into()),
                    sandbox_root: root.clone(),
                },
                lease_ttl: options.lease_ttl,
                follow_poll: options.follow_poll,
                streams: None,
            },
        );
        let local = LocalBackend::new(LocalSettings {
            sandbox_root: root.clone(),
            bwrap: None,
        });
        local.check().unwrap();
        let requests = Requests::default();
        let models = Recording {
            inner: options
                .models
                .unwrap_or_else(|| Arc::new(ProviderSettings::default())),
            requests: Arc::clone(&requests),
        };
        let holder = holder::this_process();
        let worker = Worker::new(WorkerConfig {
            store: Arc::clone(&store),
            models: Arc::new(models),
            backends: vec![Arc::new(local)],
            toolkit: Toolkit::default(),
            env: Arc::new(|name: &str| {
                OPERATOR_ENV
                    .iter()
                    .find(|(n, _)| *n == name)
                    .map(|(_, v)| (*v).to_owned())
            }),
            observer: Arc::new(service.notifier().clone()),
            approver: None,
            max_tokens: 1024,
            approval_poll: Duration::from_millis(50),
            holder: holder.clone(),
            lease_ttl: options.lease_ttl,
        });
        Self {
            dir,
            root,
            store,
            service,
            worker: Arc::new(worker),
            holder,
            requests,
        }
    }

    /// Writes `turns` as the script of agent `name` and returns its spec, as read from an
    /// agent file beside the script.
    pub(crate) fn agent(
        &self,
        name: &str,
        sandbox: Option<SandboxSpec>,
        turns: &[Turn],
    ) -> AgentSpec {
        let script_name = format!("{name}.script.yaml");
        std::fs::write(self.dir.path().join(&script_name), script(turns)).unwrap();
        AgentSpec {
            name: name.to_owned(),
            model: format!("scripted/{script_name}"),
            instructions: None,
            sandbox,
            max_turns: 10,
            source: Some(
                self.dir
                    .path()
                    .join(format!("{name}.yaml"))
                    .display()
                    .to_string(),
            ),
        }
    }

    pub(crate) async fn create(&self, agent: AgentSpec, input: &str) -> Created {
        self.service
            .create(agent, input.to_owned(), &self.holder)
            .await
            .unwrap()
    }

    /// Creates a run and drives it to its end.
    pub(crate) async fn run(&self, agent: AgentSpec, input: &str) -> (RunId, Outcome) {
        let created = self.create(agent, input).await;
        let outcome = self
            .worker
            .drive(created.lease, &CancellationToken::new())
            .await
            .unwrap();
        (created.run_id, outcome)
    }

    /// Acquires `run` (as a resuming process would) and drives it to its end.
    pub(crate) async fn resume(&self, run: &RunId) -> Outcome {
        let lease = self.worker.acquire(run).await.unwrap();
        self.worker
            .drive(lease, &CancellationToken::new())
            .await
            .unwrap()
    }

    pub(crate) async fn events(&self, run: &RunId) -> Vec<Event> {
        self.service.events(run, 0).await.unwrap()
    }

    /// The run's workspace on the host.
    pub(crate) fn workspace(&self, run: &RunId) -> PathBuf {
        toren_sandbox::workspace_path(&self.root, run.as_str())
    }

    /// Follows `run` until an event matches `pred`, and returns it.
    pub(crate) async fn wait_for(
        &self,
        run: &RunId,
        what: &str,
        pred: impl Fn(&Event) -> bool,
    ) -> Event {
        let mut follow = self.service.follow(run, 0);
        let found = tokio::time::timeout(WAIT, async {
            while let Some(item) = follow.next().await.unwrap() {
                if let Followed::Event(event) = item
                    && pred(&event)
                {
                    return Some(*event);
                }
            }
            None
        })
        .await;
        match found {
            Ok(Some(event)) => event,
            Ok(None) => panic!(
                "run {run} ended before {what}: {:?}",
                types(&self.events(run).await)
            ),
            Err(_) => panic!(
                "no {what} in run {run} within {WAIT:?}: {:?}",
                types(&self.events(run).await)
            ),
        }
    }

    /// The model requests made by runs of agent `name`.
    pub(crate) fn requests_of(&self, name: &str) -> Vec<ModelRequest> {
        self.requests
            .lock()
            .unwrap()
            .iter()
            .filter(|(agent, _)| agent == name)
            .map(|(_, r)| r.clone())
            .collect()
    }
}

/// Waits until `cond` holds, checking every 10 ms; fails the test after [`WAIT`].
pub(crate) async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Awaits `future`, failing the test after [`WAIT`] with `what`.
pub(crate) async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {WAIT:?}"))
}

/// The `type` of each event.
pub(crate) fn types(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.name()).collect()
}

/// Asserts that the seqs are 1, 2, 3, … with no gap.
pub(crate) fn assert_gap_free(events: &[Event]) {
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    let expected: Vec<u64> = (1..=events.len() as u64).collect();
    assert_eq!(seqs, expected, "{:?}", types(events));
}

/// Each call's recorded result, by call id (the last one where a call has several).
pub(crate) fn results(events: &[Event]) -> BTreeMap<String, ToolCompleted> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolCompleted(c) => Some((c.call_id.clone(), c.clone())),
            _ => None,
        })
        .collect()
}

/// Where in `events` the first event matching `pred` is.
pub(crate) fn position(events: &[Event], pred: impl Fn(&EventKind) -> bool) -> Option<usize> {
    events.iter().position(|e| pred(&e.kind))
}

/// Pids and command lines of the host's processes (other than this test) that contain
/// `marker`.
pub(crate) fn processes_with(marker: &str) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id())
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let line = String::from_utf8_lossy(&raw).replace('\0', " ");
            line.contains(marker).then_some((pid, line))
        })
        .collect()
}

/// Every model call goes through the real provider and is recorded first.
struct Recording {
    inner: Arc<dyn ModelFactory>,
    requests: Requests,
}

impl ModelFactory for Recording {
    fn model(&self, agent: &AgentSpec) -> Result<Arc<dyn ModelProvider>, toren_model::Error> {
        Ok(Arc::new(Recorded {
            agent: agent.name.clone(),
            inner: self.inner.model(agent)?,
            requests: Arc::clone(&self.requests),
        }))
    }
}

struct Recorded {
    agent: String,
    inner: Arc<dyn ModelProvider>,
    requests: Requests,
}

#[async_trait]
impl ModelProvider for Recorded {
    async fn respond(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelResponse, toren_model::Error> {
        self.requests
            .lock()
            .unwrap()
            .push((self.agent.clone(), request.clone()));
        self.inner.respond(request, on_text).await
    }
}
