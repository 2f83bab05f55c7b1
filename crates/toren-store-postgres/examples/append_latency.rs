//! The cost of one durable append, on Postgres and on SQLite: a throwaway Postgres cluster
//! (unix socket, fsync on, as `initdb` makes it) and a SQLite file in a temp directory,
//! each taking N appends of one `tool_started` event to one run, one after another, each
//! awaited (its commit durable) before the next. Prints p50/p90/p99 per append and the
//! appends per second of that one writer.
//!
//! `cargo run --release -p toren-store-postgres --example append_latency [N]`

#![expect(clippy::print_stdout, reason = "a benchmark prints its figures")]

use std::sync::Arc;
use std::time::{Duration, Instant};

use toren_protocol::{AgentSpec, EventKind, RunCreated, RunId, ToolStarted};
use toren_store::{EventLog, SqliteStore};
use toren_store_postgres::{PostgresOptions, PostgresStore};
use toren_test_support::postgres::Cluster;

fn created() -> RunCreated {
    RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "bench".into(),
            model: "scripted/s.yaml".into(),
            instructions: None,
            sandbox: None,
            max_turns: 5,
            context_tokens: None,
            source: None,
        },
        policy: None,
        input: "measure".into(),
        session: None,
        channel: None,
        start: None,
    }
}

async fn measure(store: &dyn EventLog, n: usize) -> anyhow::Result<Vec<Duration>> {
    let run = RunId::new();
    let (_, lease) = store
        .create_run(&run, created(), "bench", Duration::from_secs(600))
        .await?;
    let mut took = Vec::with_capacity(n);
    for i in 0..n {
        let kind = EventKind::ToolStarted(ToolStarted {
            call_id: format!("call_{i}"),
            tool: "bash".into(),
            attempt: 1,
            checkpoint: None,
        });
        let started = Instant::now();
        store.append(&lease, 1 + i as u64, vec![kind]).await?;
        took.push(started.elapsed());
    }
    Ok(took)
}

fn row(name: &str, mut took: Vec<Duration>) -> String {
    took.sort();
    let at = |q: f64| took[((took.len() as f64 * q) as usize).min(took.len() - 1)];
    let total: Duration = took.iter().sum();
    format!(
        "{name:<10} {:>9.3} {:>9.3} {:>9.3} {:>10.0}",
        at(0.5).as_secs_f64() * 1e3,
        at(0.9).as_secs_f64() * 1e3,
        at(0.99).as_secs_f64() * 1e3,
        took.len() as f64 / total.as_secs_f64()
    )
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let n: usize = std::env::args()
        .nth(1)
        .map(|a| a.parse())
        .transpose()?
        .unwrap_or(1000);
    let cluster = tokio::task::spawn_blocking(Cluster::start).await??;
    let postgres =
        Arc::new(PostgresStore::open(&cluster.url(), &PostgresOptions::default()).await?);
    let dir = tempfile::tempdir()?;
    let sqlite =
        SqliteStore::open(&format!("sqlite://{}", dir.path().join("t.db").display())).await?;
    // Warm both up (connections, caches), then measure.
    measure(&*postgres, 50).await?;
    measure(&sqlite, 50).await?;
    let pg = measure(&*postgres, n).await?;
    let lite = measure(&sqlite, n).await?;
    println!("{n} appends of one event each, one writer, each awaited");
    println!(
        "{:<10} {:>9} {:>9} {:>9} {:>10}",
        "store", "p50 ms", "p90 ms", "p99 ms", "appends/s"
    );
    println!("{}", row("postgres", pg));
    println!("{}", row("sqlite", lite));
    Ok(())
}
