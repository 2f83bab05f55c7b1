//! `service.follow`: every event of a run, in order, until it ends — woken by the worker in
//! the same process (the follow poll here is an hour, so nothing but the notifier can wake
//! it) or, from another process's service, by the poll; the end is never missed when it is
//! appended while the follower looks; and a run's streamed text reaches its follower whole,
//! before the answer it belongs to.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Semaphore;
use toren_model::{ModelProvider, ModelRequest, ModelResponse, ProviderSettings, TextSink};
use toren_protocol::{
    AgentSpec, ApprovalDecided, ApprovalPolicy, AssistantMessage, Event, EventKind, ModelResponded,
    RunCancelled, RunCompleted, RunCreated, RunId,
};
use toren_runtime::{Followed, PolicySettings, RunService, ServiceSettings};
use toren_store::{EventLog, Lease, RunSummary, SqliteStore};
use toren_worker::ModelFactory;

use super::support::{Home, Options, actor, bash, calls, completed, sandbox, say, types, within};

/// Follows `run` to its end; every item, in order.
async fn follow_all(service: &RunService, run: &RunId) -> Vec<Followed> {
    let mut follow = service.follow(run, 0);
    let mut items = Vec::new();
    while let Some(item) = within("the next followed item", follow.next())
        .await
        .unwrap()
    {
        items.push(item);
    }
    items
}

fn events_of(items: &[Followed]) -> Vec<Event> {
    items
        .iter()
        .filter_map(|i| match i {
            Followed::Event(e) => Some((**e).clone()),
            Followed::Text(_) => None,
        })
        .collect()
}

/// Another process's service over the same database: its own connections and notifier,
/// so only its poll can see the run move.
async fn other_process(home: &Home) -> RunService {
    let url = format!("sqlite://{}", home.dir.path().join("toren.db").display());
    RunService::new(
        Arc::new(SqliteStore::open(&url).await.unwrap()),
        ServiceSettings {
            policy: PolicySettings {
                backend: Some("local".into()),
                sandbox_root: home.root.clone(),
            },
            lease_ttl: Duration::from_secs(30),
            follow_poll: Duration::from_millis(20),
            streams: None,
        },
    )
}

#[tokio::test(flavor = "multi_thread")]
async fn a_follower_gets_every_event_in_order_until_the_run_ends() {
    let home = Home::with(Options {
        follow_poll: Duration::from_secs(3600),
        ..Options::default()
    })
    .await;
    let agent = home.agent(
        "followed",
        Some(sandbox(ApprovalPolicy::Always)),
        &[
            calls(vec![bash("echo first")]),
            calls(vec![bash("echo second")]),
            say("done"),
        ],
    );
    let created = home.create(agent, "go").await;
    let run = created.run_id.clone();
    let here = {
        let service = home.service.clone();
        let run = run.clone();
        tokio::spawn(async move { follow_all(&service, &run).await })
    };
    let there = {
        let service = other_process(&home).await;
        let run = run.clone();
        tokio::spawn(async move { follow_all(&service, &run).await })
    };
    // Approvals come from yet another follower, through the service.
    let decider = {
        let service = home.service.clone();
        let run = run.clone();
        tokio::spawn(async move {
            let mut follow = service.follow(&run, 0);
            while let Some(item) = follow.next().await.unwrap() {
                if let Followed::Event(e) = item
                    && let EventKind::ApprovalRequested(r) = &e.kind
                {
                    service
                        .decide(&run, &r.call_id, true, None, &actor())
                        .await
                        .unwrap();
                }
            }
        })
    };
    let outcome = within(
        "the run",
        home.worker
            .drive(created.lease, &tokio_util::sync::CancellationToken::new()),
    )
    .await
    .unwrap();
    assert_eq!(outcome, completed("done"));
    within("the decider", decider).await.unwrap();

    let events = home.events(&run).await;
    assert_eq!(
        types(&events),
        [
            "run_created",
            "model_responded",
            "approval_requested",
            "approval_decided",
            "sandbox_provisioned",
            "tool_started",
            "tool_completed",
            "model_responded",
            "approval_requested",
            "approval_decided",
            "tool_started",
            "tool_completed",
            "model_responded",
            "run_completed",
        ]
    );
    let here = within("the follower here", here).await.unwrap();
    assert_eq!(events_of(&here), events, "followed in this process");
    let there = within("the follower there", there).await.unwrap();
    assert_eq!(events_of(&there), events, "followed from another process");
    for items in [&here, &there] {
        assert_texts(items, false);
    }
}

/// Between two events, the text that came is the next answer's text, whole, right before
/// it: no piece lost, none repeated after it, none for other events. `every`: each answer
/// with text must have had its text (else an answer may come without, e.g. one given from
/// the log as it was when following began). Returns each answer's streamed text.
fn assert_texts(items: &[Followed], every: bool) -> Vec<String> {
    let mut streamed = String::new();
    let mut answers = Vec::new();
    for item in items {
        match item {
            Followed::Text(text) => streamed.push_str(text),
            Followed::Event(e) => {
                if let EventKind::ModelResponded(answer) = &e.kind
                    && !answer.message.text.is_empty()
                    && (every || !streamed.is_empty())
                {
                    assert_eq!(streamed, answer.message.text, "{items:#?}");
                    answers.push(std::mem::take(&mut streamed));
                }
                assert_eq!(streamed, "", "text before {}: {items:#?}", e.kind.name());
            }
        }
    }
    assert_eq!(streamed, "", "text after the end: {items:#?}");
    answers
}

/// A model whose answers with text wait, once their text has streamed, until the test
/// lets them go (one permit per answer).
struct Gated {
    inner: ProviderSettings,
    gate: Arc<Semaphore>,
}

impl ModelFactory for Gated {
    fn model(&self, agent: &AgentSpec) -> Result<Arc<dyn ModelProvider>, toren_model::Error> {
        Ok(Arc::new(GatedModel {
            inner: self.inner.model(agent)?,
            gate: Arc::clone(&self.gate),
        }))
    }
}

struct GatedModel {
    inner: Arc<dyn ModelProvider>,
    gate: Arc<Semaphore>,
}

#[async_trait]
impl ModelProvider for GatedModel {
    async fn respond(
        &self,
        request: &ModelRequest,
        on_text: TextSink<'_>,
    ) -> Result<ModelResponse, toren_model::Error> {
        let response = self.inner.respond(request, on_text).await?;
        if !response.message.text.is_empty() {
            self.gate.acquire().await.unwrap().forget();
        }
        Ok(response)
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn streamed_text_reaches_the_follower_whole_and_before_its_answer() {
    let gate = Arc::new(Semaphore::new(0));
    let home = Home::with(Options {
        models: Some(Arc::new(Gated {
            inner: ProviderSettings::default(),
            gate: Arc::clone(&gate),
        })),
        ..Options::default()
    })
    .await;
    let first = "Let me look around first.";
    let last = "All done here, goodbye.";
    let agent = home.agent(
        "talker",
        Some(sandbox(ApprovalPolicy::Never)),
        &[calls(vec![bash("echo hi")]).saying(first), say(last)],
    );
    let created = home.create(agent, "talk").await;
    let run = created.run_id.clone();
    // The follower lets each answer go once some of its text has reached it: the text is
    // streamed while the model call is still running, never learnt from the log.
    let follower = {
        let service = home.service.clone();
        let run = run.clone();
        let gate = Arc::clone(&gate);
        tokio::spawn(async move {
            let mut follow = service.follow(&run, 0);
            let mut items = Vec::new();
            let mut released = false;
            while let Some(item) = follow.next().await.unwrap() {
                match &item {
                    Followed::Text(_) if !released => {
                        gate.add_permits(1);
                        released = true;
                    }
                    Followed::Event(e) if matches!(e.kind, EventKind::ModelResponded(_)) => {
                        released = false;
                    }
                    _ => {}
                }
                items.push(item);
            }
            items
        })
    };
    let outcome = within(
        "the run (its answers wait for the follower to get their text)",
        home.worker
            .drive(created.lease, &tokio_util::sync::CancellationToken::new()),
    )
    .await
    .unwrap();
    assert_eq!(outcome, completed(last));

    let items = within("the follower", follower).await.unwrap();
    assert_eq!(events_of(&items), home.events(&run).await);
    let pieces = assert_texts(&items, true);
    assert_eq!(pieces, [first, last]);
    let deltas = items
        .iter()
        .filter(|i| matches!(i, Followed::Text(_)))
        .count();
    eprintln!("{deltas} text deltas for 2 answers of 5 and 4 words");
}

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
            },
            lease_ttl: Duration::from_secs(30),
            follow_poll: Duration::from_millis(20),
            streams: None,
        },
    );
    let agent = AgentSpec {
        name: "plain".into(),
        model: "scripted/none.yaml".into(),
        instructions: None,
        sandbox: None,
        max_turns: 10,
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
