//! What the load measured, as the JSON document (`Outcome`) and the human table: request
//! latencies and throughput, the time until every run had ended (from the events' own
//! timestamps, so the polling interval does not blur it), where a run's time went
//! (waiting to be claimed, the bash call), the server's resources, and whether every run
//! completed with a correct log.

use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use serde::Serialize;
use toren_protocol::{Event, EventKind, RunStatus};

use super::{Checked, Creation, Waited};
use crate::cli::ApiLoad;
use crate::report::{Machine, Table};
use crate::stats::Spread;
use crate::toren_bin;

use super::server::Sample;

/// How many problems the document and the table list (all are counted).
const SHOWN: usize = 20;

/// When one run's steps happened, from its log.
#[derive(Clone, Copy, Debug)]
pub(crate) struct RunTimes {
    created: Timestamp,
    /// The first event after `run_created`: the run was claimed and its first step done.
    first_step: Option<Timestamp>,
    /// The final event, if the run has ended.
    ended: Option<Timestamp>,
    /// `tool_started` and `tool_completed` of its (first) call.
    call: Option<(Timestamp, Timestamp)>,
}

impl RunTimes {
    pub(crate) fn of(events: &[Event]) -> Option<Self> {
        let at = |pred: fn(&EventKind) -> bool| events.iter().find(|e| pred(&e.kind)).map(|e| e.at);
        let last = events.last()?;
        let ended = matches!(
            last.kind,
            EventKind::RunCompleted(_) | EventKind::RunFailed(_) | EventKind::RunCancelled(_)
        );
        Some(Self {
            created: events.first()?.at,
            first_step: events.get(1).map(|e| e.at),
            ended: ended.then_some(last.at),
            call: at(|k| matches!(k, EventKind::ToolStarted(_)))
                .zip(at(|k| matches!(k, EventKind::ToolCompleted(_)))),
        })
    }
}

/// Everything the load measured, for [`report`].
pub(crate) struct Measured<'a> {
    pub(crate) args: &'a ApiLoad,
    pub(crate) toren: &'a Path,
    /// When the first `POST /runs` was about to be sent.
    pub(crate) wall: Timestamp,
    pub(crate) post_phase: Duration,
    /// From the first POST until the poll that saw every run ended.
    pub(crate) observed_all: Duration,
    pub(crate) created: &'a [Creation],
    pub(crate) waited: &'a Waited,
    pub(crate) checked: &'a [Checked],
    pub(crate) sampled: Sample,
    pub(crate) last: Sample,
    pub(crate) startup: Duration,
    pub(crate) warnings: usize,
    pub(crate) exit: &'a anyhow::Result<Option<i32>>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Outcome {
    benchmark: &'static str,
    measured_at: Timestamp,
    machine: Machine,
    config: Config,
    figures: Figures,
    server: ServerFigures,
    pub(crate) correctness: Correctness,
}

#[derive(Debug, Serialize)]
struct Config {
    runs: usize,
    workers: usize,
    concurrency: usize,
    sandbox: &'static str,
    quick: bool,
    toren: String,
    profile: String,
}

#[derive(Debug, Serialize)]
struct Figures {
    created: usize,
    post_phase_s: f64,
    post_throughput_per_s: f64,
    post_latency_ms: Option<Spread>,
    /// From the first POST to the last run's final event; `None` unless every run ended.
    all_ended_s: Option<f64>,
    ended_per_s: Option<f64>,
    /// A run's `run_created` to its final event.
    run_latency_ms: Option<Spread>,
    /// A run's `run_created` to its next event: queued until a worker claimed it.
    queue_wait_ms: Option<Spread>,
    /// A run's first step to its final event: how long a worker drove it.
    driving_ms: Option<Spread>,
    /// The share of the worker slots' time spent driving runs, from the first run's first
    /// step to the last run's end: near 100% means the workers were never idle (the
    /// claim loop is not what bounds the completion time).
    slots_busy_pct: Option<f64>,
    /// `tool_started` to `tool_completed`.
    tool_call_ms: Option<Spread>,
    /// One `GET /runs` poll (all pages).
    list_poll_ms: Option<Spread>,
    polls: usize,
}

#[derive(Debug, Serialize)]
struct ServerFigures {
    startup_ms: f64,
    /// VmHWM at the end: the peak resident memory of the server process.
    peak_rss_kib: u64,
    rss_at_end_kib: u64,
    peak_threads: u64,
    peak_fds: u64,
    exit_code: Option<i32>,
    exit_error: Option<String>,
    warnings: usize,
}

#[derive(Debug, Serialize)]
pub(crate) struct Correctness {
    pub(crate) all_correct: bool,
    completed: usize,
    failed: usize,
    cancelled: usize,
    not_ended: usize,
    wrong_logs: usize,
    create_errors: usize,
    poll_errors: usize,
    problem_count: usize,
    /// The first problems found.
    pub(crate) problems: Vec<String>,
}

pub(crate) fn report(m: &Measured<'_>) -> (Outcome, Table) {
    let outcome = Outcome {
        benchmark: "api-load",
        measured_at: Timestamp::now(),
        machine: Machine::this(),
        config: Config {
            runs: m.args.runs,
            workers: m.args.workers,
            concurrency: m.args.concurrency,
            sandbox: m.args.sandbox.as_str(),
            quick: m.args.quick,
            toren: m.toren.display().to_string(),
            profile: toren_bin::profile(m.toren),
        },
        figures: figures(m),
        server: server(m),
        correctness: correctness(m),
    };
    let table = table(&outcome, m);
    (outcome, table)
}

fn figures(m: &Measured<'_>) -> Figures {
    let latencies: Vec<Duration> = m
        .created
        .iter()
        .filter_map(|c| c.as_ref().ok().map(|(_, d)| *d))
        .collect();
    let times: Vec<RunTimes> = m.checked.iter().filter_map(|c| c.times).collect();
    let span = |from: Timestamp, to: Timestamp| Duration::try_from(to.duration_since(from)).ok();
    let ends: Option<Vec<Timestamp>> = times.iter().map(|t| t.ended).collect();
    let all_ended = ends
        .filter(|e| e.len() == latencies.len() && !e.is_empty())
        .and_then(|e| e.into_iter().max())
        .and_then(|last| span(m.wall, last));
    let spread = |f: &dyn Fn(&RunTimes) -> Option<Duration>| {
        Spread::of(&times.iter().filter_map(f).collect::<Vec<_>>())
    };
    let created = latencies.len();
    Figures {
        created,
        post_phase_s: m.post_phase.as_secs_f64(),
        post_throughput_per_s: created as f64 / m.post_phase.as_secs_f64().max(f64::EPSILON),
        post_latency_ms: Spread::of(&latencies),
        all_ended_s: all_ended.map(|d| d.as_secs_f64()),
        ended_per_s: all_ended.map(|d| created as f64 / d.as_secs_f64().max(f64::EPSILON)),
        run_latency_ms: spread(&|t| span(t.created, t.ended?)),
        queue_wait_ms: spread(&|t| span(t.created, t.first_step?)),
        driving_ms: spread(&|t| span(t.first_step?, t.ended?)),
        slots_busy_pct: slots_busy(&times, m.args.workers),
        tool_call_ms: spread(&|t| {
            let (started, completed) = t.call?;
            span(started, completed)
        }),
        list_poll_ms: Spread::of(&m.waited.polls),
        polls: m.waited.polls.len(),
    }
}

/// The percentage of `workers` slots' time between the first claim and the last end that
/// runs were being driven.
fn slots_busy(times: &[RunTimes], workers: usize) -> Option<f64> {
    let first = times.iter().filter_map(|t| t.first_step).min()?;
    let last = times.iter().filter_map(|t| t.ended).max()?;
    let window = Duration::try_from(last.duration_since(first)).ok()?;
    let busy: Duration = times
        .iter()
        .filter_map(|t| Duration::try_from(t.ended?.duration_since(t.first_step?)).ok())
        .sum();
    let capacity = window.as_secs_f64() * workers as f64;
    (capacity > 0.0).then(|| 100.0 * busy.as_secs_f64() / capacity)
}

fn server(m: &Measured<'_>) -> ServerFigures {
    let peak = m.sampled.max(m.last);
    let (exit_code, exit_error) = match m.exit {
        Ok(code) => (*code, None),
        Err(e) => (None, Some(format!("{e:#}"))),
    };
    ServerFigures {
        startup_ms: m.startup.as_secs_f64() * 1000.0,
        peak_rss_kib: peak.hwm_kib.max(peak.rss_kib),
        rss_at_end_kib: m.last.rss_kib,
        peak_threads: peak.threads,
        peak_fds: peak.fds,
        exit_code,
        exit_error,
        warnings: m.warnings,
    }
}

fn correctness(m: &Measured<'_>) -> Correctness {
    let count = |status: RunStatus| m.checked.iter().filter(|c| c.ended == Some(status)).count();
    let mut problems: Vec<String> = m
        .created
        .iter()
        .filter_map(|c| c.as_ref().err().cloned())
        .collect();
    let create_errors = problems.len();
    problems.extend(
        m.waited
            .stuck
            .iter()
            .map(|s| format!("not ended by the deadline: {s}")),
    );
    problems.extend(m.waited.poll_errors.iter().map(|e| format!("polling: {e}")));
    let wrong_logs = m.checked.iter().filter(|c| !c.problems.is_empty()).count();
    problems.extend(m.checked.iter().flat_map(|c| c.problems.iter().cloned()));
    match m.exit {
        Ok(Some(0)) => {}
        Ok(code) => problems.push(format!(
            "toren serve exited with {code:?} after SIGTERM, not 0"
        )),
        Err(e) => problems.push(format!("{e:#}")),
    }
    let completed = count(RunStatus::Completed);
    let problem_count = problems.len();
    problems.truncate(SHOWN);
    Correctness {
        all_correct: problem_count == 0 && completed == m.args.runs,
        completed,
        failed: count(RunStatus::Failed),
        cancelled: count(RunStatus::Cancelled),
        not_ended: m.waited.stuck.len(),
        wrong_logs,
        create_errors,
        poll_errors: m.waited.poll_errors.len(),
        problem_count,
        problems,
    }
}

fn table(o: &Outcome, m: &Measured<'_>) -> Table {
    let f = &o.figures;
    let s = &o.server;
    let c = &o.correctness;
    let mut t = Table::default();
    t.row(
        "load",
        format!(
            "{} runs, {} clients, --workers {}, TOREN_SANDBOX={}, {} build",
            o.config.runs,
            o.config.concurrency,
            o.config.workers,
            o.config.sandbox,
            o.config.profile
        ),
    );
    t.row("POST /runs latency", spread(f.post_latency_ms));
    t.row(
        "POST /runs throughput",
        format!(
            "{:.0} runs/s ({} created in {:.2} s)",
            f.post_throughput_per_s, f.created, f.post_phase_s
        ),
    );
    t.row(
        "all runs ended after",
        match (f.all_ended_s, f.ended_per_s) {
            (Some(s), Some(rate)) => format!("{s:.2} s from the first POST ({rate:.1} runs/s)"),
            _ => format!(
                "not all ended (last poll {:.1} s)",
                m.observed_all.as_secs_f64()
            ),
        },
    );
    t.row("run latency (created → ended)", spread(f.run_latency_ms));
    t.row("queue wait (created → first step)", spread(f.queue_wait_ms));
    t.row("driving (first step → ended)", spread(f.driving_ms));
    t.row(
        "worker slots busy",
        f.slots_busy_pct
            .map_or_else(|| "-".to_owned(), |p| format!("{p:.0}%")),
    );
    t.row("bash call (started → completed)", spread(f.tool_call_ms));
    t.row(
        "GET /runs poll",
        format!("{} ({} polls)", spread(f.list_poll_ms), f.polls),
    );
    t.row(
        "server peak RSS (VmHWM)",
        format!(
            "{:.1} MiB (at the end {:.1} MiB)",
            mib(s.peak_rss_kib),
            mib(s.rss_at_end_kib)
        ),
    );
    t.row(
        "server peak threads / fds",
        format!("{} / {}", s.peak_threads, s.peak_fds),
    );
    t.row("server startup", format!("{:.0} ms", s.startup_ms));
    t.row(
        "server exit after SIGTERM",
        match (&s.exit_code, &s.exit_error) {
            (_, Some(e)) => e.clone(),
            (Some(code), None) => code.to_string(),
            (None, None) => "killed by a signal".to_owned(),
        },
    );
    t.row("server warnings logged", s.warnings.to_string());
    t.row(
        "correct",
        if c.all_correct {
            format!("yes: all {} completed with correct logs", c.completed)
        } else {
            format!(
                "NO: {} completed, {} failed, {} cancelled, {} not ended, {} wrong logs, {} create errors, {} poll errors",
                c.completed, c.failed, c.cancelled, c.not_ended, c.wrong_logs, c.create_errors, c.poll_errors
            )
        },
    );
    t
}

fn spread(s: Option<Spread>) -> String {
    s.map_or_else(
        || "-".to_owned(),
        |s| {
            format!(
                "p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                s.p50_ms, s.p99_ms, s.max_ms
            )
        },
    )
}

fn mib(kib: u64) -> f64 {
    kib as f64 / 1024.0
}
