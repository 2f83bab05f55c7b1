//! Replay speed: how long resuming a run takes to reach its next new action, for logs of
//! 1,000, 10,000 and 100,000 events (or the lengths given), with where the time goes.
//! Prints figures; it is a benchmark program, not a test.
//!
//! ```sh
//! cargo run --release -p toren-worker --example replay_bench [-- EVENTS...]
//! ```
//!
//! The measuring is in `replay.rs` ([`replay::measure`]), so that the benchmark program
//! (`toren-bench`) can call it; this file only prints.
#![expect(clippy::print_stdout, reason = "a benchmark prints its figures")]

mod replay;

use std::time::Duration;

/// How many times each length is measured (the median is printed).
const REPEATS: usize = 5;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut sizes = std::env::args()
        .skip(1)
        .map(|a| a.parse::<usize>())
        .collect::<Result<Vec<_>, _>>()?;
    if sizes.is_empty() {
        sizes = vec![1_000, 10_000, 100_000];
    }
    println!(
        "{:>8} {:>7} {:>8} | {:>9} {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9}",
        "events",
        "turns",
        "MiB",
        "query",
        "decode",
        "read",
        "fold",
        "decide",
        "to action",
        "committed"
    );
    let mut all = Vec::new();
    for events in sizes {
        let f = replay::measure(events, REPEATS).await?;
        println!(
            "{:>8} {:>7} {:>8.1} | {:>9} {:>9} {:>9} | {:>9} {:>9} | {:>9} {:>9}",
            f.events,
            f.turns,
            f.payload_bytes as f64 / (1024.0 * 1024.0),
            ms(f.query),
            ms(f.decode),
            ms(f.read),
            ms(f.fold),
            ms(f.decide),
            ms(f.to_action),
            ms(f.to_commit),
        );
        all.push(f);
    }
    println!(
        "(median of {} runs on fresh store handles; query: the store's SELECT alone; decode: serde_json of every \
         payload; read: EventLog::read; to action: the worker from the lease to the model \
         call; committed: to the model's answer in the log)",
        all.first().map_or(REPEATS, |f| f.repeats)
    );
    for pair in all.windows(2) {
        let (a, b) = (&pair[0], &pair[1]);
        let per = |f: &replay::Figures| f.to_action.as_secs_f64() / f.events as f64;
        println!(
            "{} -> {} events: {:.1}x the events, {:.1}x the time to the next action \
             ({:.2} -> {:.2} µs per event)",
            a.events,
            b.events,
            b.events as f64 / a.events as f64,
            b.to_action.as_secs_f64() / a.to_action.as_secs_f64(),
            per(a) * 1e6,
            per(b) * 1e6,
        );
    }
    Ok(())
}

fn ms(d: Duration) -> String {
    format!("{:.2}ms", d.as_secs_f64() * 1000.0)
}
