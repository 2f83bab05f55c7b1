//! The replay benchmark's measuring code, apart from its printing so that a benchmark
//! program (`toren-bench`) can call it: [`measure`] builds a real SQLite event log of a
//! scripted run of a given length, then times, on fresh store handles as a resumed process
//! would have them, each part of resuming it — the query, decoding the rows, folding,
//! deciding — and the whole resume path through the worker up to its next new action.

use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use toren_agent::{Action, RunState};
use toren_model::{ModelProvider, ModelRequest, ModelResponse, TextSink};
use toren_protocol::{
    AgentSpec, AssistantMessage, Event, EventKind, ModelResponded, RunCreated, RunId, ToolCall,
    ToolCompleted, ToolStarted, Usage,
};
use toren_store::{EventLog, SqliteStore};
use toren_tools::{ToolSettings, Toolkit};
use toren_worker::{Observer, Worker, WorkerConfig};

/// The lease ttl of the builder and of the resuming worker.
const TTL: Duration = Duration::from_secs(30);

/// What resuming a log of `events` events costs, each figure the median of `repeats`
/// measurements on fresh store handles (the operating system's page cache is warm, as on a
/// machine that runs the store).
#[derive(Clone, Debug)]
pub(crate) struct Figures {
    pub(crate) events: u64,
    /// Model answers in the log (each followed by its tool call's two events).
    pub(crate) turns: usize,
    /// The bytes of JSON payload the log holds.
    pub(crate) payload_bytes: u64,
    pub(crate) repeats: usize,
    /// The store's query alone: every row's payload fetched as text, nothing decoded
    /// (the store's `SELECT`, through sqlx on a fresh connection).
    pub(crate) query: Duration,
    /// `serde_json` of every payload into an [`Event`], nothing else.
    pub(crate) decode: Duration,
    /// [`EventLog::read`] of the whole log: query, decoding and the store's checks.
    pub(crate) read: Duration,
    /// [`RunState::from_events`] over the read events.
    pub(crate) fold: Duration,
    /// [`RunState::next_action`] on the folded state (the model call and its input).
    pub(crate) decide: Duration,
    /// Through the worker: from taking the lease to the model being called (lease, read,
    /// fold, decide): the time to the next new action.
    pub(crate) to_action: Duration,
    /// ... and on to the model's answer committed (one more durable append).
    pub(crate) to_commit: Duration,
}

/// Builds a log of `events` events in a temporary directory and measures resuming it.
pub(crate) async fn measure(events: usize, repeats: usize) -> anyhow::Result<Figures> {
    let dir = tempfile::tempdir()?;
    let built = dir.path().join("built.db");
    let (run, turns) = build_log(&built, events).await?;
    let repeats = repeats.max(1);
    let mut samples = Vec::with_capacity(repeats);
    for i in 0..repeats {
        // Each resume ends the run, so each one gets its own copy of the built log.
        let copy = dir.path().join(format!("resume-{i}.db"));
        std::fs::copy(&built, &copy)?;
        samples.push(measure_once(&copy, &run).await?);
    }
    let median = |pick: fn(&Sample) -> Duration| {
        let mut values: Vec<Duration> = samples.iter().map(pick).collect();
        values.sort();
        values[values.len() / 2]
    };
    Ok(Figures {
        events: samples[0].events,
        turns,
        payload_bytes: samples[0].payload_bytes,
        repeats,
        query: median(|s| s.query),
        decode: median(|s| s.decode),
        read: median(|s| s.read),
        fold: median(|s| s.fold),
        decide: median(|s| s.decide),
        to_action: median(|s| s.to_action),
        to_commit: median(|s| s.to_commit),
    })
}

/// One measurement of every figure.
struct Sample {
    events: u64,
    payload_bytes: u64,
    query: Duration,
    decode: Duration,
    read: Duration,
    fold: Duration,
    decide: Duration,
    to_action: Duration,
    to_commit: Duration,
}

fn url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

async fn measure_once(path: &Path, run: &RunId) -> anyhow::Result<Sample> {
    // The query and the decoding on their own, on a connection of their own.
    let (query, payloads) = raw_query(path, run).await?;
    let t = Instant::now();
    let decoded = payloads
        .iter()
        .map(|p| serde_json::from_str::<Event>(p))
        .collect::<Result<Vec<_>, _>>()?;
    let decode = t.elapsed();
    drop(decoded);

    // The store's read, then the fold and the decision over what it returned.
    let store = SqliteStore::open(&url(path)).await?;
    let t = Instant::now();
    let log = store.read(run, 0).await?;
    let read = t.elapsed();
    store.close().await;
    let t = Instant::now();
    let state = RunState::from_events(&log)?;
    let fold = t.elapsed();
    let t = Instant::now();
    let action = state.next_action();
    let decide = t.elapsed();
    anyhow::ensure!(
        matches!(action, Action::CallModel { .. }),
        "the built log should resume with a model call, not {}",
        action_name(&action)
    );

    // The whole resume path through the worker, on a fresh store handle.
    let (to_action, to_commit) = resume(path, run).await?;
    Ok(Sample {
        events: log.len() as u64,
        payload_bytes: payloads.iter().map(|p| p.len() as u64).sum(),
        query,
        decode,
        read,
        fold,
        decide,
        to_action,
        to_commit,
    })
}

fn action_name(action: &Action) -> String {
    let debug = format!("{action:?}");
    debug
        .split(|c: char| !c.is_alphanumeric())
        .next()
        .unwrap_or_default()
        .to_owned()
}

/// The store's `SELECT` through sqlx on a fresh connection: every payload as text.
async fn raw_query(path: &Path, run: &RunId) -> anyhow::Result<(Duration, Vec<String>)> {
    use sqlx::Connection;
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
    let mut conn = sqlx::SqliteConnection::connect_with(&options).await?;
    let t = Instant::now();
    let rows: Vec<(String, i64, String)> = sqlx::query_as(
        "SELECT run_id, seq, payload FROM events WHERE run_id = ? AND seq > ? ORDER BY seq",
    )
    .bind(run.as_str())
    .bind(0_i64)
    .fetch_all(&mut conn)
    .await?;
    let query = t.elapsed();
    conn.close().await?;
    Ok((query, rows.into_iter().map(|(_, _, p)| p).collect()))
}

/// Resumes the run through a [`Worker`]: the time from taking its lease to the model
/// being called, and to the model's answer being committed.
async fn resume(path: &Path, run: &RunId) -> anyhow::Result<(Duration, Duration)> {
    let store: Arc<dyn EventLog> = Arc::new(SqliteStore::open(&url(path)).await?);
    let marks = Arc::new(Marks::default());
    let worker = Worker::new(WorkerConfig {
        store: Arc::clone(&store),
        models: Arc::new(Arc::new(Answer(Arc::clone(&marks))) as Arc<dyn ModelProvider>),
        backends: Vec::new(),
        toolkit: Toolkit::new(ToolSettings::default()),
        env: Arc::new(|_: &str| None),
        observer: marks.clone(),
        approver: None,
        max_tokens: 1024,
        approval_poll: Duration::from_millis(200),
        holder: "bench".into(),
        lease_ttl: TTL,
    });
    let t = Instant::now();
    let lease = worker.acquire(run).await?;
    let outcome = worker.drive(lease, &CancellationToken::new()).await?;
    anyhow::ensure!(
        matches!(outcome, toren_worker::Outcome::Ended { .. }),
        "the resumed run should end, not {outcome:?}"
    );
    let since = |mark: &Mutex<Option<Instant>>| {
        mark.lock()
            .ok()
            .and_then(|m| *m)
            .map(|m| m.duration_since(t))
    };
    let called =
        since(&marks.called).ok_or_else(|| anyhow::anyhow!("the model was never called"))?;
    let committed =
        since(&marks.committed).ok_or_else(|| anyhow::anyhow!("no new event was committed"))?;
    Ok((called, committed))
}

/// When the model was first called and when the first new event was committed.
#[derive(Default)]
struct Marks {
    called: Mutex<Option<Instant>>,
    committed: Mutex<Option<Instant>>,
}

fn mark(slot: &Mutex<Option<Instant>>) {
    if let Ok(mut slot) = slot.lock() {
        slot.get_or_insert_with(Instant::now);
    }
}

impl Observer for Marks {
    fn event(&self, _event: &Event) {
        mark(&self.committed);
    }
}

/// Answers every request with a final text at once, so that the first new event is the
/// model's answer and the measured time is all replay.
struct Answer(Arc<Marks>);

#[async_trait]
impl ModelProvider for Answer {
    async fn respond(
        &self,
        _request: &ModelRequest,
        _on_text: TextSink<'_>,
    ) -> Result<ModelResponse, toren_model::Error> {
        mark(&self.0.called);
        Ok(ModelResponse {
            message: AssistantMessage {
                text: "done".into(),
                tool_calls: vec![],
            },
            stop_reason: "end_turn".into(),
            usage: Usage::default(),
            model: "bench".into(),
        })
    }
}

/// Writes, through the store, a log of `run_created` then turns of three events (model
/// answer, `tool_started`, `tool_completed`) until `events` are written, in batches of 300
/// events; returns the run and its number of turns.
pub(crate) async fn build_log(path: &Path, events: usize) -> anyhow::Result<(RunId, usize)> {
    let store = SqliteStore::open(&url(path)).await?;
    let run = RunId::new();
    let created = RunCreated {
        agent: AgentSpec {
            name: "bench".into(),
            model: "scripted/none.yaml".into(),
            instructions: None,
            sandbox: None,
            max_turns: u32::MAX,
            context_tokens: None,
            source: None,
        },
        policy: None,
        input: "replay me".into(),
        session: None,
        channel: None,
    };
    let (_, lease) = store.create_run(&run, created, "builder", TTL).await?;
    let mut seq = 1;
    let mut turns = 0;
    while (seq as usize) + 3 <= events {
        let mut batch = Vec::new();
        while batch.len() < 300 && (seq as usize) + batch.len() + 3 <= events {
            turns += 1;
            batch.extend(turn(turns));
        }
        let n = batch.len() as u64;
        store.append(&lease, seq, batch).await?;
        seq += n;
    }
    store.release_lease(&lease).await?;
    store.close().await;
    Ok((run, turns))
}

/// The three events of turn `i`: the model reads a file, and gets about 400 bytes back.
fn turn(i: usize) -> Vec<EventKind> {
    let id = format!("call_{i}");
    vec![
        EventKind::ModelResponded(ModelResponded {
            message: AssistantMessage {
                text: format!("Step {i}: reading the next file."),
                tool_calls: vec![ToolCall {
                    id: id.clone(),
                    name: "read_file".into(),
                    arguments: json!({"path": format!("src/file_{i}.rs")}),
                    wire_id: None,
                }],
            },
            stop_reason: "tool_use".into(),
            usage: Usage::new(1200, 40),
            model: "bench".into(),
        }),
        EventKind::ToolStarted(ToolStarted {
            call_id: id.clone(),
            tool: "read_file".into(),
            attempt: 1,
        }),
        EventKind::ToolCompleted(ToolCompleted {
            call_id: id,
            output: "     1\tfn main() {\n     2\t    println!(\"hello\");\n     3\t}\n".repeat(8),
            is_error: false,
            exit_code: None,
            truncated: false,
        }),
    ]
}
