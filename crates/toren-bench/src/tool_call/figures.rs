//! What `tool-call` measured, as the table on stdout and the JSON document: each latency's
//! p50 / p99 / max, and the ratios of p50s that the goals are stated in —
//! `local` within 2× of the host floor; `docker` within 3× of the host floor and at least
//! 10× faster than `docker exec`.

use std::time::Duration;

use serde::Serialize;

use super::Backend;
use super::floors::Bwrap;
use super::worker::CallTimes;
use crate::report::{Machine, Table};
use crate::stats::Spread;

/// The raw samples of one `tool-call` run.
pub(crate) struct Measured {
    pub(crate) iterations: usize,
    pub(crate) quick: bool,
    pub(crate) host: Vec<Duration>,
    /// `bash -c true` with the sandbox's environment.
    pub(crate) host_env: Vec<Duration>,
    pub(crate) bwrap: Vec<Duration>,
    /// The bwrap floor with one piece of its command line left out.
    pub(crate) bwrap_without: Vec<(Bwrap, Vec<Duration>)>,
    pub(crate) docker_exec: Option<Vec<Duration>>,
    /// The local backend's `exec` of `true` without the helper (a fresh bubblewrap each).
    pub(crate) local_fresh_exec: Option<Vec<Duration>>,
    pub(crate) backends: Vec<BackendTimes>,
}

pub(crate) struct BackendTimes {
    pub(crate) backend: Backend,
    /// The backend's `exec` of `true` in an open sandbox.
    pub(crate) exec: Vec<Duration>,
    pub(crate) calls: CallTimes,
}

/// The JSON document.
#[derive(Debug, Serialize)]
pub(crate) struct Outcome {
    pub(crate) benchmark: &'static str,
    pub(crate) machine: Machine,
    pub(crate) quick: bool,
    pub(crate) iterations: usize,
    pub(crate) floors: Floors,
    pub(crate) backends: Vec<BackendFigures>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Floors {
    /// `bash -c true` spawned directly.
    pub(crate) host: Option<Spread>,
    /// … with the sandbox's environment (`PATH`, `HOME`, `LANG`).
    pub(crate) host_sandbox_env: Option<Spread>,
    /// `bwrap <the local backend's args> bash -c true`.
    pub(crate) bwrap: Option<Spread>,
    /// … without the seccomp filter.
    pub(crate) bwrap_no_seccomp: Option<Spread>,
    /// … without a network namespace (`--share-net`).
    pub(crate) bwrap_shared_net: Option<Spread>,
    /// … running `/usr/bin/true` without bash.
    pub(crate) bwrap_no_shell: Option<Spread>,
    /// `docker exec <container> bash -c true` (Engine API: create, start, inspect).
    pub(crate) docker_exec: Option<Spread>,
    /// The local backend's `exec` of `true` without the helper: a fresh bubblewrap per
    /// command (its cgroup, rlimits and output capture on top of the bwrap floor).
    pub(crate) local_fresh_exec: Option<Spread>,
}

#[derive(Debug, Serialize)]
pub(crate) struct BackendFigures {
    pub(crate) backend: Backend,
    /// `model_responded` committed → `tool_completed` committed.
    pub(crate) tool_call: Option<Spread>,
    /// `model_responded` → `tool_started` committed.
    pub(crate) to_started: Option<Spread>,
    /// `tool_started` → `tool_completed` committed.
    pub(crate) started_to_completed: Option<Spread>,
    /// The sandbox's exec timed inside the worker.
    pub(crate) exec_in_worker: Option<Spread>,
    /// Per call, the call minus its exec (decision, appends, the worker's work).
    pub(crate) besides_exec: Option<Spread>,
    /// The backend's own exec of `true`, no worker, no journal.
    pub(crate) exec: Option<Spread>,
    /// tool call p50 / host floor p50.
    pub(crate) over_host: Option<f64>,
    /// tool call p50 / the backend's own floor p50 (bwrap for local, docker exec for docker).
    pub(crate) over_backend_floor: Option<f64>,
    /// The goal, as BENCHMARKS.md states it, and whether this run met it.
    pub(crate) goal: &'static str,
    pub(crate) goal_met: bool,
}

/// p50 of `a` / p50 of `b`.
fn ratio(a: Option<Spread>, b: Option<Spread>) -> Option<f64> {
    let (a, b) = (a?, b?);
    (b.p50_ms > 0.0).then(|| a.p50_ms / b.p50_ms)
}

fn spread_text(s: Option<Spread>) -> String {
    s.map_or_else(
        || "–".to_owned(),
        |s| format!("{:.2} / {:.2} / {:.2} ms", s.p50_ms, s.p99_ms, s.max_ms),
    )
}

fn times(r: Option<f64>) -> String {
    r.map_or_else(|| "–".to_owned(), |r| format!("{r:.2}×"))
}

pub(crate) fn report(m: &Measured) -> (Outcome, Table) {
    let without = |variant: Bwrap| {
        m.bwrap_without
            .iter()
            .find(|(v, _)| *v == variant)
            .and_then(|(_, times)| Spread::of(times))
    };
    let floors = Floors {
        host: Spread::of(&m.host),
        host_sandbox_env: Spread::of(&m.host_env),
        bwrap: Spread::of(&m.bwrap),
        bwrap_no_seccomp: without(Bwrap::NoSeccomp),
        bwrap_shared_net: without(Bwrap::SharedNet),
        bwrap_no_shell: without(Bwrap::NoShell),
        docker_exec: m.docker_exec.as_deref().and_then(Spread::of),
        local_fresh_exec: m.local_fresh_exec.as_deref().and_then(Spread::of),
    };
    let mut table = Table::default();
    table.row("calls of each kind", m.iterations.to_string());
    table.row("(p50 / p99 / max)", "");
    table.row("bash -c true (host floor)", spread_text(floors.host));
    let over_host = |label: &str, s: Option<Spread>, table: &mut Table| {
        table.row(
            label,
            format!("{}  {} host", spread_text(s), times(ratio(s, floors.host))),
        );
    };
    over_host(
        "  … with the sandbox's env (LANG etc.)",
        floors.host_sandbox_env,
        &mut table,
    );
    over_host(
        "bwrap <local args> bash -c true (local floor)",
        floors.bwrap,
        &mut table,
    );
    over_host(
        "  … without the seccomp filter",
        floors.bwrap_no_seccomp,
        &mut table,
    );
    over_host(
        "  … without a network namespace",
        floors.bwrap_shared_net,
        &mut table,
    );
    over_host(
        "  … running true without bash",
        floors.bwrap_no_shell,
        &mut table,
    );
    if floors.local_fresh_exec.is_some() {
        over_host(
            "local without the helper: exec of true",
            floors.local_fresh_exec,
            &mut table,
        );
    }
    if floors.docker_exec.is_some() {
        table.row(
            "docker exec <container> bash -c true",
            format!(
                "{}  {} host",
                spread_text(floors.docker_exec),
                times(ratio(floors.docker_exec, floors.host))
            ),
        );
    }
    let mut backends = Vec::new();
    for b in &m.backends {
        let tool_call = Spread::of(&b.calls.call);
        let exec = Spread::of(&b.exec);
        let floor = match b.backend {
            Backend::Local => floors.bwrap,
            Backend::Docker => floors.docker_exec,
        };
        let over_host = ratio(tool_call, floors.host);
        let over_backend_floor = ratio(tool_call, floor);
        let name = b.backend.as_str();
        let (goal, goal_met) = match b.backend {
            Backend::Local => (
                "tool call within 2x of the host floor, p50",
                over_host.is_some_and(|r| r <= 2.0),
            ),
            Backend::Docker => (
                "tool call within 3x of the host floor and 10x faster than docker exec, p50",
                over_host.is_some_and(|r| r <= 3.0) && over_backend_floor.is_some_and(|r| r <= 0.1),
            ),
        };
        table.row(
            &format!("{name}: exec of true (backend only)"),
            format!(
                "{}  {} host",
                spread_text(exec),
                times(ratio(exec, floors.host))
            ),
        );
        table.row(
            &format!("{name}: bash true tool call"),
            format!("{}  {} host", spread_text(tool_call), times(over_host)),
        );
        table.row(
            &format!("{name}:   model_responded → tool_started"),
            spread_text(Spread::of(&b.calls.to_started)),
        );
        table.row(
            &format!("{name}:   tool_started → tool_completed"),
            spread_text(Spread::of(&b.calls.started_to_completed)),
        );
        table.row(
            &format!("{name}:   the exec alone, inside the worker"),
            format!(
                "{}  {} host",
                spread_text(Spread::of(&b.calls.exec)),
                times(ratio(Spread::of(&b.calls.exec), floors.host))
            ),
        );
        table.row(
            &format!("{name}:   the call minus its exec"),
            spread_text(Spread::of(&b.calls.besides_exec)),
        );
        let vs_floor = match b.backend {
            Backend::Local => format!("{} of the bwrap floor", times(over_backend_floor)),
            Backend::Docker => format!(
                "{} faster than docker exec",
                times(over_backend_floor.map(|r| 1.0 / r))
            ),
        };
        table.row(&format!("{name}: tool call vs its floor"), vs_floor);
        table.row(
            &format!("{name}: goal"),
            format!("{} ({goal})", if goal_met { "met" } else { "missed" }),
        );
        backends.push(BackendFigures {
            backend: b.backend,
            tool_call,
            to_started: Spread::of(&b.calls.to_started),
            started_to_completed: Spread::of(&b.calls.started_to_completed),
            exec_in_worker: Spread::of(&b.calls.exec),
            besides_exec: Spread::of(&b.calls.besides_exec),
            exec,
            over_host,
            over_backend_floor,
            goal,
            goal_met,
        });
    }
    let outcome = Outcome {
        benchmark: "tool-call",
        machine: Machine::this(),
        quick: m.quick,
        iterations: m.iterations,
        floors,
        backends,
    };
    (outcome, table)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(v: &[u64]) -> Vec<Duration> {
        v.iter().copied().map(Duration::from_millis).collect()
    }

    #[test]
    fn goals_are_ratios_of_p50s() {
        let m = Measured {
            iterations: 3,
            quick: true,
            host: ms(&[2, 2, 2]),
            host_env: ms(&[3, 3, 3]),
            bwrap: ms(&[10, 10, 10]),
            bwrap_without: vec![(Bwrap::NoSeccomp, ms(&[9, 9, 9]))],
            docker_exec: Some(ms(&[100, 100, 100])),
            local_fresh_exec: Some(ms(&[12, 12, 12])),
            backends: vec![
                BackendTimes {
                    backend: Backend::Local,
                    exec: ms(&[12, 12, 12]),
                    calls: CallTimes {
                        call: ms(&[20, 20, 30]),
                        to_started: ms(&[1, 1, 1]),
                        started_to_completed: ms(&[19, 19, 29]),
                        exec: ms(&[15, 15, 25]),
                        besides_exec: ms(&[5, 5, 5]),
                    },
                },
                BackendTimes {
                    backend: Backend::Docker,
                    exec: ms(&[3, 3, 3]),
                    calls: CallTimes {
                        call: ms(&[5, 5, 9]),
                        to_started: ms(&[1, 1, 1]),
                        started_to_completed: ms(&[4, 4, 8]),
                        exec: ms(&[3, 3, 7]),
                        besides_exec: ms(&[2, 2, 2]),
                    },
                },
            ],
        };
        let (outcome, _) = report(&m);
        assert_eq!(outcome.floors.bwrap_no_seccomp.map(|s| s.p50_ms), Some(9.0));
        assert_eq!(outcome.floors.bwrap_shared_net, None);
        let local = &outcome.backends[0];
        assert_eq!(local.over_host, Some(10.0));
        assert_eq!(local.over_backend_floor, Some(2.0));
        assert!(!local.goal_met);
        let docker = &outcome.backends[1];
        assert_eq!(docker.over_host, Some(2.5));
        assert_eq!(docker.over_backend_floor, Some(0.05));
        assert!(docker.goal_met);
    }
}
