//! Replay speed: how long resuming a run whose log holds 10,000 events takes to reach its
//! next new action. Prints figures; it is a benchmark program, not a test.
//!
//! ```sh
//! cargo run --release -p toren-worker --example replay_bench [-- EVENTS]
//! ```
//!
//! It builds a real SQLite event log of a scripted run (model answer, tool_started,
//! tool_completed, over and over), then measures, on a fresh store handle as a resumed
//! process would have: reading the log, folding it into the run state, and the whole
//! resume path through the worker (lease, read, fold, decide) up to the moment the next
//! new event is committed.
#![expect(clippy::print_stdout, reason = "a benchmark prints its figures")]

use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use async_trait::async_trait;
use serde_json::json;
use tokio_util::sync::CancellationToken;
use toren_agent::RunState;
use toren_model::{ModelProvider, ModelRequest, ModelResponse, TextSink};
use toren_protocol::{
    AgentSpec, AssistantMessage, Event, EventKind, ModelResponded, RunCreated, RunId, ToolCall,
    ToolCompleted, ToolStarted, Usage,
};
use toren_store::{EventLog, SqliteStore};
use toren_tools::{ToolSettings, Toolkit};
use toren_worker::{Observer, Worker, WorkerConfig};

/// Answers every request with a final text at once, so the first new event is the
/// model's answer and the measured time is all replay.
struct Instant0;

#[async_trait]
impl ModelProvider for Instant0 {
    async fn respond(
        &self,
        _request: &ModelRequest,
        _on_text: TextSink<'_>,
    ) -> Result<ModelResponse, toren_model::Error> {
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

/// Records when the first new event was committed.
struct FirstEvent(Mutex<Option<Instant>>);

impl Observer for FirstEvent {
    fn event(&self, _event: &Event) {
        if let Ok(mut first) = self.0.lock() {
            first.get_or_insert_with(Instant::now);
        }
    }
}

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

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let events: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(10_000);
    let dir = tempfile::tempdir()?;
    let url = format!("sqlite://{}", dir.path().join("toren.db").display());
    let ttl = Duration::from_secs(30);

    // Build the log: run_created, then turns of three events until `events` are written.
    let build = Instant::now();
    let store = SqliteStore::open(&url).await?;
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
    let (_, lease) = store.create_run(&run, created, "builder", ttl).await?;
    let mut seq = 1;
    let mut i = 0;
    while (seq as usize) + 3 <= events {
        let mut batch = Vec::new();
        while batch.len() < 300 && (seq as usize) + batch.len() + 3 <= events {
            i += 1;
            batch.extend(turn(i));
        }
        let n = batch.len() as u64;
        store.append(&lease, seq, batch).await?;
        seq += n;
    }
    store.release_lease(&lease).await?;
    store.close().await;
    println!(
        "built a log of {seq} events ({i} turns) in {:.2?}",
        build.elapsed()
    );

    // As a resumed process: a fresh handle, then read and fold.
    let store: Arc<dyn EventLog> = Arc::new(SqliteStore::open(&url).await?);
    let t = Instant::now();
    let log = store.read(&run, 0).await?;
    let read = t.elapsed();
    let t = Instant::now();
    let state = RunState::from_events(&log)?;
    let action = state.next_action();
    let fold = t.elapsed();
    println!(
        "read {} events: {read:.2?}; fold + decide: {fold:.2?} (next: {action:?})",
        log.len()
    );

    // The whole resume path through the worker, up to the first new committed event.
    let observer = Arc::new(FirstEvent(Mutex::new(None)));
    let driver = Worker::new(WorkerConfig {
        store: Arc::clone(&store),
        models: Arc::new(Arc::new(Instant0) as Arc<dyn toren_model::ModelProvider>),
        backends: Vec::new(),
        toolkit: Toolkit::new(ToolSettings::default()),
        env: Arc::new(|_: &str| None),
        observer: observer.clone(),
        approver: None,
        max_tokens: 1024,
        approval_poll: Duration::from_millis(200),
        holder: "bench".into(),
        lease_ttl: ttl,
    });
    let t = Instant::now();
    let lease = driver.acquire(&run).await?;
    let outcome = driver.drive(lease, &CancellationToken::new()).await?;
    let first = observer
        .0
        .lock()
        .ok()
        .and_then(|f| *f)
        .map(|f| f.duration_since(t));
    println!(
        "resume to the next new event (lease, read, fold, model answer committed): {}",
        first.map_or_else(|| "never".to_owned(), |d| format!("{d:.2?}"))
    );
    println!("run ended: {outcome:?}");
    Ok(())
}
