//! `service.follow`: every event of a run, in order, until it ends — woken by the worker in
//! the same process (the follow poll here is an hour, so nothing but the notifier can wake
//! it) or, from another process's service, by the poll; and a run's streamed text reaches
//! its follower whole, before the answer it belongs to (`follow_end.rs`: the end is never
//! missed).

use std::sync::Arc;
use std::time::Duration;

use async_trait::async_trait;
use tokio::sync::Semaphore;
use toren_model::{ModelProvider, ModelRequest, ModelResponse, ProviderSettings, TextSink};
use toren_protocol::{AgentSpec, ApprovalPolicy, Event, EventKind, RunId};
use toren_runtime::{Followed, PolicySettings, RunService, ServiceSettings};
use toren_store::SqliteStore;
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

pub(super) fn events_of(items: &[Followed]) -> Vec<Event> {
    items
        .iter()
        .filter_map(|i| match i {
            Followed::Event(e) => Some((**e).clone()),
            Followed::Text(_) => None,
        })
        .collect()
}

/// Another process's service over the same database: its own connections and notifier,
/// so only its poll can see the run move (and, with `streams`, the home's stream files
/// the text).
async fn other_process(home: &Home, streams: bool) -> RunService {
    let url = format!("sqlite://{}", home.dir.path().join("toren.db").display());
    RunService::new(
        Arc::new(SqliteStore::open(&url).await.unwrap()),
        ServiceSettings {
            policy: PolicySettings {
                backend: Some("local".into()),
                sandbox_root: home.root.clone(),
                volume: None,
                asks_hosts: true,
            },
            lease_ttl: Duration::from_secs(30),
            follow_poll: Duration::from_millis(20),
            streams: streams.then(|| home.dir.path().join("streams")),
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
        let service = other_process(&home, false).await;
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

/// Waits until the log has an answer after `seq`.
async fn until_answered(service: &RunService, run: &RunId, seq: u64) {
    within("the answer", async {
        while !service
            .events(run, seq)
            .await
            .unwrap()
            .iter()
            .any(|e| matches!(e.kind, EventKind::ModelResponded(_)))
        {
            tokio::time::sleep(Duration::from_millis(5)).await;
        }
    })
    .await;
}

#[tokio::test(flavor = "multi_thread")]
async fn streamed_text_reaches_the_follower_whole_and_before_its_answer() {
    streamed_text(false, false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn text_still_queued_when_its_answer_is_committed_is_not_given_twice() {
    streamed_text(true, false).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn text_streamed_in_another_process_reaches_the_follower_whole() {
    streamed_text(false, true).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn text_left_in_the_stream_file_when_its_answer_is_committed_is_not_given_twice() {
    streamed_text(true, true).await;
}

/// A run of two answers with text, followed. `late`: once the first piece of an answer's
/// text has reached the follower, it waits until the answer is committed before it asks
/// for more, so the rest of the text is still queued for it when it reads the answer.
/// `across`: the follower is another process's service, reading the stream files.
async fn streamed_text(late: bool, across: bool) {
    let gate = Arc::new(Semaphore::new(0));
    let home = Home::with(Options {
        models: Some(Arc::new(Gated {
            inner: ProviderSettings::default(),
            gate: Arc::clone(&gate),
        })),
        streams: across,
        ..Options::default()
    })
    .await;
    let first = "Let me look around first.";
    let last = "All done here, and that is all there is to say: goodbye.";
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
        let service = if across {
            other_process(&home, true).await
        } else {
            home.service.clone()
        };
        let run = run.clone();
        let gate = Arc::clone(&gate);
        tokio::spawn(async move {
            let mut follow = service.follow(&run, 0);
            let mut items = Vec::new();
            let mut released = false;
            let mut seen = 0;
            while let Some(item) = follow.next().await.unwrap() {
                match &item {
                    Followed::Text(_) if !released => {
                        gate.add_permits(1);
                        released = true;
                        if late {
                            until_answered(&service, &run, seen).await;
                        }
                    }
                    Followed::Event(e) => {
                        seen = e.seq;
                        if matches!(e.kind, EventKind::ModelResponded(_)) {
                            released = false;
                        }
                    }
                    Followed::Text(_) => {}
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
    eprintln!(
        "{deltas} text pieces for 2 answers of 5 and 13 words (late: {late}, across: {across})"
    );
}
