//! `GET /metrics`: what `toren serve` does, in the Prometheus text format (0.0.4). Two
//! sources: [`Metrics`], the [`Observer`] of this process's workers, counts tool calls and
//! times tool and model calls, keeps the live sandboxes and the claim latency as they
//! happen; at scrape time the store counts the runs by status, those awaiting approval
//! and those a worker could claim (`EventLog::count_runs`, one aggregate query). Each
//! [`Metrics`] has its own registry, so several apps in one process (tests) never share
//! a series.
//!
//! Labels stay few and bounded: a tool name is one of the toolkit's (`other` for a name
//! the model made up, `unknown` for a call this process did not see asked for), an outcome
//! `ok`, `error`, `denied` or `refused` (`seen.rs` says which), a backend one of the
//! configured backends' names. No run id or
//! command is ever a label.

mod seen;

use std::sync::{Arc, Mutex, PoisonError};
use std::time::{Duration, Instant};

use axum::extract::State;
use axum::http::header;
use axum::response::{IntoResponse, Response};
use prometheus_client::encoding::EncodeLabelSet;
use prometheus_client::encoding::prometheus_text;
use prometheus_client::metrics::counter::Counter;
use prometheus_client::metrics::family::Family;
use prometheus_client::metrics::gauge::Gauge;
use prometheus_client::metrics::histogram::Histogram;
use prometheus_client::registry::{Registry, Unit};
use toren_protocol::{Event, RunId, RunStatus};
use toren_store::RunCounts;
use toren_worker::Observer;

use crate::{AppState, Problem};
use seen::{Observed, Outcome, Runs};

/// Every run status, each reported (zero included) so that a status's series never
/// vanishes.
const STATUSES: [RunStatus; 7] = [
    RunStatus::Queued,
    RunStatus::Running,
    RunStatus::AwaitingApproval,
    RunStatus::AwaitingBudget,
    RunStatus::Completed,
    RunStatus::Failed,
    RunStatus::Cancelled,
];

/// Bucket bounds, in seconds: tools run from milliseconds (a file read) to the bash
/// timeout's minutes; models answer in a second to minutes; a claim waits up to a poll.
const TOOL_BUCKETS: [f64; 14] = [
    0.005, 0.025, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0, 120.0, 300.0, 600.0,
];
const MODEL_BUCKETS: [f64; 12] = [
    0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 20.0, 30.0, 60.0, 120.0, 300.0,
];
const CLAIM_BUCKETS: [f64; 12] = [
    0.005, 0.01, 0.05, 0.1, 0.25, 0.5, 1.0, 2.5, 5.0, 10.0, 30.0, 60.0,
];

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct ToolOutcome {
    tool: &'static str,
    outcome: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Tool {
    tool: &'static str,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Backend {
    backend: String,
}

#[derive(Clone, Debug, Hash, PartialEq, Eq, EncodeLabelSet)]
struct Status {
    status: &'static str,
}

type Histograms<L> = Family<L, Histogram, fn() -> Histogram>;

/// The metrics of one API and the workers beside it: cheap to clone, one registry. Give it
/// to the workers as (one of) their observers, call [`Metrics::claimed`] when a worker
/// claims a run, and put it in [`AppState`] for `GET /metrics`.
#[derive(Clone)]
pub struct Metrics {
    inner: Arc<Inner>,
}

struct Inner {
    registry: Registry,
    tool_calls: Family<ToolOutcome, Counter>,
    tool_seconds: Histograms<Tool>,
    model_seconds: Histogram,
    claim_seconds: Histogram,
    sandboxes: Family<Backend, Gauge>,
    runs: Family<Status, Gauge>,
    approvals_waiting: Gauge,
    queue_depth: Gauge,
    /// What this process saw of the runs it drives, until each ends.
    seen: Mutex<Runs>,
}

impl Default for Metrics {
    fn default() -> Self {
        Self::new()
    }
}

impl Metrics {
    pub fn new() -> Self {
        let mut registry = Registry::with_prefix("toren");
        let tool_calls = Family::<ToolOutcome, Counter>::default();
        // The toolkit's tools and every outcome start at zero, so that a rate sees the
        // first call (a series that appears at 1 looks like no change).
        for tool in toren_tools::TOOL_NAMES {
            for outcome in Outcome::ALL {
                let outcome = outcome.as_str();
                tool_calls.get_or_create_owned(&ToolOutcome { tool, outcome });
            }
        }
        registry.register(
            "tool_calls",
            "Tool calls that ended, by tool and outcome (ok, error, denied, refused)",
            tool_calls.clone(),
        );
        let tool_seconds: Histograms<Tool> =
            Family::new_with_constructor(|| Histogram::new(TOOL_BUCKETS));
        registry.register_with_unit(
            "tool_call_duration",
            "Time from a tool call's tool_started to its tool_completed, by tool (calls whose start this process saw)",
            Unit::Seconds,
            tool_seconds.clone(),
        );
        let model_seconds = Histogram::new(MODEL_BUCKETS);
        registry.register_with_unit(
            "model_call_duration",
            "Time from asking the model to its whole answer, for calls that were answered",
            Unit::Seconds,
            model_seconds.clone(),
        );
        let claim_seconds = Histogram::new(CLAIM_BUCKETS);
        registry.register_with_unit(
            "claim_latency",
            "Time from a run becoming claimable to a worker of this process claiming it",
            Unit::Seconds,
            claim_seconds.clone(),
        );
        let sandboxes = Family::<Backend, Gauge>::default();
        registry.register(
            "sandboxes_live",
            "Sandboxes provisioned for runs this process drives that have not ended, by backend",
            sandboxes.clone(),
        );
        let runs = Family::<Status, Gauge>::default();
        registry.register("runs", "Runs in the store, by status", runs.clone());
        let approvals_waiting = Gauge::default();
        registry.register(
            "approvals_waiting",
            "Runs waiting for a person to approve or deny a call",
            approvals_waiting.clone(),
        );
        let queue_depth = Gauge::default();
        registry.register(
            "queue_depth",
            "Runs a worker may claim now: queued or running, and nobody holds a live lease",
            queue_depth.clone(),
        );
        Self {
            inner: Arc::new(Inner {
                registry,
                tool_calls,
                tool_seconds,
                model_seconds,
                claim_seconds,
                sandboxes,
                runs,
                approvals_waiting,
                queue_depth,
                seen: Mutex::default(),
            }),
        }
    }

    /// A worker claimed a run that had been claimable for `wait`.
    pub fn claimed(&self, wait: Duration) {
        self.inner.claim_seconds.observe(wait.as_secs_f64());
    }

    /// The text of a scrape: the store's `counts` as gauges, with everything observed.
    pub fn render(&self, counts: &RunCounts) -> String {
        let inner = &self.inner;
        for status in STATUSES {
            let labels = Status {
                status: status.as_str(),
            };
            inner
                .runs
                .get_or_create(&labels)
                .set(gauge(counts.of(status)));
        }
        inner
            .approvals_waiting
            .set(gauge(counts.of(RunStatus::AwaitingApproval)));
        inner.queue_depth.set(gauge(counts.claimable));
        let mut text = String::new();
        if let Err(e) = prometheus_text::encode(&mut text, &inner.registry) {
            // Writing to a String does not fail; should it, the scrape is short, not wrong.
            tracing::warn!("cannot encode the metrics: {e}");
        }
        text
    }

    fn apply(&self, observed: Observed) {
        let inner = &self.inner;
        match observed {
            Observed::ToolEnded {
                tool,
                outcome,
                took,
            } => {
                let outcome = outcome.as_str();
                inner
                    .tool_calls
                    .get_or_create(&ToolOutcome { tool, outcome })
                    .inc();
                if let Some(took) = took {
                    inner
                        .tool_seconds
                        .get_or_create(&Tool { tool })
                        .observe(took.as_secs_f64());
                }
            }
            Observed::SandboxOpened(backend) => {
                self.backend_gauge(&backend).inc();
            }
            Observed::SandboxClosed(backend) => {
                self.backend_gauge(&backend).dec();
            }
        }
    }

    fn backend_gauge(&self, backend: &str) -> Gauge {
        self.inner.sandboxes.get_or_create_owned(&Backend {
            backend: backend.to_owned(),
        })
    }
}

/// A count as a gauge value (counts never come near `i64::MAX`).
fn gauge(count: u64) -> i64 {
    i64::try_from(count).unwrap_or(i64::MAX)
}

impl Observer for Metrics {
    fn event(&self, event: &Event) {
        let now = Instant::now();
        let observed = self
            .inner
            .seen
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .event(event, now);
        observed.into_iter().for_each(|o| self.apply(o));
    }

    fn model_call(&self, _run: &RunId, elapsed: Duration) {
        self.inner.model_seconds.observe(elapsed.as_secs_f64());
    }
}

/// `GET /metrics`: the store's counts and this process's observations; 503 when the store
/// does not answer (the scrape fails rather than report stale counts).
#[utoipa::path(
    get,
    path = "/metrics",
    operation_id = "metrics",
    tag = "service",
    responses(
        (
            status = 200,
            description = "The metrics in the Prometheus text format, version 0.0.4: runs by status, approvals waiting, queue depth, tool calls by tool and outcome, tool-call, model-call and claim latency histograms, live sandboxes by backend",
            content_type = "text/plain; version=0.0.4; charset=utf-8",
            body = String,
        ),
        (status = 503, description = "The store does not answer"),
    )
)]
pub(crate) async fn scrape(State(state): State<AppState>) -> Result<Response, Problem> {
    let counts = state.service.store().count_runs().await.map_err(|e| {
        tracing::warn!(error = %e, "metrics: the store does not answer");
        Problem::new(
            axum::http::StatusCode::SERVICE_UNAVAILABLE,
            "the store does not answer; the server's log says why",
        )
    })?;
    let text = state.metrics.render(&counts);
    Ok((
        [(header::CONTENT_TYPE, prometheus_text::CONTENT_TYPE)],
        text,
    )
        .into_response())
}

/// The worker pool tells how long each run it claimed waited (`toren_claim_wait_seconds`).
impl toren_runtime::pool::ClaimObserver for Metrics {
    fn claimed(&self, waited: Duration) {
        Metrics::claimed(self, waited);
    }
}
