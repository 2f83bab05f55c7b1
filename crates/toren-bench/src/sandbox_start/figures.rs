//! What `sandbox-start` measured, as the table on stdout and the JSON document: p50 / p99 /
//! max of start to first output per backend against its goal (`local` under 20 ms p50,
//! `docker` under 300 ms p50), and for docker each Engine API call's share of the start.

use std::time::Duration;

use serde::Serialize;

use super::docker::Steps;
use crate::report::{Machine, Table};
use crate::stats::Spread;

pub(crate) struct Measured {
    pub(crate) quick: bool,
    pub(crate) local: Option<Vec<Duration>>,
    pub(crate) docker: Option<Vec<Duration>>,
    pub(crate) breakdown: Option<Vec<Steps>>,
    /// Start of a plain container of the same image (no options) to the end of `true`.
    pub(crate) plain: Option<Vec<Duration>>,
}

#[derive(Debug, Serialize)]
pub(crate) struct Outcome {
    pub(crate) benchmark: &'static str,
    pub(crate) machine: Machine,
    pub(crate) quick: bool,
    pub(crate) backends: Vec<BackendFigures>,
    /// The docker start path call by call (each step's spread over the same samples).
    pub(crate) docker_breakdown: Vec<Step>,
    /// `docker start -a` of a plain container of the same image running `true` (created
    /// beforehand, untimed): what the daemon and runc take for any container here.
    pub(crate) docker_plain_start: Option<Spread>,
}

#[derive(Debug, Serialize)]
pub(crate) struct BackendFigures {
    pub(crate) backend: &'static str,
    pub(crate) samples: usize,
    /// `open` → the first command's output read.
    pub(crate) start_to_first_output: Option<Spread>,
    pub(crate) goal_p50_ms: f64,
    pub(crate) goal_met: bool,
}

#[derive(Debug, Serialize)]
pub(crate) struct Step {
    pub(crate) step: &'static str,
    pub(crate) spread: Option<Spread>,
    /// This step's p50 as a share of the total's p50.
    pub(crate) share_of_p50: Option<f64>,
}

fn spread_text(s: Option<Spread>) -> String {
    s.map_or_else(
        || "–".to_owned(),
        |s| format!("{:.1} / {:.1} / {:.1} ms", s.p50_ms, s.p99_ms, s.max_ms),
    )
}

/// The steps of a docker start, in order, with how to read each from [`Steps`].
/// Reads one step's duration from a sample.
type Read = fn(&Steps) -> Duration;

const STEPS: [(&str, Read); 8] = [
    ("inspect image (open's check)", |s| s.inspect_image),
    ("inspect container (none yet)", |s| s.inspect_container),
    ("create", |s| s.create),
    ("attach", |s| s.attach),
    ("start", |s| s.start),
    ("first exec (helper ready + echo)", |s| s.first_exec),
    ("total: open to first output", |s| s.total),
    ("remove afterwards (off the path)", |s| s.remove),
];

pub(crate) fn report(m: &Measured) -> (Outcome, Table) {
    let mut table = Table::default();
    table.row("(p50 / p99 / max)", "");
    let mut backends = Vec::new();
    for (name, samples, goal) in [("local", &m.local, 20.0), ("docker", &m.docker, 300.0)] {
        let Some(samples) = samples else { continue };
        let spread = Spread::of(samples);
        let goal_met = spread.is_some_and(|s| s.p50_ms < goal);
        table.row(
            &format!("{name}: open + first output ({} sandboxes)", samples.len()),
            spread_text(spread),
        );
        table.row(
            &format!("{name}: goal"),
            format!(
                "{} (under {goal:.0} ms p50)",
                if goal_met { "met" } else { "missed" }
            ),
        );
        backends.push(BackendFigures {
            backend: name,
            samples: samples.len(),
            start_to_first_output: spread,
            goal_p50_ms: goal,
            goal_met,
        });
    }
    let mut docker_breakdown = Vec::new();
    if let Some(steps) = &m.breakdown {
        let total = Spread::of(&steps.iter().map(|s| s.total).collect::<Vec<_>>());
        for (step, read) in STEPS {
            let spread = Spread::of(&steps.iter().map(read).collect::<Vec<_>>());
            let share_of_p50 = match (spread, total) {
                (Some(s), Some(t)) if t.p50_ms > 0.0 => Some(s.p50_ms / t.p50_ms),
                _ => None,
            };
            let share = share_of_p50.map_or_else(String::new, |s| format!("  {:.0}%", s * 100.0));
            table.row(
                &format!("docker, call by call: {step}"),
                format!("{}{share}", spread_text(spread)),
            );
            docker_breakdown.push(Step {
                step,
                spread,
                share_of_p50,
            });
        }
    }
    let docker_plain_start = m.plain.as_deref().and_then(Spread::of);
    if docker_plain_start.is_some() {
        table.row(
            "docker, reference: start of a plain container running true",
            spread_text(docker_plain_start),
        );
    }
    let outcome = Outcome {
        benchmark: "sandbox-start",
        machine: Machine::this(),
        quick: m.quick,
        backends,
        docker_breakdown,
        docker_plain_start,
    };
    (outcome, table)
}
