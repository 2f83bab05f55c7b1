//! A log that does not fold is recorded as a failed run, with the reason, right after its
//! last event — by the worker that was to drive it and by `fail_if_unreplayable` (what
//! `runs list|show` call) — and never twice. Real SQLite.

use std::sync::Arc;
use std::time::Duration;

use tokio_util::sync::CancellationToken;
use toren_model::scripted::{Script, ScriptedProvider};
use toren_protocol::{
    AgentSpec, EventKind, RunCreated, RunFailed, RunId, RunStatus, ToolCompleted,
};
use toren_store::{EventLog, SqliteStore};
use toren_tools::{ToolSettings, Toolkit};
use toren_worker::{Outcome, Worker, WorkerConfig, fail_if_unreplayable};

const TTL: Duration = Duration::from_secs(30);
const HOLDER: &str = "test-host/1";

struct NoObserver;
impl toren_worker::Observer for NoObserver {}

fn created() -> RunCreated {
    RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "t".into(),
            model: "scripted/s.yaml".into(),
            instructions: None,
            sandbox: None,
            max_turns: 5,
            context_tokens: None,
            source: None,
        },
        policy: None,
        input: "do it".into(),
        session: None,
        channel: None,
        start: None,
    }
}

/// A result for a call the model never made: the log does not fold at event #2.
fn stray_result() -> EventKind {
    EventKind::ToolCompleted(ToolCompleted {
        call_id: "call_9".into(),
        output: "from nowhere".into(),
        is_error: false,
        exit_code: None,
        truncated: false,
    })
}

/// A store holding a run whose log is `run_created` and then `kinds`, left unleased.
async fn store_with(dir: &tempfile::TempDir, kinds: Vec<EventKind>) -> (SqliteStore, RunId) {
    let url = format!("sqlite://{}", dir.path().join("toren.db").display());
    let store = SqliteStore::open(&url).await.unwrap();
    let run = RunId::new();
    let (_, lease) = store
        .create_run(&run, created(), "builder", TTL)
        .await
        .unwrap();
    store.append(&lease, 1, kinds).await.unwrap();
    store.release_lease(&lease).await.unwrap();
    (store, run)
}

fn reason() -> String {
    "the run's event log cannot be replayed: event 2 (tool_completed) of run {run} does not \
     fit the run's state: the current turn has no tool call call_9"
        .to_owned()
}

/// The kinds of the run's log after `run_created`, and the run's status.
async fn log_of(store: &SqliteStore, run: &RunId) -> (Vec<EventKind>, RunStatus) {
    let events = store.read(run, 1).await.unwrap();
    let status = store.run(run).await.unwrap().status;
    (events.into_iter().map(|e| e.kind).collect(), status)
}

#[tokio::test]
async fn the_worker_records_a_log_that_does_not_fold_as_failed_after_its_last_event() {
    let dir = tempfile::tempdir().unwrap();
    let (store, run) = store_with(&dir, vec![stray_result()]).await;
    let store: Arc<SqliteStore> = Arc::new(store);
    let path = dir.path().join("s.yaml");
    let model = ScriptedProvider::new(
        Script::parse("turns:\n  - text: hi\n", &path).unwrap(),
        path,
    );
    let worker = Worker::new(WorkerConfig {
        store: store.clone(),
        models: Arc::new(Arc::new(model) as Arc<dyn toren_model::ModelProvider>),
        backends: Vec::new(),
        toolkit: Toolkit::new(ToolSettings::default()),
        env: Arc::new(|_: &str| None),
        observer: Arc::new(NoObserver),
        approver: None,
        max_tokens: 1024,
        approval_poll: Duration::from_millis(50),
        holder: HOLDER.into(),
        lease_ttl: TTL,
    });
    let lease = worker.acquire(&run).await.unwrap();
    let outcome = worker
        .drive(lease, &CancellationToken::new())
        .await
        .unwrap();
    let why = reason().replace("{run}", run.as_str());
    assert_eq!(
        outcome,
        Outcome::Ended {
            status: RunStatus::Failed,
            output: why.clone(),
        }
    );
    assert_eq!(
        log_of(&store, &run).await,
        (
            vec![
                stray_result(),
                EventKind::RunFailed(RunFailed { error: why })
            ],
            RunStatus::Failed
        )
    );
}

#[tokio::test]
async fn fail_if_unreplayable_records_the_reason_once() {
    let dir = tempfile::tempdir().unwrap();
    let (store, run) = store_with(&dir, vec![stray_result()]).await;
    let why = reason().replace("{run}", run.as_str());
    for _ in 0..2 {
        assert_eq!(
            fail_if_unreplayable(&store, &run, HOLDER, TTL)
                .await
                .unwrap(),
            Some(why.clone())
        );
    }
    assert_eq!(
        log_of(&store, &run).await,
        (
            vec![
                stray_result(),
                EventKind::RunFailed(RunFailed { error: why })
            ],
            RunStatus::Failed
        )
    );
}

#[tokio::test]
async fn a_log_that_folds_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let (store, run) = store_with(&dir, vec![]).await;
    assert_eq!(
        fail_if_unreplayable(&store, &run, HOLDER, TTL)
            .await
            .unwrap(),
        None
    );
    assert_eq!(log_of(&store, &run).await, (vec![], RunStatus::Queued));
}
