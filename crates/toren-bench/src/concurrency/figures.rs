//! What `concurrency` measured, as the JSON document and the human table, with each goal of
//! its goal judges: all complete; a waiting run costs under 64 KiB of the server's
//! memory and holds no sandbox process, no thread and no open file.

use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use serde::Serialize;
use toren_protocol::{Event, EventKind};

use super::args::Concurrency;
use super::serve::Proc;
use crate::report::{Machine, Table};
use crate::stats::Spread;
use crate::toren_bin;

/// The memory a waiting run may cost (the goal).
const GOAL_KIB: f64 = 64.0;
/// How many problems are listed (all are counted).
const SHOWN: usize = 20;

/// Where a run's time in a phase is counted from.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Since {
    /// `run_created`.
    Created,
    /// `approval_decided`.
    Approved,
}

/// One group of runs: how many ended, when the last did, how long each took.
#[derive(Clone, Debug, Default, Serialize)]
pub(crate) struct Phase {
    runs: usize,
    completed: usize,
    /// From the phase's start (first POST, or first approval) to the last final event.
    all_ended_s: Option<f64>,
    /// Until the poll that saw them all ended.
    observed_s: f64,
    /// Each run, from `run_created` (or its approval) to its final event.
    run_ms: Option<Spread>,
    /// `tool_started` → `tool_completed`.
    tool_call_ms: Option<Spread>,
}

impl Phase {
    pub(crate) fn of(
        start: Timestamp,
        observed: Duration,
        logs: &[Result<Vec<Event>, String>],
        since: Since,
    ) -> Self {
        let logs: Vec<&Vec<Event>> = logs.iter().filter_map(|l| l.as_ref().ok()).collect();
        let ended = |events: &[Event]| {
            events
                .last()
                .filter(|e| matches!(e.kind, EventKind::RunCompleted(_)))
                .map(|e| e.at)
        };
        let at = |events: &[Event], pred: fn(&EventKind) -> bool| {
            events.iter().find(|e| pred(&e.kind)).map(|e| e.at)
        };
        let span = |a: Timestamp, b: Timestamp| {
            Duration::try_from(b.duration_since(a)).unwrap_or_default()
        };
        let completed: Vec<Timestamp> = logs.iter().filter_map(|l| ended(l)).collect();
        let run_ms: Vec<Duration> = logs
            .iter()
            .filter_map(|l| {
                let from = match since {
                    Since::Created => l.first().map(|e| e.at),
                    Since::Approved => at(l, |k| matches!(k, EventKind::ApprovalDecided(_))),
                };
                Some(span(from?, ended(l)?))
            })
            .collect();
        let calls: Vec<Duration> = logs
            .iter()
            .filter_map(|l| {
                let started = at(l, |k| matches!(k, EventKind::ToolStarted(_)))?;
                let done = at(l, |k| matches!(k, EventKind::ToolCompleted(_)))?;
                Some(span(started, done))
            })
            .collect();
        Self {
            runs: logs.len(),
            completed: completed.len(),
            all_ended_s: (completed.len() == logs.len())
                .then(|| {
                    completed
                        .iter()
                        .max()
                        .map(|last| span(start, *last).as_secs_f64())
                })
                .flatten(),
            observed_s: observed.as_secs_f64(),
            run_ms: Spread::of(&run_ms),
            tool_call_ms: Spread::of(&calls),
        }
    }
}

/// Everything `concurrency` measured, for [`report`].
pub(crate) struct Measured<'a> {
    pub(crate) args: &'a Concurrency,
    pub(crate) toren: &'a Path,
    /// After the warm-up, nothing live.
    pub(crate) baseline: Proc,
    /// With the W runs waiting and nothing else.
    pub(crate) waiting_only: Proc,
    /// With only the W waiting runs left after the tool-call runs.
    pub(crate) after_tools: Proc,
    /// The peak of each figure while the tool-call runs ran.
    pub(crate) peak: Proc,
    pub(crate) hwm_kib: u64,
    pub(crate) open_in_runs: Vec<String>,
    pub(crate) still_waiting: usize,
    pub(crate) tools: Phase,
    pub(crate) approved_all: Duration,
    pub(crate) asks: Phase,
    pub(crate) problems: &'a [String],
    pub(crate) exit: &'a anyhow::Result<(Option<i32>, Vec<String>)>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Outcome {
    benchmark: &'static str,
    measured_at: Timestamp,
    machine: Machine,
    config: Config,
    tool_runs: Phase,
    waiting_runs: Phase,
    approving_all_s: f64,
    server: Server,
    goals: Goals,
    correctness: Correctness,
}

#[derive(Debug, Serialize)]
struct Config {
    waiting: usize,
    tools: usize,
    workers: usize,
    clients: usize,
    quick: bool,
    toren: String,
    profile: String,
}

#[derive(Debug, Serialize)]
struct Server {
    baseline: Proc,
    waiting_only: Proc,
    only_waiting_after_tools: Proc,
    peak_while_tools_ran: Proc,
    vm_hwm_kib: u64,
    /// (RSS with W waiting − baseline) / W, measured before any tool-call run.
    per_waiting_run_kib: f64,
    /// The same after the tool-call runs (the allocator keeps what they freed): an upper
    /// bound.
    per_waiting_run_after_tools_kib: f64,
    descriptors_into_run_directories: Vec<String>,
    still_waiting_listed: usize,
    warnings: Vec<String>,
    exit_code: Option<i32>,
}

#[derive(Debug, Serialize)]
struct Goals {
    all_complete: bool,
    waiting_run_under_64_kib: bool,
    no_sandbox_process: bool,
    no_thread: bool,
    no_open_file: bool,
}

#[derive(Debug, Serialize)]
struct Correctness {
    all_correct: bool,
    problem_count: usize,
    problems: Vec<String>,
}

impl Outcome {
    pub(crate) fn correct(&self) -> bool {
        self.correctness.all_correct
    }

    pub(crate) fn problems(&self) -> &[String] {
        &self.correctness.problems
    }
}

/// Grows of `after` over `before`, per run.
fn per_run(after: u64, before: u64, runs: usize) -> f64 {
    (after as f64 - before as f64) / runs.max(1) as f64
}

pub(crate) fn report(m: &Measured<'_>) -> (Outcome, Table) {
    let w = m.args.waiting;
    let per_kib = per_run(m.waiting_only.rss_kib, m.baseline.rss_kib, w);
    let per_after_kib = per_run(m.after_tools.rss_kib, m.baseline.rss_kib, w);
    // "Holds no thread / file": what W waiting runs add is not per run (under one per ten).
    let not_per_run = |after: u64, before: u64| after.saturating_sub(before) * 10 < w.max(1) as u64;
    let (exit_code, warnings) = match m.exit {
        Ok((code, warnings)) => (*code, warnings.clone()),
        Err(e) => (None, vec![format!("{e:#}")]),
    };
    let mut problems = m.problems.to_vec();
    if exit_code != Some(0) {
        problems.push(format!("toren serve exited {exit_code:?} after SIGTERM"));
    }
    let goals = Goals {
        all_complete: m.tools.completed == m.args.tools && m.asks.completed == w,
        waiting_run_under_64_kib: per_kib < GOAL_KIB && per_after_kib < GOAL_KIB,
        no_sandbox_process: m.waiting_only.descendants == 0 && m.after_tools.descendants == 0,
        no_thread: not_per_run(m.waiting_only.threads, m.baseline.threads)
            && not_per_run(m.after_tools.threads, m.baseline.threads),
        no_open_file: m.open_in_runs.is_empty()
            && not_per_run(m.waiting_only.fds, m.baseline.fds)
            && not_per_run(m.after_tools.fds, m.baseline.fds),
    };
    if !goals.all_complete {
        problems.push(format!(
            "{} of {} tool-call runs and {} of {w} approved runs completed",
            m.tools.completed, m.args.tools, m.asks.completed
        ));
    }
    let count = problems.len();
    problems.truncate(SHOWN);
    let mut table = Table::default();
    let met = |yes: bool| if yes { "met" } else { "MISSED" };
    let spread = |s: &Option<Spread>| {
        s.map_or_else(
            || "–".to_owned(),
            |s| format!("{:.1} / {:.1} / {:.1} ms", s.p50_ms, s.p99_ms, s.max_ms),
        )
    };
    let secs = |s: Option<f64>| s.map_or_else(|| "–".to_owned(), |s| format!("{s:.2} s"));
    let mib = |kib: u64| format!("{:.1} MiB", kib as f64 / 1024.0);
    let proc = |p: &Proc| {
        format!(
            "RSS {}, {} threads, {} fds, {} child processes",
            mib(p.rss_kib),
            p.threads,
            p.fds,
            p.descendants
        )
    };
    table.row(
        "runs",
        format!(
            "{w} waiting for approval + {} tool-call, --workers {}",
            m.args.tools, m.args.workers
        ),
    );
    table.row(
        "tool-call runs completed",
        format!("{} of {}", m.tools.completed, m.args.tools),
    );
    table.row(
        "tool-call runs: all ended after the first POST",
        secs(m.tools.all_ended_s),
    );
    table.row(
        "tool-call run (created → end) p50/p99/max",
        spread(&m.tools.run_ms),
    );
    table.row("bash call p50/p99/max", spread(&m.tools.tool_call_ms));
    table.row(
        "approved runs completed",
        format!("{} of {w}", m.asks.completed),
    );
    table.row(
        "approving all, until all ended",
        format!("{:.2} s", m.approved_all.as_secs_f64()),
    );
    table.row(
        "approved run (decided → end) p50/p99/max",
        spread(&m.asks.run_ms),
    );
    table.row("server: baseline (after warm-up)", proc(&m.baseline));
    table.row("server: W waiting, nothing else", proc(&m.waiting_only));
    table.row("server: peak while tool-call runs ran", proc(&m.peak));
    table.row("server: only the W waiting left", proc(&m.after_tools));
    table.row("server peak RSS (VmHWM)", mib(m.hwm_kib));
    table.row(
        "memory per waiting run",
        format!(
            "{per_kib:.1} KiB ({per_after_kib:.1} KiB after the tool load) — goal < 64 KiB: {}",
            met(goals.waiting_run_under_64_kib)
        ),
    );
    table.row(
        "waiting runs hold a sandbox process",
        format!(
            "{} — {}",
            if goals.no_sandbox_process {
                "no"
            } else {
                "yes"
            },
            met(goals.no_sandbox_process)
        ),
    );
    table.row(
        "waiting runs hold threads",
        format!(
            "{} → {} over baseline — {}",
            m.baseline.threads,
            m.after_tools.threads,
            met(goals.no_thread)
        ),
    );
    table.row(
        "waiting runs hold files",
        format!(
            "{} fds into run directories; {} → {} fds — {}",
            m.open_in_runs.len(),
            m.baseline.fds,
            m.after_tools.fds,
            met(goals.no_open_file)
        ),
    );
    table.row("all complete", met(goals.all_complete));
    table.row("exit after SIGTERM", format!("{exit_code:?}"));
    table.row("problems", count.to_string());
    let outcome = Outcome {
        benchmark: "concurrency",
        measured_at: Timestamp::now(),
        machine: Machine::this(),
        config: Config {
            waiting: w,
            tools: m.args.tools,
            workers: m.args.workers,
            clients: m.args.clients,
            quick: m.args.quick,
            toren: m.toren.display().to_string(),
            profile: toren_bin::profile(m.toren),
        },
        tool_runs: m.tools.clone(),
        waiting_runs: m.asks.clone(),
        approving_all_s: m.approved_all.as_secs_f64(),
        server: Server {
            baseline: m.baseline,
            waiting_only: m.waiting_only,
            only_waiting_after_tools: m.after_tools,
            peak_while_tools_ran: m.peak,
            vm_hwm_kib: m.hwm_kib,
            per_waiting_run_kib: per_kib,
            per_waiting_run_after_tools_kib: per_after_kib,
            descriptors_into_run_directories: m.open_in_runs.clone(),
            still_waiting_listed: m.still_waiting,
            warnings,
            exit_code,
        },
        goals,
        correctness: Correctness {
            all_correct: count == 0,
            problem_count: count,
            problems,
        },
    };
    (outcome, table)
}
