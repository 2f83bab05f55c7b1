//! `checkpoint`: what the workspace checkpoint taken before each tool call costs: a
//! `node_modules`-like tree of 20,000 files (directories of 50, 1-4 KiB each, one in ten
//! sharing its content with another, as packages do), checkpointed once, then before each
//! "tool call" one file is changed and the checkpoint the worker takes is timed
//! (`toren_checkpoint::Policy::checkpoint`: the walk, the stat per file, the changed file
//! read and stored, the manifest written and flushed, the prune check), with the CPU time
//! (user + system, all threads) those checkpoints used, which the machine's load does not
//! change. Also timed: a checkpoint with nothing changed; a restore of the first checkpoint
//! and the checkpoint right after it; what a rewind past the tree's making costs — the tree
//! removed, restored whole (every file written back, with a new inode and ctime) and the
//! checkpoint right after, which should take each file's hash from the restore's hints
//! rather than read it; and a checkpoint with `node_modules/` excluded. Goal: one changed
//! file under 50 ms p50. Correct when each checkpoint read exactly the one changed file and
//! both restores gave back the first checkpoint's tree.

use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

use clap::Args;
use serde::Serialize;
use toren_checkpoint::{Exclude, Policy, Store};

use crate::api_load::Verdict;
use crate::report::{Machine, Table};
use crate::stats::{Spread, cpu_time, millis};
use crate::tool_call::say;

#[derive(Debug, Args)]
pub(crate) struct CheckpointArgs {
    /// Files in the workspace [default: 20000; 2000 with --quick].
    #[arg(long)]
    files: Option<usize>,
    /// Checkpoints timed with one file changed before each [default: 30; 5 with --quick].
    #[arg(long)]
    samples: Option<usize>,
    /// Where to write the figures as JSON [default: target/toren-bench/checkpoint.json, or
    /// checkpoint-quick.json with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
struct Figures {
    benchmark: &'static str,
    machine: Machine,
    quick: bool,
    files: usize,
    first_ms: f64,
    one_changed: Option<Spread>,
    /// CPU time (user + system, all threads) per one-change checkpoint.
    cpu_per_one_changed_ms: f64,
    no_change: Option<Spread>,
    restore_ms: f64,
    /// The checkpoint right after that restore, and the files it read.
    after_restore_ms: f64,
    after_restore_hashed: usize,
    /// The tree removed, then restored whole.
    restore_whole_ms: f64,
    /// The checkpoint right after the whole restore, and the files it read again (those
    /// written too close to the restore's end for the clock to tell a later write apart).
    after_whole_restore_ms: f64,
    after_whole_restore_hashed: usize,
    /// A checkpoint with `node_modules/` excluded (nearly the whole tree).
    excluded_ms: f64,
    goal_ms: f64,
}

pub(crate) async fn run(args: CheckpointArgs, quick: bool) -> anyhow::Result<Verdict> {
    let files = args.files.unwrap_or(if quick { 2_000 } else { 20_000 });
    let samples = args.samples.unwrap_or(if quick { 5 } else { 30 }).max(1);
    let json = args.json.unwrap_or_else(|| {
        crate::toren_bin::default_output(if quick {
            "checkpoint-quick.json"
        } else {
            "checkpoint.json"
        })
    });
    tokio::task::spawn_blocking(move || measure(files, samples, quick, &json)).await?
}

fn measure(files: usize, samples: usize, quick: bool, json: &Path) -> anyhow::Result<Verdict> {
    let dir = tempfile::tempdir()?;
    let ws = dir.path().join("run").join("workspace");
    say(&format!("checkpoint: making a tree of {files} files"));
    make_tree(&ws, files)?;
    let policy = Policy::default();
    let timed = |label: &str| -> anyhow::Result<(Duration, toren_checkpoint::Checkpoint)> {
        let t = Instant::now();
        let taken = policy.checkpoint(&ws)?;
        let elapsed = t.elapsed();
        tracing_free_note(label, elapsed, &taken);
        Ok((elapsed, taken))
    };
    let (first, first_cp) = timed("first")?;
    let mut correct = true;
    let mut one_changed = Vec::with_capacity(samples);
    let mut one_changed_cpu = Duration::ZERO;
    let mut no_change = Vec::with_capacity(samples);
    for i in 0..samples {
        // The tool call: one file of the tree changed.
        let path = file_path(&ws, (i * 7919) % files);
        std::fs::write(&path, format!("changed by call {i}\n"))?;
        let cpu = cpu_time();
        let (elapsed, taken) = timed("one changed")?;
        one_changed_cpu += cpu_time().saturating_sub(cpu);
        correct &= taken.stats.hashed == 1;
        one_changed.push(elapsed);
        let (elapsed, taken) = timed("no change")?;
        correct &= taken.stats.hashed == 0;
        no_change.push(elapsed);
    }
    let store = Store::open(Policy::store_for(&ws).ok_or_else(|| anyhow::anyhow!("no store"))?)?;
    let none = Exclude::default();
    let t = Instant::now();
    store.restore(&first_cp.id, &ws, &none)?;
    let restore = t.elapsed();
    // The restored tree is the first checkpoint's: checkpointing it again reads nothing new
    // into a manifest different from the first (same paths, same hashes).
    let t = Instant::now();
    let again = store.checkpoint(&ws, &none)?;
    let after_restore = t.elapsed();
    // A rewind past the tree's making: every file written back, then the next checkpoint.
    std::fs::remove_dir_all(ws.join("node_modules"))?;
    store.checkpoint(&ws, &none)?;
    say(&format!(
        "checkpoint: restoring the whole tree of {files} files"
    ));
    let t = Instant::now();
    store.restore(&first_cp.id, &ws, &none)?;
    let restore_whole = t.elapsed();
    let t = Instant::now();
    let after_whole = store.checkpoint(&ws, &none)?;
    let after_whole_restore = t.elapsed();
    let t = Instant::now();
    store.checkpoint(&ws, &Exclude::new(&["node_modules/"])?)?;
    let excluded = t.elapsed();
    let hashes = |id: &str| -> anyhow::Result<Vec<(String, String)>> {
        Ok(store
            .manifest(id)?
            .entries
            .into_iter()
            .filter_map(|e| match e.kind {
                toren_checkpoint::EntryKind::File { hash, .. } => Some((e.path, hash)),
                _ => None,
            })
            .collect())
    };
    let first_hashes = hashes(&first_cp.id)?;
    correct &= hashes(&again.id)? == first_hashes;
    correct &= hashes(&after_whole.id)? == first_hashes;

    let figures = Figures {
        benchmark: "checkpoint",
        machine: Machine::this(),
        quick,
        files,
        first_ms: millis(first),
        one_changed: Spread::of(&one_changed),
        cpu_per_one_changed_ms: millis(one_changed_cpu) / samples as f64,
        no_change: Spread::of(&no_change),
        restore_ms: millis(restore),
        after_restore_ms: millis(after_restore),
        after_restore_hashed: again.stats.hashed,
        restore_whole_ms: millis(restore_whole),
        after_whole_restore_ms: millis(after_whole_restore),
        after_whole_restore_hashed: after_whole.stats.hashed,
        excluded_ms: millis(excluded),
        goal_ms: 50.0,
    };
    let mut table = Table::default();
    table.row("files", files.to_string());
    table.row("first checkpoint", format!("{:.1} ms", figures.first_ms));
    let spread = |s: &Option<Spread>| {
        s.map(|s| {
            format!(
                "p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                s.p50_ms, s.p99_ms, s.max_ms
            )
        })
        .unwrap_or_default()
    };
    table.row(
        "one file changed (per tool call; goal < 50 ms p50)",
        spread(&figures.one_changed),
    );
    table.row(
        "  CPU per one-change checkpoint",
        format!("{:.1} ms", figures.cpu_per_one_changed_ms),
    );
    table.row("nothing changed", spread(&figures.no_change));
    table.row(
        "restore of the first checkpoint",
        format!("{:.1} ms", figures.restore_ms),
    );
    table.row(
        "  checkpoint right after it",
        format!(
            "{:.1} ms, {} hashed",
            figures.after_restore_ms, figures.after_restore_hashed
        ),
    );
    table.row(
        "restore of the whole tree (removed)",
        format!("{:.1} ms", figures.restore_whole_ms),
    );
    table.row(
        "  checkpoint right after it",
        format!(
            "{:.1} ms, {} hashed",
            figures.after_whole_restore_ms, figures.after_whole_restore_hashed
        ),
    );
    table.row(
        "node_modules/ excluded",
        format!("{:.1} ms", figures.excluded_ms),
    );
    table.row("correct", correct.to_string());
    table.print("toren-bench checkpoint");
    crate::report::write_json(json, &figures)?;
    say(&format!(
        "checkpoint: figures written to {}",
        json.display()
    ));
    Ok(if correct {
        Verdict::Correct
    } else {
        Verdict::Wrong
    })
}

fn tracing_free_note(label: &str, elapsed: Duration, taken: &toren_checkpoint::Checkpoint) {
    if label == "first" {
        say(&format!(
            "checkpoint: first checkpoint {:.1} ms ({} entries, {} blobs written)",
            millis(elapsed),
            taken.stats.entries,
            taken.stats.blobs_written
        ));
    }
}

fn file_path(ws: &Path, i: usize) -> PathBuf {
    ws.join(format!("node_modules/pkg{}/lib/f{i}.js", i / 50))
}

fn make_tree(ws: &Path, files: usize) -> anyhow::Result<()> {
    for i in 0..files {
        let path = file_path(ws, i);
        if i % 50 == 0
            && let Some(parent) = path.parent()
        {
            std::fs::create_dir_all(parent)?;
        }
        let seed = if i % 10 == 0 { i / 10 } else { i };
        let body = format!("module.exports = {seed};\n").repeat(40 + seed % 150);
        std::fs::write(path, body)?;
    }
    Ok(())
}
