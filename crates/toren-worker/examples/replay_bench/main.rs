//! Replay speed: how long resuming a run takes to reach its next new action, for logs of
//! 1,000, 10,000 and 100,000 events (or the lengths given), with where the time goes.
//! Prints figures; it is a benchmark program, not a test.
//!
//! ```sh
//! cargo run --release -p toren-worker --example replay_bench [-- [--repeats=N] EVENTS...]
//! ```
//!
//! The measuring is in `replay.rs` ([`replay::measure`]), so that the benchmark program
//! (`toren-bench`) can call it; this file only prints.
#![expect(clippy::print_stdout, reason = "a benchmark prints its figures")]

mod replay;

use std::time::Duration;

/// How many times each length is measured unless `--repeats=N` says (the median is
/// printed).
const REPEATS: usize = 5;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut repeats = REPEATS;
    let mut sizes = Vec::new();
    for arg in std::env::args().skip(1) {
        match arg.strip_prefix("--repeats=") {
            Some(n) => repeats = n.parse()?,
            None => sizes.push(arg.parse::<usize>()?),
        }
    }
    if sizes.is_empty() {
        sizes = vec![1_000, 10_000, 100_000];
    }
    println!(
        "{:>7} {:>6} {:>5} | {:>11} | {:>11} {:>11} | {:>11} {:>11} | {:>11} {:>11}",
        "events",
        "turns",
        "MiB",
        "per-row",
        "read",
        "decode",
        "fold",
        "decide",
        "to action",
        "committed"
    );
    let mut all = Vec::new();
    for events in sizes {
        let f = replay::measure(events, repeats).await?;
        println!(
            "{:>7} {:>6} {:>5.1} | {:>11} | {:>11} {:>11} | {:>11} {:>11} | {:>11} {:>11}",
            f.events,
            f.turns,
            f.payload_bytes as f64 / (1024.0 * 1024.0),
            ms(f.per_row),
            ms(f.read),
            ms(f.decode),
            ms(f.fold),
            ms(f.decide),
            ms(f.to_action),
            ms(f.to_commit),
        );
        all.push(f);
    }
    println!(
        "milliseconds, wall/CPU (the process's CPU time meanwhile, all threads), median of {} \
         resumes on fresh store handles.\n\
         per-row: for reference, the log fetched a row per event through sqlx, not decoded; \
         read: EventLog::read (the store's queries and decoding); decode: serde_json of every \
         payload alone; fold: RunState::from_events; decide: next_action; to action: the \
         worker from taking the lease to calling the model; committed: to the model's answer \
         in the log.",
        all.first().map_or(repeats, |f| f.repeats)
    );
    for pair in all.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let per = |f: &replay::Figures| f.to_action.wall.as_secs_f64() / f.events as f64;
        println!(
            "{} -> {} events: {:.1}x the events, {:.1}x the time to the next action \
             ({:.2} -> {:.2} µs per event)",
            a.events,
            b.events,
            b.events as f64 / a.events as f64,
            b.to_action.wall.as_secs_f64() / a.to_action.wall.as_secs_f64(),
            per(a) * 1e6,
            per(b) * 1e6,
        );
    }
    Ok(())
}

fn ms(t: replay::Timing) -> String {
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    format!("{:.1}/{:.1}", ms(t.wall), ms(t.cpu))
}
