//! Runs bound to a channel, driven by the real worker over real SQLite and the real
//! bubblewrap sandbox, with the real terminal channel: a file sent with `send_to_channel`
//! reaches the downloads directory byte for byte and is journaled (`message_delivered`)
//! in the batch of the call's result; a process stopped between the delivery and its journal
//! entry is resumed without delivering twice; a bound run whose channel this process cannot
//! reach is not driven and stays as it is.

use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use pretty_assertions::assert_eq;
use tokio_util::sync::CancellationToken;
use toren_channel::{
    Announcement, Channel, ChannelError, ChannelFactory, Delivered, Delivery, TERMINAL,
    TerminalChannel, TerminalChannels,
};
use toren_model::scripted::{Script, ScriptedProvider};
use toren_protocol::{
    AgentSpec, ApprovalPolicy, ChannelBinding, Event, EventKind, MessageDelivered, ResolvedPolicy,
    RunCreated, RunId, RunStatus, SandboxSpec,
};
use toren_sandbox::{LocalBackend, LocalSettings};
use toren_store::{EventLog, SqliteStore};
use toren_tools::{ToolSettings, Toolkit};
use toren_worker::{Error, Outcome, Worker, WorkerConfig, holder};

const SCRIPT: &str = r##"turns:
  - tool_calls:
      - write_file: {path: out/report.md, content: "# Findings\n\n3 tests fail.\n"}
  - tool_calls:
      - send_to_channel: {path: out/report.md, caption: "the findings"}
  - text: "sent you the report"
"##;

struct NoObserver;
impl toren_worker::Observer for NoObserver {}

/// A home: the store, the sandbox root, a downloads root, and one run bound to the
/// terminal at address `chat`.
struct Home {
    dir: tempfile::TempDir,
    store: Arc<SqliteStore>,
    run: RunId,
    heard: Arc<Mutex<Vec<Announcement>>>,
}

impl Home {
    async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let url = format!("sqlite://{}", dir.path().join("toren.db").display());
        let store = Arc::new(SqliteStore::open(&url).await.unwrap());
        std::fs::write(dir.path().join("script.yaml"), SCRIPT).unwrap();
        let created = RunCreated {
            agent: AgentSpec {
                budget: None,
                name: "a".into(),
                model: "scripted/script.yaml".into(),
                instructions: None,
                sandbox: Some(SandboxSpec {
                    checkpoints: Default::default(),
                    approval: ApprovalPolicy::Never,
                    ..SandboxSpec::default()
                }),
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
            input: "report".into(),
            session: None,
            channel: Some(ChannelBinding {
                kind: TERMINAL.into(),
                address: "chat".into(),
            }),
            start: None,
        };
        let run = RunId::new();
        let (_, lease) = store
            .create_run(&run, created, "creator", Duration::from_secs(30))
            .await
            .unwrap();
        store.release_lease(&lease).await.unwrap();
        Self {
            dir,
            store,
            run,
            heard: Arc::new(Mutex::new(Vec::new())),
        }
    }

    fn downloads(&self) -> PathBuf {
        self.dir.path().join("downloads/chat")
    }

    fn workspace_file(&self, rel: &str) -> PathBuf {
        toren_sandbox::workspace_path(&self.dir.path().join("sandboxes"), self.run.as_str())
            .join(rel)
    }

    /// The terminal channels of this home, keeping what they announce.
    fn terminal(&self) -> TerminalChannels {
        let sink = Arc::clone(&self.heard);
        TerminalChannels::new(self.dir.path().join("downloads")).announce_with(Arc::new(
            move |a: &Announcement| sink.lock().unwrap().push(a.clone()),
        ))
    }

    fn worker(&self) -> Worker {
        let path = self.dir.path().join("script.yaml");
        let model = ScriptedProvider::new(Script::parse(SCRIPT, &path).unwrap(), path);
        Worker::new(WorkerConfig {
            store: self.store.clone(),
            models: Arc::new(Arc::new(model) as Arc<dyn toren_model::ModelProvider>),
            backends: vec![Arc::new(LocalBackend::new(LocalSettings {
                sandbox_root: self.dir.path().join("sandboxes"),
                bwrap: None,
            }))],
            toolkit: Toolkit::new(ToolSettings::default()),
            env: Arc::new(|_: &str| None),
            observer: Arc::new(NoObserver),
            approver: None,
            max_tokens: 1024,
            approval_poll: Duration::from_millis(20),
            holder: holder::this_process(),
            lease_ttl: Duration::from_secs(30),
        })
    }

    async fn drive(&self, worker: &Worker, stop: &CancellationToken) -> Result<Outcome, Error> {
        let lease = worker.acquire(&self.run).await?;
        worker.drive(lease, stop).await
    }

    async fn events(&self) -> Vec<Event> {
        self.store.read(&self.run, 0).await.unwrap()
    }

    fn files(&self) -> Vec<String> {
        let mut names: Vec<String> = std::fs::read_dir(self.downloads())
            .map(|entries| {
                entries
                    .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
                    .filter(|n| !n.starts_with('.'))
                    .collect()
            })
            .unwrap_or_default();
        names.sort();
        names
    }
}

fn sha256sum(path: &Path) -> String {
    let out = std::process::Command::new("sha256sum")
        .arg(path)
        .output()
        .unwrap();
    String::from_utf8(out.stdout).unwrap()[..64].to_owned()
}

fn deliveries(events: &[Event]) -> Vec<MessageDelivered> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::MessageDelivered(d) => Some(d.clone()),
            _ => None,
        })
        .collect()
}

fn completed() -> Outcome {
    Outcome::Ended {
        status: RunStatus::Completed,
        output: "sent you the report".into(),
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_file_sent_reaches_the_downloads_and_is_journaled_with_its_result() {
    let home = Home::new().await;
    let worker = home.worker().with_channels(Arc::new(home.terminal()));
    let outcome = home
        .drive(&worker, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome, completed());

    let received = home.downloads().join("report.md");
    let sent = home.workspace_file("out/report.md");
    assert_eq!(
        std::fs::read(&received).unwrap(),
        std::fs::read(&sent).unwrap()
    );
    let events = home.events();
    let events = events.await;
    assert_eq!(
        deliveries(&events),
        [MessageDelivered {
            call_id: "call_2".into(),
            channel: "terminal".into(),
            path: "out/report.md".into(),
            bytes: 26,
            sha256: sha256sum(&received),
            kind: "document".into(),
            caption: Some("the findings".into()),
            receipt: received.display().to_string(),
            repeated: false,
        }]
    );
    // In one batch, right before the call's result.
    let at = events
        .iter()
        .position(|e| e.kind.name() == "message_delivered")
        .unwrap();
    match &events[at + 1].kind {
        EventKind::ToolCompleted(t) => {
            assert_eq!(t.call_id, "call_2");
            assert!(!t.is_error, "{}", t.output);
        }
        other => panic!("expected the call's result after its delivery, got {other:?}"),
    }
    assert_eq!(events[at].at, events[at + 1].at, "appended in one batch");
    assert_eq!(home.heard.lock().unwrap().len(), 1);
}

/// Delivers through the terminal, then stops the driver before it can journal anything, as
/// a process killed at that moment would.
#[derive(Debug)]
struct DeliverThenStop {
    inner: TerminalChannel,
    stop: CancellationToken,
}

#[async_trait]
impl Channel for DeliverThenStop {
    fn name(&self) -> &str {
        TERMINAL
    }

    async fn deliver(&self, delivery: &Delivery) -> Result<Delivered, ChannelError> {
        self.inner.deliver(delivery).await?;
        self.stop.cancel();
        std::future::pending().await
    }
}

struct Stopping(Arc<DeliverThenStop>);

impl ChannelFactory for Stopping {
    fn channel(&self, _: &RunId, _: &ChannelBinding) -> Result<Arc<dyn Channel>, ChannelError> {
        Ok(self.0.clone())
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_delivery_stopped_before_its_journal_entry_is_not_made_twice_on_resume() {
    let home = Home::new().await;
    let stop = CancellationToken::new();
    let channel = DeliverThenStop {
        inner: TerminalChannel::new(home.downloads()),
        stop: stop.clone(),
    };
    let first = home
        .worker()
        .with_channels(Arc::new(Stopping(Arc::new(channel))));
    assert_eq!(
        home.drive(&first, &stop).await.unwrap(),
        Outcome::Interrupted
    );
    // Delivered, but the log only says the call started.
    assert_eq!(home.files(), ["report.md"]);
    let events = home.events().await;
    assert_eq!(deliveries(&events), []);
    assert_eq!(events.last().unwrap().kind.name(), "tool_started");

    // Resumed by another worker: the call runs again (attempt 2) and the channel answers
    // with the first delivery instead of copying again.
    let resumed = home.worker().with_channels(Arc::new(home.terminal()));
    let outcome = home
        .drive(&resumed, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(outcome, completed());
    assert_eq!(home.files(), ["report.md"], "one copy");
    assert!(home.heard.lock().unwrap().is_empty(), "not announced again");
    let events = home.events().await;
    let delivered = deliveries(&events);
    assert_eq!(delivered.len(), 1);
    assert!(delivered[0].repeated);
    assert_eq!(
        delivered[0].receipt,
        home.downloads().join("report.md").display().to_string()
    );
    let result = events
        .iter()
        .find_map(|e| match &e.kind {
            EventKind::ToolCompleted(t) if t.call_id == "call_2" => Some(t.output.clone()),
            _ => None,
        })
        .unwrap();
    assert!(result.contains("was not sent again"), "{result}");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_bound_run_is_not_driven_where_its_channel_is_missing() {
    let home = Home::new().await;
    let worker = home.worker(); // no channels
    let err = home
        .drive(&worker, &CancellationToken::new())
        .await
        .unwrap_err();
    assert!(matches!(err, Error::NoChannel { .. }), "{err}");
    assert!(err.to_string().contains("no `terminal` channel"), "{err}");
    // Nothing happened: the run waits, resumable, for a process with the channel.
    assert_eq!(home.events().await.len(), 1);
    let summary = home.store.run(&home.run).await.unwrap();
    assert_eq!(summary.status, RunStatus::Queued);
}
