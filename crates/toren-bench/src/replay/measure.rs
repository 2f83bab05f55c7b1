//! The replay benchmark's measuring: [`measure`] builds a real SQLite event log of a
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

/// A phase's time: on the wall clock, and the CPU time the whole process spent meanwhile
/// (every thread: sqlx runs SQLite on threads of its own). On a shared machine the wall
/// time grows with the load; the CPU time much less.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct Timing {
    pub(crate) wall: Duration,
    pub(crate) cpu: Duration,
}

/// In the JSON: `{"wall_ms": …, "cpu_ms": …}`.
impl serde::Serialize for Timing {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeStruct as _;
        let mut s = serializer.serialize_struct("Timing", 2)?;
        s.serialize_field("wall_ms", &crate::stats::millis(self.wall))?;
        s.serialize_field("cpu_ms", &crate::stats::millis(self.cpu))?;
        s.end()
    }
}

impl Timing {
    /// Times `phase`.
    async fn of<T>(phase: impl std::future::Future<Output = T>) -> (T, Self) {
        let start = Clocks::now();
        let out = phase.await;
        (out, start.elapsed())
    }
}

/// A moment by both clocks.
#[derive(Clone, Copy)]
struct Clocks {
    wall: Instant,
    cpu: Duration,
}

impl Clocks {
    fn now() -> Self {
        Self {
            wall: Instant::now(),
            cpu: crate::stats::cpu_time(),
        }
    }

    fn elapsed(self) -> Timing {
        self.until(Self::now())
    }

    fn until(self, later: Self) -> Timing {
        Timing {
            wall: later.wall.saturating_duration_since(self.wall),
            cpu: later.cpu.saturating_sub(self.cpu),
        }
    }
}

/// What resuming a log of `events` events costs, each figure the median of `repeats`
/// measurements on fresh store handles (the operating system's page cache is warm, as on a
/// machine that runs the store).
#[derive(Clone, Debug, serde::Serialize)]
pub(crate) struct Figures {
    pub(crate) events: u64,
    /// Model answers in the log (each followed by its tool call's two events).
    pub(crate) turns: usize,
    /// The bytes of JSON payload the log holds.
    pub(crate) payload_bytes: u64,
    pub(crate) repeats: usize,
    /// For reference, fetching the log a row per event through sqlx (`SELECT seq, payload
    /// … ORDER BY seq`, every payload a `String`, nothing decoded), as the store did before
    /// it read in chunks.
    pub(crate) per_row: Timing,
    /// `serde_json` of every payload into an [`Event`], nothing else.
    pub(crate) decode: Timing,
    /// [`EventLog::read`] of the whole log: the store's queries, decoding and checks.
    pub(crate) read: Timing,
    /// [`RunState::from_events`] over the read events, as the worker folds.
    pub(crate) fold: Timing,
    /// [`RunState::next_action`] on the folded state (the model call and its input).
    pub(crate) decide: Timing,
    /// Through the worker: from taking the lease to the model being called (lease, read,
    /// fold, decide): the time to the next new action.
    pub(crate) to_action: Timing,
    /// ... and on to the model's answer committed (one more durable append).
    pub(crate) to_commit: Timing,
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
    let median = |pick: fn(&Sample) -> Timing| {
        let mut wall: Vec<Duration> = samples.iter().map(|s| pick(s).wall).collect();
        let mut cpu: Vec<Duration> = samples.iter().map(|s| pick(s).cpu).collect();
        wall.sort();
        cpu.sort();
        Timing {
            wall: wall[wall.len() / 2],
            cpu: cpu[cpu.len() / 2],
        }
    };
    Ok(Figures {
        events: samples[0].events,
        turns,
        payload_bytes: samples[0].payload_bytes,
        repeats,
        per_row: median(|s| s.per_row),
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
    per_row: Timing,
    decode: Timing,
    read: Timing,
    fold: Timing,
    decide: Timing,
    to_action: Timing,
    to_commit: Timing,
}

fn url(path: &Path) -> String {
    format!("sqlite://{}", path.display())
}

async fn measure_once(path: &Path, run: &RunId) -> anyhow::Result<Sample> {
    // A row per event, for reference, and decoding on its own.
    let (payloads, per_row) = Timing::of(per_row(path, run)).await;
    let payloads = payloads?;
    let (decoded, decode) = Timing::of(async {
        payloads
            .iter()
            .map(|p| serde_json::from_str::<Event>(p))
            .collect::<Result<Vec<_>, _>>()
    })
    .await;
    drop(decoded?);

    // The store's read, then the fold and the decision over what it returned.
    let store = SqliteStore::open(&url(path)).await?;
    let (log, read) = Timing::of(store.read(run, 0)).await;
    let log = log?;
    store.close().await;
    let events = log.len() as u64;
    let (state, fold) = Timing::of(async { RunState::from_events(&log) }).await;
    let state = state?;
    let (action, decide) = Timing::of(async { state.next_action() }).await;
    anyhow::ensure!(
        matches!(action, Action::CallModel { .. }),
        "the built log should resume with a model call, not {}",
        action_name(&action)
    );

    // The whole resume path through the worker, on a fresh store handle.
    let (to_action, to_commit) = resume(path, run).await?;
    Ok(Sample {
        events,
        payload_bytes: payloads.iter().map(|p| p.len() as u64).sum(),
        per_row,
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

/// The log a row per event through sqlx, on a fresh connection: every payload as text.
async fn per_row(path: &Path, run: &RunId) -> anyhow::Result<Vec<String>> {
    use sqlx::Connection;
    let options = sqlx::sqlite::SqliteConnectOptions::new().filename(path);
    let mut conn = sqlx::SqliteConnection::connect_with(&options).await?;
    let rows: Vec<(i64, String)> =
        sqlx::query_as("SELECT seq, payload FROM events WHERE run_id = ? ORDER BY seq")
            .bind(run.as_str())
            .fetch_all(&mut conn)
            .await?;
    conn.close().await?;
    Ok(rows.into_iter().map(|(_, p)| p).collect())
}

/// Resumes the run through a [`Worker`]: the time from taking its lease to the model
/// being called, and to the model's answer being committed.
async fn resume(path: &Path, run: &RunId) -> anyhow::Result<(Timing, Timing)> {
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
    let start = Clocks::now();
    let lease = worker.acquire(run).await?;
    let outcome = worker.drive(lease, &CancellationToken::new()).await?;
    anyhow::ensure!(
        matches!(outcome, toren_worker::Outcome::Ended { .. }),
        "the resumed run should end, not {outcome:?}"
    );
    let since =
        |mark: &Mutex<Option<Clocks>>| mark.lock().ok().and_then(|m| *m).map(|m| start.until(m));
    let called =
        since(&marks.called).ok_or_else(|| anyhow::anyhow!("the model was never called"))?;
    let committed =
        since(&marks.committed).ok_or_else(|| anyhow::anyhow!("no new event was committed"))?;
    Ok((called, committed))
}

/// When the model was first called and when the first new event was committed.
#[derive(Default)]
struct Marks {
    called: Mutex<Option<Clocks>>,
    committed: Mutex<Option<Clocks>>,
}

fn mark(slot: &Mutex<Option<Clocks>>) {
    if let Ok(mut slot) = slot.lock() {
        slot.get_or_insert_with(Clocks::now);
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
            budget: None,
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
        start: None,
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
            checkpoint: None,
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
