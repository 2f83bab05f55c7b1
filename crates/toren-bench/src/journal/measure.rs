//! The journal's workloads against any [`EventLog`]: appends of one run alone, appends of
//! many runs at once, and a tool call with and without its `tool_started` /
//! `tool_completed` journaled, as the worker makes them (one durable append before the
//! call, one after). Pure measuring: raw durations out, no reporting (`mod.rs`), so the
//! same code can be pointed at an older store.

use std::sync::Arc;
use std::time::{Duration, Instant};

use toren_protocol::{AgentSpec, EventKind, RunCreated, RunId, ToolCompleted, ToolStarted};
use toren_store::{EventLog, Lease};

/// How long a benchmark run's lease lasts: longer than any workload.
const TTL: Duration = Duration::from_secs(3600);
const HOLDER: &str = "toren-bench-journal:1";

/// What one workload measured.
#[derive(Debug, Default)]
pub(crate) struct Appends {
    /// Each append's time until it returned (durable).
    pub(crate) latencies: Vec<Duration>,
    /// From the first append to the last one's return.
    pub(crate) elapsed: Duration,
    /// Events written (one per append here).
    pub(crate) events: usize,
}

fn created(n: usize) -> RunCreated {
    RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "journal-bench".into(),
            model: "scripted/journal".into(),
            instructions: None,
            sandbox: None,
            max_turns: AgentSpec::DEFAULT_MAX_TURNS,
            context_tokens: None,
            source: None,
        },
        policy: None,
        input: format!("run {n}"),
        session: None,
        channel: None,
        start: None,
    }
}

fn started(call: &str) -> EventKind {
    EventKind::ToolStarted(ToolStarted {
        call_id: call.to_owned(),
        tool: "bash".to_owned(),
        attempt: 1,
        checkpoint: None,
    })
}

fn completed(call: &str, output: String) -> EventKind {
    EventKind::ToolCompleted(ToolCompleted {
        call_id: call.to_owned(),
        output,
        is_error: false,
        exit_code: Some(0),
        truncated: false,
    })
}

/// Creates `runs` runs, each leased to this process.
pub(crate) async fn create_runs(store: &dyn EventLog, runs: usize) -> anyhow::Result<Vec<Lease>> {
    let mut leases = Vec::with_capacity(runs);
    for n in 0..runs {
        let (_, lease) = store
            .create_run(&RunId::new(), created(n), HOLDER, TTL)
            .await?;
        leases.push(lease);
    }
    Ok(leases)
}

/// Each of `leases`' runs appends `steps` events one append at a time, all runs at once
/// (one task each); the appends alternate `tool_started` and `tool_completed`.
pub(crate) async fn append_concurrently(
    store: Arc<dyn EventLog>,
    leases: Vec<Lease>,
    steps: usize,
) -> anyhow::Result<Appends> {
    let start = Instant::now();
    let mut tasks = tokio::task::JoinSet::new();
    for lease in leases {
        let store = Arc::clone(&store);
        tasks.spawn(async move { append_steps(&*store, &lease, steps).await });
    }
    let mut all = Appends::default();
    while let Some(joined) = tasks.join_next().await {
        let latencies = joined??;
        all.events += latencies.len();
        all.latencies.extend(latencies);
    }
    all.elapsed = start.elapsed();
    Ok(all)
}

/// `steps` appends of one event each to `lease`'s run (seq 1 is its `run_created`).
async fn append_steps(
    store: &dyn EventLog,
    lease: &Lease,
    steps: usize,
) -> anyhow::Result<Vec<Duration>> {
    let mut latencies = Vec::with_capacity(steps);
    let mut seq = 1;
    for step in 0..steps {
        let call = format!("call_{}", step / 2);
        let kind = if step % 2 == 0 {
            started(&call)
        } else {
            completed(&call, "ok".into())
        };
        let t = Instant::now();
        let events = store.append(lease, seq, vec![kind]).await?;
        latencies.push(t.elapsed());
        seq = events.last().map_or(seq, |e| e.seq);
    }
    Ok(latencies)
}

/// The tool call that is journaled: an in-process call with a result to record (the
/// journal's cost is measured, not a sandbox's).
async fn tool_call(call: &str) -> String {
    tokio::task::yield_now().await;
    format!("{call}: ok\n")
}

/// A tool call per sample, journaled and bare, interleaved so both see the same load: the
/// journaled one is `tool_started` appended (durable before the call, as the worker does),
/// the call, `tool_completed` appended with its output; the bare one is the call alone.
/// Each of `leases`' runs does `calls` of each at once.
pub(crate) async fn tool_calls(
    store: Arc<dyn EventLog>,
    leases: Vec<Lease>,
    calls: usize,
) -> anyhow::Result<(Vec<Duration>, Vec<Duration>)> {
    let mut tasks = tokio::task::JoinSet::new();
    for lease in leases {
        let store = Arc::clone(&store);
        tasks.spawn(async move {
            let mut journaled = Vec::with_capacity(calls);
            let mut bare = Vec::with_capacity(calls);
            let mut seq = store.run(&lease.run_id).await?.last_seq;
            for n in 0..calls {
                let call = format!("call_{n}");
                let t = Instant::now();
                store.append(&lease, seq, vec![started(&call)]).await?;
                let output = tool_call(&call).await;
                let done = store
                    .append(&lease, seq + 1, vec![completed(&call, output)])
                    .await?;
                journaled.push(t.elapsed());
                seq = done.last().map_or(seq + 2, |e| e.seq);
                let t = Instant::now();
                let output = tool_call(&call).await;
                bare.push(t.elapsed());
                std::hint::black_box(output);
            }
            Ok::<_, anyhow::Error>((journaled, bare))
        });
    }
    let (mut journaled, mut bare) = (Vec::new(), Vec::new());
    while let Some(joined) = tasks.join_next().await {
        let (j, b) = joined??;
        journaled.extend(j);
        bare.extend(b);
    }
    Ok((journaled, bare))
}
