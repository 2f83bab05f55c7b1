//! The local backend's trivial tool call against its floors (issue 12, item 1): p50 and p99
//! of `bash -c true` spawned directly (the host floor), of `bwrap` with the backend's exact
//! arguments (the local floor, and that command line with one piece left out at a time, to
//! show where bubblewrap's time goes), of the backend's own `exec` of `true` (a run's later
//! commands, and a run's first), and of the whole `bash: true` tool call through a worker
//! over a real SQLite store. Prints figures; it is a benchmark program, not a test.
//!
//! ```sh
//! scripts/build-exec-helper
//! cargo run --release -p toren-sandbox --example local_bench [-- ITERATIONS [EXEC_HELPER]]
//! ```
//!
//! `ITERATIONS` defaults to 300. The backend is measured both ways: with the `toren-exec`
//! helper (`EXEC_HELPER`, by default where `scripts/build-exec-helper` puts it), a run
//! keeps one sandbox; without it, each command is a fresh bubblewrap. The measuring is in functions (`floors`, `worker`) that
//! return a [`stats::Summary`] each, so a benchmark program can call them.
#![expect(clippy::print_stdout, reason = "a benchmark prints its figures")]

mod floors;
mod stats;
mod worker;

use std::path::PathBuf;

use anyhow::Context;
use toren_sandbox::LocalSettings;

use crate::floors::Bwrap;
use crate::stats::{Paired, Summary};

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let iterations: usize = args
        .next()
        .map(|a| a.parse())
        .transpose()
        .context("ITERATIONS must be a number")?
        .unwrap_or(300);
    let helper = match args.next() {
        Some(path) => PathBuf::from(path),
        None => default_helper()?,
    };
    if !helper.is_file() {
        anyhow::bail!(
            "no helper at `{}`: run scripts/build-exec-helper, or name it",
            helper.display()
        );
    }
    let dir = tempfile::tempdir()?;
    let settings = LocalSettings {
        sandbox_root: dir.path().join("sandboxes"),
        bwrap: None,
    };
    let kept = Some(helper);
    let bwrap = PathBuf::from("/usr/bin/bwrap");
    let floor_ws = dir.path().join("floor-workspace");
    std::fs::create_dir_all(&floor_ws)?;

    println!(
        "{iterations} iterations each (after a warm-up), each followed by a host floor \
         sample; the ratio is p50 over the host floor's p50 measured alongside\n"
    );
    row(
        "bash -c true (host floor)",
        &floors::host_floor(iterations).await?,
    );
    row(
        "  … with the sandbox's env (LANG etc.)",
        &floors::host_with_sandbox_env(iterations).await?,
    );
    for variant in [
        Bwrap::Exact,
        Bwrap::NoSeccomp,
        Bwrap::SharedNet,
        Bwrap::NoShell,
    ] {
        row(
            variant.label(),
            &floors::bwrap_floor(&bwrap, &floor_ws, variant, iterations).await?,
        );
    }
    for (mode, helper) in [("kept sandbox", &kept), ("fresh bwrap per call", &None)] {
        println!("\nLocalBackend, {mode}:");
        let backend = || floors::backend(settings.clone(), helper.clone());
        row(
            "  exec of true",
            &floors::local_exec(backend(), iterations).await?,
        );
        row(
            "  open + first exec (a new run)",
            &floors::local_first_exec(backend(), iterations.min(100)).await?,
        );
        let call = worker::tool_call(backend(), &settings.sandbox_root, iterations).await?;
        row("  worker: bash true tool call", &call.call);
        part("    model answer → tool_started", &call.to_started);
        part(
            "    tool_started → tool_completed",
            &call.started_to_completed,
        );
        part("    the exec alone, inside the worker", &call.exec);
        part("    the call minus its exec", &call.besides_exec);
    }
    Ok(())
}

/// Where `scripts/build-exec-helper` puts the static helper, from this example's binary
/// (`target/release/examples/local_bench`).
fn default_helper() -> anyhow::Result<PathBuf> {
    let exe = std::env::current_exe()?;
    let target = exe
        .parent()
        .and_then(|examples| examples.parent()?.parent())
        .context("the example is not inside a target directory")?;
    Ok(target.join("exec-helper/x86_64-unknown-linux-gnu/release/toren-exec"))
}

fn row(label: &str, p: &Paired) {
    println!(
        "{label:<42} {}  {:>6.2}× host (host p50 {:.3} ms)",
        p.it,
        p.ratio(),
        p.host.p50.as_secs_f64() * 1000.0
    );
}

fn part(label: &str, s: &Summary) {
    println!("{label:<42} {s}");
}
