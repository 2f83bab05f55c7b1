//! What `sse` measured, as the JSON document and the human table: `POST /runs` latency and
//! throughput, and for the fan-out the per-client delivery delay of the final event and of
//! every live event (read by the client minus journaled), with the server's resources
//! while every client follows.

use std::path::Path;
use std::time::Duration;

use jiff::Timestamp;
use serde::Serialize;
use toren_protocol::{Event, EventKind};

use super::Sse;
use super::follow::Received;
use crate::concurrency::Creation;
use crate::concurrency::serve::Proc;
use crate::report::{Machine, Table};
use crate::stats::Spread;
use crate::toren_bin;

const SHOWN: usize = 20;

pub(crate) struct Measured<'a> {
    pub(crate) args: &'a Sse,
    pub(crate) toren: &'a Path,
    pub(crate) posted: &'a [Creation],
    pub(crate) post_phase: Duration,
    pub(crate) posts_ended: Duration,
    /// The followed run's journaled log.
    pub(crate) log: &'a [Event],
    pub(crate) streams: &'a [Result<Vec<Received>, String>],
    /// From starting the clients until every one had read its first event.
    pub(crate) connected: Duration,
    pub(crate) before: Proc,
    pub(crate) following_all: Proc,
    pub(crate) peak: Proc,
    pub(crate) hwm_kib: u64,
    pub(crate) problems: Vec<String>,
    pub(crate) exit: &'a anyhow::Result<(Option<i32>, Vec<String>)>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Outcome {
    benchmark: &'static str,
    measured_at: Timestamp,
    machine: Machine,
    config: Config,
    post: Post,
    fanout: Fanout,
    correctness: Correctness,
}

#[derive(Debug, Serialize)]
struct Config {
    runs: usize,
    concurrency: usize,
    followers: usize,
    workers: usize,
    quick: bool,
    toren: String,
    profile: String,
    /// Where the load comes from.
    load: &'static str,
}

#[derive(Debug, Serialize)]
struct Post {
    created: usize,
    latency_ms: Option<Spread>,
    throughput_per_s: f64,
    all_ended_s: f64,
}

#[derive(Debug, Serialize)]
struct Fanout {
    followers: usize,
    events: usize,
    live_events: usize,
    connect_all_s: f64,
    /// Per client: the final event read minus its journaled `at`.
    final_event_delay_ms: Option<Spread>,
    /// Every live event (journaled after the clients connected), every client.
    live_event_delay_ms: Option<Spread>,
    server_before: Proc,
    server_while_following: Proc,
    server_peak: Proc,
    vm_hwm_kib: u64,
    exit_code: Option<i32>,
    warnings: Vec<String>,
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

fn delay(received: &Received) -> Option<Duration> {
    let journaled = received.journaled?;
    Some(Duration::try_from(received.at.duration_since(journaled)).unwrap_or_default())
}

pub(crate) fn report(m: Measured<'_>) -> (Outcome, Table) {
    let latencies: Vec<Duration> = m
        .posted
        .iter()
        .filter_map(|c| c.as_ref().ok().map(|c| c.1))
        .collect();
    let created = latencies.len();
    // Live: after the approval was asked (the clients connected while the run waited).
    let asked = m
        .log
        .iter()
        .find(|e| matches!(e.kind, EventKind::ApprovalRequested(_)))
        .map_or(0, |e| e.seq);
    let last = m.log.last().map_or(0, |e| e.seq);
    let ok: Vec<&Vec<Received>> = m.streams.iter().filter_map(|s| s.as_ref().ok()).collect();
    let finals: Vec<Duration> = ok
        .iter()
        .filter_map(|s| s.iter().find(|r| r.seq == last).and_then(delay))
        .collect();
    let live: Vec<Duration> = ok
        .iter()
        .flat_map(|s| s.iter().filter(|r| r.seq > asked).filter_map(delay))
        .collect();
    let (exit_code, warnings) = match m.exit {
        Ok((code, warnings)) => (*code, warnings.clone()),
        Err(e) => (None, vec![format!("{e:#}")]),
    };
    let mut problems = m.problems;
    if exit_code != Some(0) {
        problems.push(format!("toren serve exited {exit_code:?} after SIGTERM"));
    }
    let count = problems.len();
    problems.truncate(SHOWN);
    let post = Post {
        created,
        latency_ms: Spread::of(&latencies),
        throughput_per_s: created as f64 / m.post_phase.as_secs_f64().max(1e-9),
        all_ended_s: m.posts_ended.as_secs_f64(),
    };
    let fanout = Fanout {
        followers: m.args.followers,
        events: m.log.len(),
        live_events: m.log.iter().filter(|e| e.seq > asked).count(),
        connect_all_s: m.connected.as_secs_f64(),
        final_event_delay_ms: Spread::of(&finals),
        live_event_delay_ms: Spread::of(&live),
        server_before: m.before,
        server_while_following: m.following_all,
        server_peak: m.peak,
        vm_hwm_kib: m.hwm_kib,
        exit_code,
        warnings,
    };
    let spread = |s: &Option<Spread>| {
        s.map_or_else(
            || "–".to_owned(),
            |s| format!("{:.2} / {:.2} / {:.2} ms", s.p50_ms, s.p99_ms, s.max_ms),
        )
    };
    let proc = |p: &Proc| {
        format!(
            "RSS {:.1} MiB, {} threads, {} fds",
            p.rss_kib as f64 / 1024.0,
            p.threads,
            p.fds
        )
    };
    let mut table = Table::default();
    table.row(
        "load from",
        "this process (toren-bench), a second process beside toren serve",
    );
    table.row(
        "POST /runs created",
        format!(
            "{created} of {} from {} clients",
            m.args.runs, m.args.concurrency
        ),
    );
    table.row("POST /runs p50/p99/max", spread(&post.latency_ms));
    table.row(
        "POST /runs throughput",
        format!("{:.0} runs/s", post.throughput_per_s),
    );
    table.row(
        "posted runs all ended after",
        format!("{:.2} s", post.all_ended_s),
    );
    table.row(
        "followers",
        format!(
            "{} on one run ({} events, {} live)",
            fanout.followers, fanout.events, fanout.live_events
        ),
    );
    table.row(
        "all followers connected in",
        format!("{:.2} s", fanout.connect_all_s),
    );
    table.row(
        "final event, journaled → each client p50/p99/max",
        spread(&fanout.final_event_delay_ms),
    );
    table.row(
        "every live event → every client p50/p99/max",
        spread(&fanout.live_event_delay_ms),
    );
    table.row("server before the followers", proc(&fanout.server_before));
    table.row(
        "server while all follow",
        proc(&fanout.server_while_following),
    );
    table.row(
        "server peak while the run streamed",
        proc(&fanout.server_peak),
    );
    table.row(
        "server peak RSS (VmHWM)",
        format!("{:.1} MiB", m.hwm_kib as f64 / 1024.0),
    );
    table.row(
        "every client got every event once, in order",
        if count == 0 { "yes" } else { "NO" },
    );
    table.row("exit after SIGTERM", format!("{exit_code:?}"));
    table.row("problems", count.to_string());
    let outcome = Outcome {
        benchmark: "sse",
        measured_at: Timestamp::now(),
        machine: Machine::this(),
        config: Config {
            runs: m.args.runs,
            concurrency: m.args.concurrency,
            followers: m.args.followers,
            workers: m.args.workers,
            quick: m.args.quick,
            toren: m.toren.display().to_string(),
            profile: toren_bin::profile(m.toren),
            load: "toren-bench, a process of its own beside toren serve, on loopback",
        },
        post,
        fanout,
        correctness: Correctness {
            all_correct: count == 0,
            problem_count: count,
            problems,
        },
    };
    (outcome, table)
}
