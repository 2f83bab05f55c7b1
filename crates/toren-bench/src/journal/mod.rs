//! `toren-bench journal`: what journaling costs. Durable events per
//! second for one run appending alone and for many runs at once, the fsyncs each durable
//! step costs (counted by `strace -c` around a child process running the same appends),
//! and the latency journaling adds to a tool call (`tool_started` before it and
//! `tool_completed` after, both durable) against the same in-process call with the store
//! bypassed. The store is the real one: a `SqliteStore` on a file in a temporary
//! directory, `synchronous = FULL`. Workloads are in `measure.rs`, the fsync count in
//! `fsyncs.rs`.

mod fsyncs;
mod measure;

use std::path::PathBuf;
use std::sync::Arc;

use anyhow::Context as _;
use clap::Args;
use serde::Serialize;
use toren_store::{EventLog, SqliteStore};

use crate::api_load::Verdict;
use crate::report::{Machine, Table, write_json};
use crate::stats::Spread;

#[derive(Debug, Args)]
pub(crate) struct JournalArgs {
    /// Appends of the one run alone [default: 2000; 100 with --quick].
    #[arg(long)]
    steps: Option<usize>,
    /// How many runs append at once [default: 100; 10 with --quick].
    #[arg(long)]
    runs: Option<usize>,
    /// Appends of each of the concurrent runs [default: 40; 4 with --quick].
    #[arg(long)]
    steps_each: Option<usize>,
    /// Where to write the figures as JSON [default: target/toren-bench/journal.json, or
    /// journal-quick.json with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
    /// Internal: run one workload's appends in this process (under strace) and exit.
    #[arg(long, hide = true, value_parser = ["alone", "concurrent"])]
    child: Option<String>,
}

/// The workload sizes, `--quick` resolved.
#[derive(Clone, Copy, Debug, Serialize)]
pub(crate) struct Sizes {
    pub(crate) steps: usize,
    pub(crate) runs: usize,
    pub(crate) steps_each: usize,
}

#[derive(Debug, Serialize)]
struct Figures {
    benchmark: &'static str,
    quick: bool,
    machine: Machine,
    sizes: Sizes,
    alone: Throughput,
    concurrent: Throughput,
    /// Tool calls of the concurrent runs, journaled and bare.
    tool_call: ToolCall,
    /// Tool calls of one run alone.
    tool_call_alone: ToolCall,
}

#[derive(Debug, Serialize)]
struct Throughput {
    runs: usize,
    events: usize,
    events_per_s: f64,
    append: Option<Spread>,
    /// Transactions the store's writer committed per append (group commit: below 1).
    commits_per_append: f64,
    /// fsync + fdatasync calls per append, from `strace -c`; `None` without strace.
    fsyncs_per_append: Option<f64>,
}

#[derive(Debug, Serialize)]
struct ToolCall {
    calls: usize,
    journaled: Option<Spread>,
    bare: Option<Spread>,
    /// journaled p50 − bare p50, ms.
    added_p50_ms: Option<f64>,
    added_p99_ms: Option<f64>,
}

pub(crate) async fn run(args: JournalArgs, quick: bool) -> anyhow::Result<Verdict> {
    let sizes = Sizes {
        steps: args.steps.unwrap_or(if quick { 100 } else { 2000 }).max(1),
        runs: args.runs.unwrap_or(if quick { 10 } else { 100 }).max(1),
        steps_each: args.steps_each.unwrap_or(if quick { 4 } else { 40 }).max(1),
    };
    if let Some(child) = args.child {
        return child_workload(&child, sizes)
            .await
            .map(|()| Verdict::Correct);
    }
    let dir = tempfile::tempdir().context("cannot make a temporary directory")?;
    let store = open(&dir.path().join("alone.db")).await?;
    let alone = throughput(&store, 1, sizes.steps).await?;
    let store = open(&dir.path().join("concurrent.db")).await?;
    let concurrent = throughput(&store, sizes.runs, sizes.steps_each).await?;
    let calls = (sizes.steps_each / 2).max(1);
    let store = open(&dir.path().join("calls.db")).await?;
    let tool_call = tool_calls(&store, sizes.runs, calls).await?;
    let tool_call_alone = tool_calls(&store, 1, (sizes.steps / 2).max(1)).await?;
    let (alone_fsyncs, concurrent_fsyncs) = match fsyncs::strace() {
        Some(strace) => (
            Some(fsyncs::per_append(&strace, "alone", sizes, quick, sizes.steps).await?),
            Some(
                fsyncs::per_append(
                    &strace,
                    "concurrent",
                    sizes,
                    quick,
                    sizes.runs * sizes.steps_each,
                )
                .await?,
            ),
        ),
        None => {
            tracing_note("strace is not installed: fsyncs per append are not counted");
            (None, None)
        }
    };
    let figures = Figures {
        benchmark: "journal",
        quick,
        machine: Machine::this(),
        sizes,
        alone: Throughput {
            fsyncs_per_append: alone_fsyncs,
            ..alone
        },
        concurrent: Throughput {
            fsyncs_per_append: concurrent_fsyncs,
            ..concurrent
        },
        tool_call,
        tool_call_alone,
    };
    print_table(&figures);
    let json = args.json.unwrap_or_else(|| {
        PathBuf::from(if quick {
            "target/toren-bench/journal-quick.json"
        } else {
            "target/toren-bench/journal.json"
        })
    });
    write_json(&json, &figures)?;
    Ok(Verdict::Correct)
}

async fn open(path: &std::path::Path) -> anyhow::Result<SqliteStore> {
    SqliteStore::open(&format!("sqlite://{}", path.display()))
        .await
        .with_context(|| format!("cannot open a store at {}", path.display()))
}

/// `runs` runs appending `steps` events each, at once; checks every log afterwards.
async fn throughput(store: &SqliteStore, runs: usize, steps: usize) -> anyhow::Result<Throughput> {
    let leases = measure::create_runs(store, runs).await?;
    let before = store.write_stats();
    let shared: Arc<dyn EventLog> = Arc::new(store.clone());
    let appends = measure::append_concurrently(shared, leases.clone(), steps).await?;
    let after = store.write_stats();
    for lease in &leases {
        let log = store.read(&lease.run_id, 0).await?;
        let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
        let expected: Vec<u64> = (1..=steps as u64 + 1).collect();
        anyhow::ensure!(
            seqs == expected,
            "run {} has seqs {seqs:?}, not 1..={}",
            lease.run_id,
            steps + 1
        );
    }
    let commits = after.commits - before.commits;
    Ok(Throughput {
        runs,
        events: appends.events,
        events_per_s: appends.events as f64 / appends.elapsed.as_secs_f64().max(1e-9),
        append: Spread::of(&appends.latencies),
        commits_per_append: commits as f64 / appends.events.max(1) as f64,
        fsyncs_per_append: None,
    })
}

async fn tool_calls(store: &SqliteStore, runs: usize, calls: usize) -> anyhow::Result<ToolCall> {
    let leases = measure::create_runs(store, runs).await?;
    let shared: Arc<dyn EventLog> = Arc::new(store.clone());
    let (journaled, bare) = measure::tool_calls(shared, leases, calls).await?;
    let journaled_spread = Spread::of(&journaled);
    let bare_spread = Spread::of(&bare);
    let added = |f: fn(&Spread) -> f64| {
        journaled_spread
            .as_ref()
            .zip(bare_spread.as_ref())
            .map(|(j, b)| f(j) - f(b))
    };
    Ok(ToolCall {
        calls: journaled.len(),
        added_p50_ms: added(|s| s.p50_ms),
        added_p99_ms: added(|s| s.p99_ms),
        journaled: journaled_spread,
        bare: bare_spread,
    })
}

/// The child's part: set up and run one workload's appends, nothing else, so that the
/// parent's strace counts only them (and, with 0 steps, only the setup).
async fn child_workload(which: &str, sizes: Sizes) -> anyhow::Result<()> {
    let dir = tempfile::tempdir().context("cannot make a temporary directory")?;
    let store = open(&dir.path().join("child.db")).await?;
    let (runs, steps) = match which {
        "alone" => (1, sizes.steps),
        _ => (sizes.runs, sizes.steps_each),
    };
    let leases = measure::create_runs(&store, runs).await?;
    let shared: Arc<dyn EventLog> = Arc::new(store.clone());
    if steps > 0 && sizes.steps > 0 {
        measure::append_concurrently(shared, leases, steps).await?;
    }
    store.close().await;
    Ok(())
}

fn ms(spread: Option<&Spread>) -> String {
    spread.map_or_else(
        || "–".into(),
        |s| format!("{:.2} / {:.2} / {:.2} ms", s.p50_ms, s.p99_ms, s.max_ms),
    )
}

fn print_table(f: &Figures) {
    let mut t = Table::default();
    for (name, tp) in [
        ("1 run alone", &f.alone),
        ("concurrent runs", &f.concurrent),
    ] {
        t.row(
            &format!("{name}: runs × events"),
            format!("{} × {}", tp.runs, tp.events / tp.runs.max(1)),
        );
        t.row(
            &format!("{name}: durable events/s"),
            format!("{:.0}", tp.events_per_s),
        );
        t.row(
            &format!("{name}: append p50 / p99 / max"),
            ms(tp.append.as_ref()),
        );
        t.row(
            &format!("{name}: commits per append"),
            format!("{:.3}", tp.commits_per_append),
        );
        t.row(
            &format!("{name}: fsyncs per append (strace)"),
            tp.fsyncs_per_append
                .map_or_else(|| "– (no strace)".into(), |n| format!("{n:.3}")),
        );
    }
    for (name, c) in [
        ("tool call, 1 run", &f.tool_call_alone),
        ("tool call, concurrent runs", &f.tool_call),
    ] {
        t.row(&format!("{name}: calls"), c.calls.to_string());
        t.row(
            &format!("{name}: journaled p50 / p99 / max"),
            ms(c.journaled.as_ref()),
        );
        t.row(
            &format!("{name}: store bypassed p50 / p99 / max"),
            ms(c.bare.as_ref()),
        );
        t.row(
            &format!("{name}: added by journaling p50 / p99"),
            match (c.added_p50_ms, c.added_p99_ms) {
                (Some(p50), Some(p99)) => format!("{p50:.2} / {p99:.2} ms"),
                _ => "–".into(),
            },
        );
    }
    t.print(if f.quick {
        "journal (--quick)"
    } else {
        "journal"
    });
}

#[expect(clippy::print_stderr, reason = "a person's note, on stderr")]
fn tracing_note(note: &str) {
    eprintln!("toren-bench journal: {note}");
}
