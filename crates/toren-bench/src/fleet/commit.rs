//! The per-event commit cost of a store, measured in this process: one run appending one
//! event per append (so per transaction, with nothing to group it with), each append timed
//! until it returned durable. SQLite on a file in a temporary directory (the store's own
//! settings: WAL, `synchronous = FULL`); Postgres on a fresh database of the throwaway
//! cluster over its unix socket (the server's defaults: `fsync` and `synchronous_commit`
//! on). The workers' appends are the same calls, so this is the floor under each event they
//! write.

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::Context as _;
use serde::Serialize;
use toren_protocol::{AgentSpec, EventKind, RunCreated, RunId, ToolCompleted, ToolStarted};
use toren_store::{EventLog, SqliteStore};
use toren_store_postgres::{PostgresOptions, PostgresStore};

use crate::stats::Spread;

const TTL: Duration = Duration::from_secs(3600);
const HOLDER: &str = "toren-bench-fleet:commit";

#[derive(Debug, Serialize)]
pub(crate) struct Commit {
    pub(crate) store: &'static str,
    pub(crate) appends: usize,
    /// Each append's latency.
    pub(crate) append: Option<Spread>,
    /// Appends per second, one after another.
    pub(crate) per_s: f64,
}

pub(crate) async fn sqlite(appends: usize) -> anyhow::Result<Commit> {
    let dir = tempfile::tempdir().context("cannot make a temporary directory")?;
    let path = dir.path().join("commit.db");
    let store = SqliteStore::open(&format!("sqlite://{}", path.display()))
        .await
        .with_context(|| format!("cannot open a store at {}", path.display()))?;
    measure("sqlite", Arc::new(store), appends).await
}

pub(crate) async fn postgres(url: &str, appends: usize) -> anyhow::Result<Commit> {
    let store = PostgresStore::open(url, &PostgresOptions::default())
        .await
        .context("cannot open the Postgres store")?;
    measure("postgres", Arc::new(store), appends).await
}

async fn measure(
    store_name: &'static str,
    store: Arc<dyn EventLog>,
    appends: usize,
) -> anyhow::Result<Commit> {
    let created = RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "fleet-commit".into(),
            model: "scripted/commit".into(),
            instructions: None,
            sandbox: None,
            max_turns: AgentSpec::DEFAULT_MAX_TURNS,
            context_tokens: None,
            source: None,
        },
        policy: None,
        input: "commit cost".into(),
        session: None,
        channel: None,
        start: None,
    };
    let (_, lease) = store
        .create_run(&RunId::new(), created, HOLDER, TTL)
        .await?;
    let mut latencies = Vec::with_capacity(appends);
    let mut seq = 1;
    let began = Instant::now();
    for step in 0..appends {
        let call = format!("call_{}", step / 2);
        let kind = if step % 2 == 0 {
            EventKind::ToolStarted(ToolStarted {
                call_id: call,
                tool: "bash".into(),
                attempt: 1,
                checkpoint: None,
            })
        } else {
            EventKind::ToolCompleted(ToolCompleted {
                call_id: call,
                output: "ok".into(),
                is_error: false,
                exit_code: Some(0),
                truncated: false,
            })
        };
        let t = Instant::now();
        let events = store.append(&lease, seq, vec![kind]).await?;
        latencies.push(t.elapsed());
        seq = events.last().map_or(seq, |e| e.seq);
    }
    let elapsed = began.elapsed();
    let log = store.read(&lease.run_id, 0).await?;
    anyhow::ensure!(
        log.len() == appends + 1,
        "{store_name}: the log holds {} events, not {}",
        log.len(),
        appends + 1
    );
    Ok(Commit {
        store: store_name,
        appends,
        append: Spread::of(&latencies),
        per_s: appends as f64 / elapsed.as_secs_f64().max(1e-9),
    })
}
