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

mod checks;
mod script;

use std::path::PathBuf;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;
use toren_model::{ModelProvider, ModelRequest, ModelResponse, ProviderSettings, TextSink};
use toren_protocol::{AgentSpec, Event, RunId, RunStatus, SandboxSpec};
use toren_runtime::{Actor, Created, Followed, PolicySettings, RunService, ServiceSettings};
use toren_sandbox::{LocalBackend, LocalSettings};
use toren_store::{EventLog, SqliteStore};
use toren_tools::Toolkit;
use toren_worker::{ModelFactory, Outcome, Worker, WorkerConfig, holder};

pub(crate) use checks::*;
pub(crate) use script::*;

/// How long any wait for a condition may take before the test fails.
pub(crate) const WAIT: Duration = Duration::from_secs(30);

/// The operator's variables a sandbox may be granted (by name, in the agent's `env`).
pub(crate) const OPERATOR_ENV: [(&str, &str); 3] =
    [("ALPHA", "alpha"), ("BETA", "beta"), ("GAMMA", "gamma")];

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
    /// Whether streamed text is shared with other processes (through `<home>/streams`).
    pub(crate) streams: bool,
    /// Whether the worker lets go of runs that wait for a human (as `toren serve`'s do).
    pub(crate) park_approvals: bool,
}

impl Default for Options {
    fn default() -> Self {
        Self {
            follow_poll: Duration::from_millis(100),
            lease_ttl: Duration::from_secs(30),
            models: None,
            streams: false,
            park_approvals: false,
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
                    volume: None,
                    asks_hosts: true,
                },
                lease_ttl: options.lease_ttl,
                follow_poll: options.follow_poll,
                streams: options.streams.then(|| dir.path().join("streams")),
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
        let worker = if options.park_approvals {
            worker.parking_approvals()
        } else {
            worker
        };
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
            budget: None,
            name: name.to_owned(),
            model: format!("scripted/{script_name}"),
            instructions: None,
            sandbox,
            max_turns: 10,
            context_tokens: None,
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
