//! `toren-bench replay`: the time from resuming a run to its next new action, for logs of 1,000, 10,000 and 100,000 events, split into the store's read
//! (query and decoding), decoding alone, the fold and the decision, and how it grows from
//! one length to the next (the goal: linear, and 10,000 events under 50 ms). Each log is
//! written through the real store (SQLite in a temporary directory) and resumed on fresh
//! store handles through a real `Worker`, whose model answers at once; the measuring is in
//! `measure.rs`. Each figure is the median of a few resumes, by the wall clock and by the
//! process's CPU time (steadier on a shared machine).

mod measure;

use std::path::PathBuf;

use clap::Args;
use serde::Serialize;

use crate::api_load::Verdict;
use crate::report::{Machine, Table, write_json};
use crate::stats::millis;
use crate::tool_call::say;

use measure::{Figures, Timing};

/// The goal: resuming a log of this many events reaches its next action in under
/// [`GOAL_MS`].
const GOAL_EVENTS: u64 = 10_000;
const GOAL_MS: f64 = 50.0;

#[derive(Debug, Args)]
pub(crate) struct ReplayArgs {
    /// Log lengths, in events, comma-separated [default: 1000,10000,100000; 100,1000 with
    /// --quick].
    #[arg(long, value_delimiter = ',')]
    events: Vec<usize>,
    /// Resumes per length, on fresh store handles; the median is reported [default: 5; 1
    /// with --quick].
    #[arg(long)]
    repeats: Option<usize>,
    /// Where to write the figures as JSON [default: target/toren-bench/replay.json, or
    /// replay-quick.json with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
struct Document {
    benchmark: &'static str,
    quick: bool,
    machine: Machine,
    goal: Goal,
    logs: Vec<Figures>,
    /// From each length to the next.
    growth: Vec<Growth>,
}

#[derive(Debug, Serialize)]
struct Goal {
    events: u64,
    to_action_ms: f64,
    /// Whether the median wall time to the next action of a log of `events` was under
    /// `to_action_ms`; `None` when no log of that length was measured.
    met: Option<bool>,
}

#[derive(Debug, Serialize, PartialEq)]
struct Growth {
    from_events: u64,
    to_events: u64,
    /// How many times the events.
    events_ratio: f64,
    /// How many times the wall time to the next action, and the CPU time.
    wall_ratio: f64,
    cpu_ratio: f64,
}

pub(crate) async fn run(args: ReplayArgs, quick: bool) -> anyhow::Result<Verdict> {
    let sizes = if args.events.is_empty() {
        if quick {
            vec![100, 1_000]
        } else {
            vec![1_000, 10_000, 100_000]
        }
    } else {
        args.events
    };
    let repeats = args.repeats.unwrap_or(if quick { 1 } else { 5 }).max(1);
    let mut logs = Vec::with_capacity(sizes.len());
    for events in sizes {
        say(&format!(
            "replay: a log of {events} events, {repeats} resumes"
        ));
        logs.push(measure::measure(events, repeats).await?);
    }
    let document = Document {
        benchmark: "replay",
        quick,
        machine: Machine::this(),
        goal: goal(&logs),
        growth: growth(&logs),
        logs,
    };
    table(&document).print(if quick {
        "toren-bench replay (--quick)"
    } else {
        "toren-bench replay"
    });
    let path = args.json.unwrap_or_else(|| {
        crate::toren_bin::default_output(if quick {
            "replay-quick.json"
        } else {
            "replay.json"
        })
    });
    write_json(&path, &document)?;
    say(&format!("replay: figures written to {}", path.display()));
    Ok(Verdict::Correct)
}

/// The goal, judged on the log of [`GOAL_EVENTS`] events if one was measured.
fn goal(logs: &[Figures]) -> Goal {
    Goal {
        events: GOAL_EVENTS,
        to_action_ms: GOAL_MS,
        met: logs
            .iter()
            .find(|f| f.events == GOAL_EVENTS)
            .map(|f| millis(f.to_action.wall) < GOAL_MS),
    }
}

fn growth(logs: &[Figures]) -> Vec<Growth> {
    logs.windows(2)
        .map(|pair| {
            let (a, b) = (&pair[0], &pair[1]);
            let ratio = |x: std::time::Duration, y: std::time::Duration| {
                y.as_secs_f64() / x.as_secs_f64().max(1e-9)
            };
            Growth {
                from_events: a.events,
                to_events: b.events,
                events_ratio: b.events as f64 / a.events.max(1) as f64,
                wall_ratio: ratio(a.to_action.wall, b.to_action.wall),
                cpu_ratio: ratio(a.to_action.cpu, b.to_action.cpu),
            }
        })
        .collect()
}

fn ms(t: Timing) -> String {
    format!("{:.1} ms wall, {:.1} ms CPU", millis(t.wall), millis(t.cpu))
}

fn table(d: &Document) -> Table {
    let mut t = Table::default();
    for f in &d.logs {
        let n = f.events;
        t.row(
            &format!("{n} events: log"),
            format!(
                "{} turns, {:.1} MiB of payload, median of {} resumes",
                f.turns,
                f.payload_bytes as f64 / (1024.0 * 1024.0),
                f.repeats
            ),
        );
        t.row(
            &format!("{n} events: resume → next action"),
            ms(f.to_action),
        );
        t.row(&format!("{n} events: … read (EventLog::read)"), ms(f.read));
        t.row(
            &format!("{n} events: … decode alone (serde_json)"),
            ms(f.decode),
        );
        t.row(&format!("{n} events: … fold (RunState)"), ms(f.fold));
        t.row(&format!("{n} events: … decide (next_action)"), ms(f.decide));
        t.row(
            &format!("{n} events: … to the answer committed"),
            ms(f.to_commit),
        );
        t.row(
            &format!("{n} events: a row per event (reference)"),
            ms(f.per_row),
        );
    }
    for g in &d.growth {
        t.row(
            &format!("growth {} → {} events", g.from_events, g.to_events),
            format!(
                "{:.1}× the events: {:.2}× the wall time, {:.2}× the CPU time",
                g.events_ratio, g.wall_ratio, g.cpu_ratio
            ),
        );
    }
    t.row(
        &format!("goal: {} events under {GOAL_MS:.0} ms", d.goal.events),
        match d.goal.met {
            Some(true) => "met".to_owned(),
            Some(false) => "missed".to_owned(),
            None => "– (not measured at this length)".to_owned(),
        },
    );
    t
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    fn log(events: u64, wall_ms: u64, cpu_ms: u64) -> Figures {
        let to_action = Timing {
            wall: Duration::from_millis(wall_ms),
            cpu: Duration::from_millis(cpu_ms),
        };
        Figures {
            events,
            turns: 0,
            payload_bytes: 0,
            repeats: 1,
            per_row: Timing::default(),
            decode: Timing::default(),
            read: Timing::default(),
            fold: Timing::default(),
            decide: Timing::default(),
            to_action,
            to_commit: to_action,
        }
    }

    #[test]
    fn growth_compares_each_length_with_the_one_before() {
        let logs = [
            log(1_000, 2, 2),
            log(10_000, 20, 25),
            log(100_000, 300, 250),
        ];
        let g = growth(&logs);
        assert_eq!(g.len(), 2);
        assert_eq!((g[0].from_events, g[0].to_events), (1_000, 10_000));
        assert!((g[0].events_ratio - 10.0).abs() < 1e-9);
        assert!((g[0].wall_ratio - 10.0).abs() < 1e-9);
        assert!((g[0].cpu_ratio - 12.5).abs() < 1e-9);
        assert!((g[1].wall_ratio - 15.0).abs() < 1e-9);
        assert!((g[1].cpu_ratio - 10.0).abs() < 1e-9);
        assert!(growth(&logs[..1]).is_empty());
    }

    #[test]
    fn the_goal_is_judged_on_the_10000_event_log_by_its_wall_time() {
        assert_eq!(goal(&[log(10_000, 49, 10)]).met, Some(true));
        assert_eq!(
            goal(&[log(1_000, 1, 1), log(10_000, 50, 10)]).met,
            Some(false)
        );
        // Quick sizes do not include the goal's length: not judged.
        assert_eq!(goal(&[log(100, 1, 1), log(1_000, 5, 5)]).met, None);
    }
}
