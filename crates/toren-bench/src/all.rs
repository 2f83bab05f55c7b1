//! `all`: every other benchmark in turn, each with its defaults (or its small load with
//! `--quick`), run alone: each in a process of its own (this program again, its output
//! passed through), so that none inherits what another left in the process — a heap grown
//! by replaying 100,000 events makes every later fork slower (measured: the local
//! sandbox's start went from 9 to 36 ms p50 after `replay` in the same process) — and each
//! prints its table and writes its JSON. The list is
//! read from the command line's own definition, so a benchmark added as a subcommand is
//! included without touching this file. One that fails to start does not stop the rest;
//! at the end a summary table is printed and `target/toren-bench/all.json` (or
//! `all-quick.json`) holds each benchmark's outcome, time and figures (its JSON document,
//! read back from where it wrote it).

use std::path::PathBuf;
use std::time::{Instant, SystemTime};

use anyhow::{Context as _, bail};
use clap::{Args, CommandFactory as _};
use serde::Serialize;

use crate::api_load::Verdict;
use crate::cli::Cli;
use crate::report::{Machine, Table};
use crate::tool_call::say;

#[derive(Debug, Args)]
pub(crate) struct AllArgs {
    /// Benchmarks to leave out (subcommand names, comma-separated).
    #[arg(long, value_delimiter = ',')]
    skip: Vec<String>,
    /// Where to write the summary [default: target/toren-bench/all.json, or all-quick.json
    /// with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
}

/// The summary document.
#[derive(Debug, Serialize)]
struct Summary {
    benchmark: &'static str,
    machine: Machine,
    quick: bool,
    benchmarks: Vec<Entry>,
}

#[derive(Debug, Serialize)]
struct Entry {
    name: String,
    /// `correct`, `wrong` (something measured went wrong) or `error` (it could not start).
    outcome: &'static str,
    error: Option<String>,
    seconds: f64,
    /// Where its figures were written, and what they were.
    json: PathBuf,
    figures: Option<serde_json::Value>,
}

/// The benchmarks `all` runs: every subcommand but itself, in the order `--help` lists them.
fn benchmarks() -> Vec<String> {
    Cli::command()
        .get_subcommands()
        .map(|c| c.get_name().to_owned())
        .filter(|name| name != "all" && name != "help")
        .collect()
}

pub(crate) async fn run(args: AllArgs, quick: bool) -> anyhow::Result<Verdict> {
    let names: Vec<String> = benchmarks()
        .into_iter()
        .filter(|name| !args.skip.contains(name))
        .collect();
    say(&format!("all: {}", names.join(", ")));
    let mut entries = Vec::new();
    for name in &names {
        say(&format!("all: {name}"));
        let began = SystemTime::now();
        let clock = Instant::now();
        let outcome = alone(name, quick).await;
        let seconds = clock.elapsed().as_secs_f64();
        let json = crate::toren_bin::default_output(&if quick {
            format!("{name}-quick.json")
        } else {
            format!("{name}.json")
        });
        let (outcome, error) = match outcome {
            Ok(Verdict::Correct) => ("correct", None),
            Ok(Verdict::Wrong) => ("wrong", None),
            Err(e) => {
                say(&format!("all: {name} could not run: {e:#}"));
                ("error", Some(format!("{e:#}")))
            }
        };
        entries.push(Entry {
            name: name.clone(),
            outcome,
            error,
            seconds,
            figures: written_since(&json, began),
            json,
        });
    }

    let mut table = Table::default();
    for e in &entries {
        table.row(&e.name, format!("{} in {:.1} s", e.outcome, e.seconds));
    }
    table.print("toren-bench all");
    let path = args.json.unwrap_or_else(|| {
        crate::toren_bin::default_output(if quick { "all-quick.json" } else { "all.json" })
    });
    let failed: Vec<&str> = entries
        .iter()
        .filter(|e| e.outcome == "error")
        .map(|e| e.name.as_str())
        .collect();
    let wrong = entries.iter().any(|e| e.outcome == "wrong");
    let failed = failed.join(", ");
    crate::report::write_json(
        &path,
        &Summary {
            benchmark: "all",
            machine: Machine::this(),
            quick,
            benchmarks: entries,
        },
    )?;
    say(&format!("all: summary written to {}", path.display()));
    if !failed.is_empty() {
        bail!("could not run: {failed}");
    }
    Ok(if wrong {
        Verdict::Wrong
    } else {
        Verdict::Correct
    })
}

/// Runs benchmark `name` with its defaults in a child process (this program), its stdout
/// and stderr passed through; its exit status is its outcome (`main`'s codes).
async fn alone(name: &str, quick: bool) -> anyhow::Result<Verdict> {
    let exe = std::env::current_exe().context("cannot tell where toren-bench runs from")?;
    let mut command = tokio::process::Command::new(exe);
    if quick {
        command.arg("--quick");
    }
    let status = command
        .arg(name)
        .kill_on_drop(true)
        .status()
        .await
        .with_context(|| format!("cannot start `toren-bench {name}`"))?;
    match status.code() {
        Some(0) => Ok(Verdict::Correct),
        Some(code) if code == i32::from(crate::WRONG) => Ok(Verdict::Wrong),
        _ => bail!("`toren-bench {name}` ended with {status} (its error is above)"),
    }
}

/// The JSON document at `path` if it was written at or after `since` (not a stale one).
fn written_since(path: &std::path::Path, since: SystemTime) -> Option<serde_json::Value> {
    let modified = std::fs::metadata(path).and_then(|m| m.modified()).ok()?;
    if modified < since {
        return None;
    }
    serde_json::from_str(&std::fs::read_to_string(path).ok()?).ok()
}

#[cfg(test)]
mod tests {
    use clap::Parser as _;

    use super::*;

    #[test]
    fn all_runs_every_other_subcommand_each_from_its_defaults() {
        let names = benchmarks();
        for expected in ["api-load", "tool-call", "sandbox-start"] {
            assert!(names.iter().any(|n| n == expected), "{names:?}");
        }
        assert!(!names.iter().any(|n| n == "all"), "{names:?}");
        for name in &names {
            // Each parses with no arguments, as `all` runs it.
            assert!(
                Cli::try_parse_from(["toren-bench", name.as_str()]).is_ok(),
                "{name}"
            );
        }
    }
}
