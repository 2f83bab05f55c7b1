//! `toren-bench fleet`: what a fleet of `toren worker` processes sustains. For
//! each store — Postgres (a throwaway cluster, `TOREN_QUEUE=postgres`: claims with `FOR
//! UPDATE SKIP LOCKED`, woken by `NOTIFY`) and SQLite (one file, the local queue) — and
//! each workload — a scripted agent that only answers (no tool) and one that makes one
//! bash call in the local sandbox — a backlog of runs is created through `toren serve
//! --workers 0`'s API, then 1, 2 and 4 worker processes are started and drain it: runs/s
//! and events/s over the span the logs say the workers were busy (first worker event to
//! last `run_completed`), every log checked. Then the claim latency: idle workers, runs
//! created one at a time, from `run_created` to the first event a worker appended (p50 /
//! p99). And the per-event commit cost of each store, in this process: one run appending
//! one event per transaction. The processes are in `procs.rs`, the front's client in
//! `client.rs`, the agents in `workload.rs`, the store-level measure in `commit.rs`.
//! `--quick` runs a small load that only proves it all still works.

mod client;
mod commit;
mod procs;
mod workload;

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::time::Duration;

use anyhow::Context as _;
use clap::Args;
use serde::Serialize;
use toren_test_support::postgres::Cluster;

use crate::api_load::Verdict;
use crate::report::{Machine, Table, write_json};
use crate::stats::Spread;
use crate::tool_call::say;

use client::{Api, create_runs, drain, logs};
use procs::{Front, Home};
use workload::Workload;

#[derive(Debug, Args)]
pub(crate) struct FleetArgs {
    /// Runs in each throughput case's backlog [default: 400; 12 with --quick].
    #[arg(long)]
    runs: Option<usize>,
    /// Worker process counts to measure [default: 1,2,4; 1,2 with --quick].
    #[arg(long, value_delimiter = ',')]
    workers: Vec<usize>,
    /// `toren worker --concurrency N` of each worker.
    #[arg(long, default_value_t = 8)]
    concurrency: usize,
    /// Runs created one at a time for the claim latency [default: 100; 10 with --quick].
    #[arg(long)]
    latency_runs: Option<usize>,
    /// Appends for the per-event commit cost [default: 1000; 50 with --quick].
    #[arg(long)]
    appends: Option<usize>,
    /// Leave out a store (`sqlite` or `postgres`).
    #[arg(long, value_delimiter = ',')]
    skip: Vec<String>,
    /// The `toren` binary [default: `toren` beside this program].
    #[arg(long)]
    toren: Option<PathBuf>,
    /// Where to write the figures as JSON [default: target/toren-bench/fleet.json, or
    /// fleet-quick.json with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
    /// How long a case may take, in seconds.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
}

/// The stores measured.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Store {
    Sqlite,
    Postgres,
}

impl Store {
    fn name(self) -> &'static str {
        match self {
            Self::Sqlite => "sqlite",
            Self::Postgres => "postgres",
        }
    }
}

#[derive(Debug, Serialize)]
struct Figures {
    benchmark: &'static str,
    quick: bool,
    machine: Machine,
    profile: String,
    concurrency: usize,
    throughput: Vec<Throughput>,
    claim_latency: Vec<ClaimLatency>,
    commit: Vec<commit::Commit>,
    /// Warning or error lines the processes logged.
    warnings: usize,
    problems: Vec<String>,
}

#[derive(Debug, Serialize)]
struct Throughput {
    store: &'static str,
    workload: &'static str,
    workers: usize,
    runs: usize,
    /// Events the workers appended (every event but `run_created`).
    events: usize,
    /// From the first event a worker appended to the last `run_completed`.
    seconds: f64,
    runs_per_s: f64,
    events_per_s: f64,
    /// CPU time per run: the worker processes' (with their reaped sandboxes') and the
    /// Postgres server's (0 on SQLite, whose writes are the workers' own).
    cpu_ms_per_run: Cpu,
}

#[derive(Debug, Serialize)]
struct Cpu {
    workers: f64,
    postgres: f64,
}

#[derive(Debug, Serialize)]
struct ClaimLatency {
    store: &'static str,
    runs: usize,
    /// `run_created` to the first worker event.
    latency: Option<Spread>,
}

/// The sizes with `--quick` resolved.
struct Plan {
    runs: usize,
    workers: Vec<usize>,
    concurrency: usize,
    latency_runs: usize,
    appends: usize,
    stores: Vec<Store>,
    timeout: Duration,
}

pub(crate) async fn run(args: FleetArgs, quick: bool) -> anyhow::Result<Verdict> {
    let toren = crate::toren_bin::toren(args.toren.as_deref())?;
    let plan = Plan {
        runs: args.runs.unwrap_or(if quick { 12 } else { 400 }).max(1),
        workers: if args.workers.is_empty() {
            if quick { vec![1, 2] } else { vec![1, 2, 4] }
        } else {
            args.workers.clone()
        },
        concurrency: args.concurrency.max(1),
        latency_runs: args
            .latency_runs
            .unwrap_or(if quick { 10 } else { 100 })
            .max(1),
        appends: args.appends.unwrap_or(if quick { 50 } else { 1000 }).max(1),
        stores: [Store::Postgres, Store::Sqlite]
            .into_iter()
            .filter(|s| !args.skip.iter().any(|n| n == s.name()))
            .collect(),
        timeout: Duration::from_secs(args.timeout),
    };
    let cluster = if plan.stores.contains(&Store::Postgres) {
        Some(Cluster::start().context("cannot start a throwaway Postgres cluster")?)
    } else {
        None
    };
    let mut databases = 0;
    let mut database = |store: Store| -> anyhow::Result<Option<String>> {
        match (store, &cluster) {
            (Store::Postgres, Some(cluster)) => {
                databases += 1;
                Ok(Some(
                    cluster.create_database(&format!("fleet_{databases}"))?,
                ))
            }
            _ => Ok(None),
        }
    };

    let mut figures = Figures {
        benchmark: "fleet",
        quick,
        machine: Machine::this(),
        profile: crate::toren_bin::profile(&toren),
        concurrency: plan.concurrency,
        throughput: Vec::new(),
        claim_latency: Vec::new(),
        commit: Vec::new(),
        warnings: 0,
        problems: Vec::new(),
    };
    for &store in &plan.stores {
        for workload in [Workload::NoTool, Workload::OneBash] {
            for &workers in &plan.workers {
                say(&format!(
                    "fleet: {} {} runs, {workers} workers on {}",
                    plan.runs,
                    workload.name(),
                    store.name()
                ));
                let home = Home::new(workload, database(store)?)?;
                let t = throughput(
                    &toren,
                    &home,
                    &plan,
                    store,
                    workload,
                    workers,
                    &mut figures.problems,
                )
                .await?;
                figures.warnings += home.warnings();
                figures.throughput.push(t);
            }
        }
        say(&format!("fleet: claim latency on {}", store.name()));
        let home = Home::new(Workload::NoTool, database(store)?)?;
        let latency = claim_latency(&toren, &home, &plan, &mut figures.problems).await?;
        figures.warnings += home.warnings();
        figures.claim_latency.push(ClaimLatency {
            store: store.name(),
            runs: plan.latency_runs,
            latency,
        });
        say(&format!("fleet: per-event commit cost on {}", store.name()));
        figures.commit.push(match store {
            Store::Sqlite => commit::sqlite(plan.appends).await?,
            Store::Postgres => {
                commit::postgres(&database(store)?.context("a database")?, plan.appends).await?
            }
        });
    }
    drop(cluster);

    print_table(&figures);
    let json = args.json.unwrap_or_else(|| {
        crate::toren_bin::default_output(if quick {
            "fleet-quick.json"
        } else {
            "fleet.json"
        })
    });
    write_json(&json, &figures)?;
    say(&format!("fleet: figures written to {}", json.display()));
    if figures.problems.is_empty() {
        Ok(Verdict::Correct)
    } else {
        for p in figures.problems.iter().take(20) {
            say(&format!("fleet: wrong: {p}"));
        }
        Ok(Verdict::Wrong)
    }
}

async fn throughput(
    toren: &Path,
    home: &Home,
    plan: &Plan,
    store: Store,
    workload: Workload,
    workers: usize,
    problems: &mut Vec<String>,
) -> anyhow::Result<Throughput> {
    let front = Front::start(toren, home).await?;
    let api = Api::new(&front)?;
    let ids = create_runs(&api, plan.runs).await?;
    let postgres_before = procs::postgres_cpu_seconds();
    let mut children = procs::workers(toren, home, workers, plan.concurrency)?;
    let drained = drain(&api, home, &mut children, plan.timeout).await;
    // Before they exit: the Postgres backends serving them end with their connections.
    let postgres_cpu = match store {
        Store::Postgres => procs::postgres_cpu_seconds() - postgres_before,
        Store::Sqlite => 0.0,
    };
    let worker_cpu: f64 = children
        .iter()
        .filter_map(tokio::process::Child::id)
        .map(procs::cpu_seconds)
        .sum();
    procs::stop(children).await?;
    drained?;
    let logs = logs(&api, &ids, workload, problems).await?;
    front.stop().await?;

    let first = logs
        .iter()
        .filter_map(|l| l.get(1).map(|e| e.at))
        .min()
        .context("no worker event")?;
    let last = logs
        .iter()
        .filter_map(|l| l.last().map(|e| e.at))
        .max()
        .context("no event")?;
    let seconds = Duration::try_from(last.duration_since(first))
        .unwrap_or_default()
        .as_secs_f64()
        .max(1e-6);
    let events: usize = logs.iter().map(|l| l.len().saturating_sub(1)).sum();
    Ok(Throughput {
        store: store.name(),
        workload: workload.name(),
        workers,
        runs: ids.len(),
        events,
        seconds,
        runs_per_s: ids.len() as f64 / seconds,
        events_per_s: events as f64 / seconds,
        cpu_ms_per_run: Cpu {
            workers: worker_cpu * 1000.0 / ids.len() as f64,
            postgres: postgres_cpu * 1000.0 / ids.len() as f64,
        },
    })
}

/// Two idle workers; runs created one at a time, each once the previous one has ended (so
/// every claim starts from an empty queue): `run_created` to the first worker event.
async fn claim_latency(
    toren: &Path,
    home: &Home,
    plan: &Plan,
    problems: &mut Vec<String>,
) -> anyhow::Result<Option<Spread>> {
    let front = Front::start(toren, home).await?;
    let api = Api::new(&front)?;
    let mut children = procs::workers(toren, home, 2, plan.concurrency)?;
    // A first run to know the workers are up; not counted.
    let warm = create_runs(&api, 1).await?;
    drain(&api, home, &mut children, plan.timeout).await?;
    let mut ids = Vec::with_capacity(plan.latency_runs);
    for i in 0..plan.latency_runs {
        ids.push(api.create(format!("latency run {i}")).await?);
        drain(&api, home, &mut children, plan.timeout).await?;
    }
    procs::stop(children).await?;
    logs(&api, &warm, Workload::NoTool, problems).await?;
    let logs = logs(&api, &ids, Workload::NoTool, problems).await?;
    front.stop().await?;
    let latencies: Vec<Duration> = logs
        .iter()
        .filter_map(|l| {
            let (created, first) = (l.first()?, l.get(1)?);
            Duration::try_from(first.at.duration_since(created.at)).ok()
        })
        .collect();
    Ok(Spread::of(&latencies))
}

fn print_table(f: &Figures) {
    let mut table = Table::default();
    table.row(
        "machine",
        format!("{} CPUs, {} build", f.machine.cpus, f.profile),
    );
    let mut by: BTreeMap<(&str, &str), Vec<&Throughput>> = BTreeMap::new();
    for t in &f.throughput {
        by.entry((t.store, t.workload)).or_default().push(t);
    }
    for ((store, workload), rows) in by {
        for t in rows {
            table.row(
                &format!("{store} {workload}, {} workers", t.workers),
                format!(
                    "{:.0} runs/s, {:.0} events/s ({} runs in {:.2} s; CPU/run: workers {:.1} ms, postgres {:.1} ms)",
                    t.runs_per_s,
                    t.events_per_s,
                    t.runs,
                    t.seconds,
                    t.cpu_ms_per_run.workers,
                    t.cpu_ms_per_run.postgres
                ),
            );
        }
    }
    for c in &f.claim_latency {
        table.row(
            &format!("{} claim latency", c.store),
            c.latency.map_or_else(
                || "-".to_owned(),
                |s| {
                    format!(
                        "p50 {:.1} ms, p99 {:.1} ms ({} runs)",
                        s.p50_ms, s.p99_ms, c.runs
                    )
                },
            ),
        );
    }
    for c in &f.commit {
        table.row(
            &format!("{} per-event commit", c.store),
            c.append.map_or_else(
                || "-".to_owned(),
                |s| {
                    format!(
                        "p50 {:.2} ms, p99 {:.2} ms ({:.0} commits/s alone)",
                        s.p50_ms, s.p99_ms, c.per_s
                    )
                },
            ),
        );
    }
    table.row("warnings logged", f.warnings.to_string());
    table.row("problems", f.problems.len().to_string());
    table.print("toren-bench fleet");
}
