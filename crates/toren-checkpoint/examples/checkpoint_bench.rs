//! What a checkpoint costs on a `node_modules`-like tree: the first one (every file read
//! and stored), one with nothing changed (a stat per file), one with one file changed, and
//! a restore after that change, and a restore of the whole tree (every file written back)
//! with the checkpoint right after it. The tree is made in a temporary directory.
//!
//! ```text
//! cargo run --release -p toren-checkpoint --example checkpoint_bench [-- FILES [SAMPLES]]
//! ```
//!
//! FILES defaults to 50000 (spread over directories of 50 files, 1-4 KiB each, one in ten
//! sharing its content with another, as packages do); SAMPLES (default 10) is how many
//! one-change checkpoints the steady-state figure is the median of (more, for a profiler).

#![allow(clippy::print_stdout)]

use std::time::Instant;

use toren_checkpoint::{Exclude, Store};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let files: usize = match std::env::args().nth(1) {
        Some(n) => n.parse()?,
        None => 50_000,
    };
    let samples_wanted: usize = match std::env::args().nth(2) {
        Some(n) => n.parse::<usize>()?.max(1),
        None => 10,
    };
    let dir = tempfile::tempdir()?;
    let ws = dir.path().join("workspace");
    let made = Instant::now();
    for i in 0..files {
        let pkg = ws.join(format!("node_modules/pkg{}/lib", i / 50));
        if i % 50 == 0 {
            std::fs::create_dir_all(&pkg)?;
        }
        let seed = if i % 10 == 0 { i / 10 } else { i };
        let body = format!("module.exports = {seed};\n").repeat(40 + seed % 150);
        std::fs::write(pkg.join(format!("f{i}.js")), body)?;
    }
    println!(
        "tree: {files} files in {} directories, made in {:.1} s",
        files.div_ceil(50) * 2 + 1,
        made.elapsed().as_secs_f64()
    );
    let store = Store::open(dir.path().join("checkpoints"))?;
    let none = Exclude::default();
    let run = |label: &str| -> Result<String, Box<dyn std::error::Error>> {
        let t = Instant::now();
        let cp = store.checkpoint(&ws, &none)?;
        let ms = t.elapsed().as_secs_f64() * 1000.0;
        println!(
            "{label:<26} {ms:>9.1} ms  entries {:>6}  hashed {:>6}  blobs written {:>6} ({:.1} MiB)",
            cp.stats.entries,
            cp.stats.hashed,
            cp.stats.blobs_written,
            cp.stats.bytes_written as f64 / 1048576.0
        );
        Ok(cp.id)
    };
    let first = run("first checkpoint")?;
    run("no change")?;
    run("no change (again)")?;
    std::fs::write(ws.join("node_modules/pkg7/lib/f357.js"), "changed\n")?;
    run("one file changed")?;
    // What a tool call pays in steady state: one file changed before each of ten samples.
    let mut samples = Vec::new();
    let cpu_before = cpu_ms();
    for i in 0..samples_wanted {
        std::fs::write(
            ws.join("node_modules/pkg3/lib/f170.js"),
            format!("changed {i}\n"),
        )?;
        let t = Instant::now();
        store.checkpoint(&ws, &none)?;
        samples.push(t.elapsed().as_secs_f64() * 1000.0);
    }
    let cpu = cpu_ms()
        .zip(cpu_before)
        .map(|(after, before)| after - before);
    samples.sort_by(f64::total_cmp);
    println!(
        "one file changed, {} more p50 {:>6.1} ms  min {:.1}  max {:.1}",
        samples.len(),
        samples[samples.len() / 2],
        samples[0],
        samples[samples.len() - 1]
    );
    // CPU time (user + system, all threads) per checkpoint: what the machine's load does
    // not change, unlike the wall time above.
    if let Some(cpu) = cpu {
        println!(
            "  CPU per checkpoint         {:>9.1} ms",
            cpu / samples.len() as f64
        );
    }
    let t = Instant::now();
    store.restore(&first, &ws, &none)?;
    println!(
        "restore one changed file   {:>9.1} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );
    run("checkpoint after a restore")?;
    // A rewind past the tree's making: every file written back (new inode, new ctime),
    // then the checkpoint a rewind's turn or the next tool call takes.
    std::fs::remove_dir_all(ws.join("node_modules"))?;
    run("tree removed")?;
    let t = Instant::now();
    store.restore(&first, &ws, &none)?;
    println!(
        "restore the whole tree     {:>9.1} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );
    run("checkpoint right after")?;
    let t = Instant::now();
    let ex = Exclude::new(&["node_modules/"])?;
    store.checkpoint(&ws, &ex)?;
    println!(
        "node_modules/ excluded     {:>9.1} ms",
        t.elapsed().as_secs_f64() * 1000.0
    );
    Ok(())
}

/// CPU time this process used so far (user + system, all its threads), from
/// `/proc/self/stat` (in clock ticks of 10 ms: meant for sums over many checkpoints).
fn cpu_ms() -> Option<f64> {
    let stat = std::fs::read_to_string("/proc/self/stat").ok()?;
    // Fields after the command name (which is in parentheses): utime is the 12th, stime
    // the 13th.
    let rest = stat.rsplit_once(')')?.1;
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: f64 = fields.get(11)?.parse::<f64>().ok()? + fields.get(12)?.parse::<f64>().ok()?;
    Some(ticks * 10.0)
}
