//! The local backend's trivial tool call against its floors (issue 12, item 1): p50 and p99
//! of `bash -c true` spawned directly (the host floor), of `bwrap` with the backend's exact
//! arguments (the local floor, and that command line with one piece left out at a time, to
//! show where bubblewrap's time goes), of the backend's own `exec` of `true` (a run's later
//! commands, and a run's first), and of the whole `bash: true` tool call through a worker
//! over a real SQLite store. Prints figures; it is a benchmark program, not a test.
//!
//! ```sh
//! cargo run --release -p toren-sandbox --example local_bench [-- ITERATIONS]
//! ```
//!
//! `ITERATIONS` defaults to 300. The measuring is in functions (`floors`, `worker`) that
//! return a [`stats::Summary`] each, so a benchmark program can call them.
#![expect(clippy::print_stdout, reason = "a benchmark prints its figures")]

mod floors;
mod stats;
mod worker;

use std::path::PathBuf;

use anyhow::Context;
use toren_sandbox::LocalSettings;

use crate::floors::Bwrap;
use crate::stats::Summary;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let iterations: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()
        .context("ITERATIONS must be a number")?
        .unwrap_or(300);
    let dir = tempfile::tempdir()?;
    let settings = LocalSettings {
        sandbox_root: dir.path().join("sandboxes"),
        bwrap: None,
    };
    let bwrap = PathBuf::from("/usr/bin/bwrap");
    let floor_ws = dir.path().join("floor-workspace");
    std::fs::create_dir_all(&floor_ws)?;

    println!("{iterations} iterations each (after a warm-up)\n");
    let host = floors::host_floor(iterations).await?;
    row("bash -c true (host floor)", &host, &host);
    let local_floor = floors::bwrap_floor(&bwrap, &floor_ws, Bwrap::Exact, iterations).await?;
    row(Bwrap::Exact.label(), &local_floor, &host);
    for variant in [Bwrap::NoSeccomp, Bwrap::SharedNet, Bwrap::NoShell] {
        let s = floors::bwrap_floor(&bwrap, &floor_ws, variant, iterations).await?;
        row(variant.label(), &s, &host);
    }
    let exec = floors::local_exec(settings.clone(), iterations).await?;
    row("LocalBackend exec of true", &exec, &host);
    let first = floors::local_first_exec(settings.clone(), iterations.min(100)).await?;
    row("open + first exec (a new run)", &first, &host);
    let call = worker::tool_call(settings, iterations).await?;
    row("worker: bash true tool call", &call.call, &host);
    row("  model answer → tool_started", &call.to_started, &host);
    row(
        "  tool_started → tool_completed",
        &call.started_to_completed,
        &host,
    );
    Ok(())
}

fn row(label: &str, s: &Summary, host: &Summary) {
    println!("{label:<40} {s}  {:>6.2}× host", s.ratio_to(host));
}
