//! `GET /metrics` through the router: scripted runs driven by a real worker (real SQLite,
//! the real `local` backend) whose observer is the app's `Metrics`, scraped and parsed as
//! Prometheus text.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::BTreeMap;
use std::time::{Duration, Instant};

use axum::http::StatusCode;
use serde_json::json;
use support::{Home, TOKEN};

/// A sample's labels, sorted, as `k=v` pairs.
type Labels = Vec<(String, String)>;

/// The samples of a scrape: metric name → labels → value.
#[derive(Debug)]
struct Scrape {
    samples: BTreeMap<String, BTreeMap<Labels, f64>>,
    /// `# HELP` and `# TYPE` lines: name → (help, type).
    families: BTreeMap<String, (String, String)>,
}

impl Scrape {
    fn parse(text: &str) -> Self {
        let mut samples: BTreeMap<String, BTreeMap<Labels, f64>> = BTreeMap::new();
        let mut helps = BTreeMap::new();
        let mut types = BTreeMap::new();
        for line in text.lines().filter(|l| !l.is_empty()) {
            if let Some(rest) = line.strip_prefix("# HELP ") {
                let (name, help) = rest.split_once(' ').unwrap();
                helps.insert(name.to_owned(), help.to_owned());
                continue;
            }
            if let Some(rest) = line.strip_prefix("# TYPE ") {
                let (name, kind) = rest.split_once(' ').unwrap();
                types.insert(name.to_owned(), kind.to_owned());
                continue;
            }
            assert!(!line.starts_with('#'), "an unexpected comment: {line}");
            let (series, value) = line.rsplit_once(' ').unwrap();
            let value: f64 = value.parse().unwrap_or_else(|e| panic!("{e}: {line}"));
            let (name, labels) = match series.split_once('{') {
                Some((name, rest)) => (name, parse_labels(rest.strip_suffix('}').unwrap())),
                None => (series, Vec::new()),
            };
            samples
                .entry(name.to_owned())
                .or_default()
                .insert(labels, value);
        }
        assert_eq!(
            helps.keys().collect::<Vec<_>>(),
            types.keys().collect::<Vec<_>>(),
            "every family has both HELP and TYPE"
        );
        let families = helps
            .into_iter()
            .map(|(name, help)| {
                let kind = types[&name].clone();
                (name, (help, kind))
            })
            .collect();
        Self { samples, families }
    }

    /// The value of `name` with exactly `labels`; `None` if there is no such sample.
    fn get(&self, name: &str, labels: &[(&str, &str)]) -> Option<f64> {
        let mut want: Labels = labels
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect();
        want.sort();
        self.samples.get(name)?.get(&want).copied()
    }

    fn value(&self, name: &str, labels: &[(&str, &str)]) -> f64 {
        self.get(name, labels)
            .unwrap_or_else(|| panic!("no sample {name} {labels:?} in {:#?}", self.samples))
    }

    /// Every sample of `name`, by its labels' values in order of the label names.
    fn by_labels(&self, name: &str) -> BTreeMap<Vec<String>, f64> {
        self.samples
            .get(name)
            .map(|series| {
                series
                    .iter()
                    .map(|(labels, v)| (labels.iter().map(|(_, v)| v.clone()).collect(), *v))
                    .collect()
            })
            .unwrap_or_default()
    }
}

fn parse_labels(text: &str) -> Labels {
    let mut labels: Labels = text
        .split("\",")
        .filter(|pair| !pair.is_empty())
        .map(|pair| {
            let (k, v) = pair.split_once("=\"").unwrap();
            (k.to_owned(), v.trim_end_matches('"').to_owned())
        })
        .collect();
    labels.sort();
    labels
}

async fn scrape(home: &Home) -> Scrape {
    let reply = home.get("/metrics").await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    Scrape::parse(&reply.text())
}

/// Scrapes until `until` holds (the worker gets there on its own task).
async fn scrape_until(home: &Home, what: &str, until: impl Fn(&Scrape) -> bool) -> Scrape {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        let metrics = scrape(home).await;
        if until(&metrics) {
            return metrics;
        }
        assert!(Instant::now() < deadline, "never {what}: {metrics:#?}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The samples that counted something.
fn nonzero(samples: BTreeMap<Vec<String>, f64>) -> BTreeMap<Vec<String>, f64> {
    samples.into_iter().filter(|(_, v)| *v != 0.0).collect()
}

fn strings(values: &[&str]) -> Vec<String> {
    values.iter().map(|v| (*v).to_owned()).collect()
}

/// Runs by status, every status listed.
fn runs_by_status(metrics: &Scrape) -> BTreeMap<Vec<String>, f64> {
    metrics.by_labels("toren_runs")
}

fn statuses(
    queued: f64,
    running: f64,
    awaiting: f64,
    completed: f64,
) -> BTreeMap<Vec<String>, f64> {
    [
        ("queued", queued),
        ("running", running),
        ("awaiting_approval", awaiting),
        ("awaiting_budget", 0.0),
        ("completed", completed),
        ("failed", 0.0),
        ("cancelled", 0.0),
    ]
    .into_iter()
    .map(|(status, n)| (strings(&[status]), n))
    .collect()
}

#[tokio::test]
async fn tool_calls_are_counted_by_tool_and_outcome_and_the_store_gauges_follow_the_run() {
    let home = Home::new().await;
    // Approval always: an approved call that runs, a denied one, bash arguments that do
    // not decode (refused unasked), a tool the toolkit does not have (runs, and fails).
    home.agent(
        "careful",
        "turns:\n\
         \x20 - tool_calls:\n      - bash: {command: \"echo hi\"}\n\
         \x20 - tool_calls:\n      - bash: {command: \"rm -rf notes\"}\n\
         \x20 - tool_calls:\n      - bash: {cmd: \"ls\"}\n\
         \x20 - tool_calls:\n      - fly: {to: \"moon\"}\n\
         \x20 - text: \"done\"\n",
        true,
    );
    let id = home.create("careful", "go").await.json()["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // Created and not claimed yet: queued.
    let queued = scrape(&home).await;
    assert_eq!(runs_by_status(&queued), statuses(1.0, 0.0, 0.0, 0.0));
    assert_eq!(queued.value("toren_queue_depth", &[]), 1.0);
    assert_eq!(queued.value("toren_approvals_waiting", &[]), 0.0);

    let driving = home.spawn_drive(&id).await;
    let call = home.pending_call(&id).await;
    let waiting = scrape(&home).await;
    assert_eq!(runs_by_status(&waiting), statuses(0.0, 0.0, 1.0, 0.0));
    assert_eq!(waiting.value("toren_approvals_waiting", &[]), 1.0);
    // Its driver holds its lease: no other worker may claim it.
    assert_eq!(waiting.value("toren_queue_depth", &[]), 0.0);

    let decide = |call: String, decision: &'static str| {
        let path = format!("/runs/{id}/approvals/{call}");
        let home = &home;
        async move {
            let reply = home.post(&path, json!({ "decision": decision })).await;
            assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        }
    };
    decide(call, "approve").await;
    // The next pending call is the second one (the first is decided).
    let second = home.pending_call(&id).await;
    decide(second, "deny").await;
    driving.await.unwrap();
    assert_eq!(
        home.get(&format!("/runs/{id}")).await.json()["status"],
        "completed"
    );

    let done = scrape(&home).await;
    assert_eq!(
        nonzero(done.by_labels("toren_tool_calls_total")),
        BTreeMap::from([
            (strings(&["error", "other"]), 1.0),
            (strings(&["ok", "bash"]), 1.0),
            (strings(&["denied", "bash"]), 1.0),
            (strings(&["refused", "bash"]), 1.0),
        ]),
        "by (outcome, tool): {done:#?}"
    );
    // Timed: only the calls that ran, from their tool_started to their tool_completed.
    assert_eq!(
        done.by_labels("toren_tool_call_duration_seconds_count"),
        BTreeMap::from([(strings(&["bash"]), 1.0), (strings(&["other"]), 1.0)])
    );
    assert_eq!(
        done.value(
            "toren_tool_call_duration_seconds_bucket",
            &[("tool", "bash"), ("le", "+Inf")]
        ),
        1.0
    );
    // Five model calls, one per scripted turn.
    assert_eq!(
        done.value("toren_model_call_duration_seconds_count", &[]),
        5.0
    );
    assert_eq!(runs_by_status(&done), statuses(0.0, 0.0, 0.0, 1.0));
    assert_eq!(done.value("toren_queue_depth", &[]), 0.0);
    assert_eq!(done.value("toren_approvals_waiting", &[]), 0.0);
    // The sandbox opened for the approved call closed with the run.
    assert_eq!(
        done.value("toren_sandboxes_live", &[("backend", "local")]),
        0.0
    );
}

#[tokio::test]
async fn a_call_denied_while_no_worker_watched_is_counted_denied() {
    let home = Home::new().await;
    home.agent(
        "careful",
        "turns:\n  - tool_calls:\n      - bash: {command: \"touch ran.txt\"}\n  - text: \"done\"\n",
        true,
    );
    let id = home.create("careful", "go").await.json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let driving = home.spawn_drive(&id).await;
    let call = home.pending_call(&id).await;
    // The driver goes away while the run waits (as a parked run's does); the decision is
    // recorded with nobody watching, and the next drive finds it in the log.
    driving.abort();
    assert!(driving.await.unwrap_err().is_cancelled());
    let path = format!("/runs/{id}/approvals/{call}");
    let reply = home.post(&path, json!({ "decision": "deny" })).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    home.drive(&id).await;

    let done = scrape(&home).await;
    assert_eq!(
        nonzero(done.by_labels("toren_tool_calls_total")),
        BTreeMap::from([(strings(&["denied", "bash"]), 1.0)])
    );
    assert_eq!(
        done.by_labels("toren_tool_call_duration_seconds_count"),
        BTreeMap::new(),
        "a call that never ran is not timed"
    );
    assert_eq!(runs_by_status(&done), statuses(0.0, 0.0, 0.0, 1.0));
}

#[tokio::test]
async fn a_sandbox_is_live_while_its_run_runs_a_command_and_closes_when_the_run_ends() {
    let home = Home::new().await;
    home.agent(
        "slow",
        "turns:\n  - tool_calls:\n      - bash: {command: \"while [ ! -f go ]; do sleep 0.02; done\"}\n  - text: \"done\"\n",
        true,
    );
    std::fs::write(
        home.dir.path().join("agents/slow.yaml"),
        "name: slow\nmodel: scripted/slow.script.yaml\nsandbox:\n  approval: never\n",
    )
    .unwrap();
    let before = scrape(&home).await;
    assert_eq!(before.by_labels("toren_sandboxes_live"), BTreeMap::new());
    let id = home.create("slow", "go").await.json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let driving = home.spawn_drive(&id).await;

    let running = scrape_until(&home, "a live sandbox", |m| {
        m.get("toren_sandboxes_live", &[("backend", "local")]) == Some(1.0)
    })
    .await;
    assert_eq!(runs_by_status(&running), statuses(0.0, 1.0, 0.0, 0.0));
    assert_eq!(running.value("toren_queue_depth", &[]), 0.0);
    // Not ended yet: neither counted nor timed.
    assert_eq!(
        nonzero(running.by_labels("toren_tool_calls_total")),
        BTreeMap::new()
    );

    std::fs::write(home.workspace(&id).join("go"), "").unwrap();
    driving.await.unwrap();
    let done = scrape(&home).await;
    assert_eq!(
        done.by_labels("toren_sandboxes_live"),
        BTreeMap::from([(strings(&["local"]), 0.0)])
    );
    assert_eq!(
        done.value(
            "toren_tool_calls_total",
            &[("tool", "bash"), ("outcome", "ok")]
        ),
        1.0
    );
    assert_eq!(
        done.value(
            "toren_tool_call_duration_seconds_count",
            &[("tool", "bash")]
        ),
        1.0
    );
    assert_eq!(runs_by_status(&done), statuses(0.0, 0.0, 0.0, 1.0));
}

#[tokio::test]
async fn metrics_need_the_token_and_speak_prometheus_text() {
    let home = Home::new().await;
    for token in [None, Some("wrong")] {
        let reply = home.call("GET", "/metrics", token, None).await;
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED, "{token:?}");
        assert_eq!(reply.content_type(), "application/problem+json");
    }
    let reply = home.call("GET", "/metrics", Some(TOKEN), None).await;
    assert_eq!(reply.status, StatusCode::OK);
    assert_eq!(
        reply.content_type(),
        "text/plain; version=0.0.4; charset=utf-8"
    );
    let metrics = Scrape::parse(&reply.text());
    let families: BTreeMap<&str, &str> = metrics
        .families
        .iter()
        .map(|(name, (_, kind))| (name.as_str(), kind.as_str()))
        .collect();
    assert_eq!(
        families,
        BTreeMap::from([
            ("toren_approvals_waiting", "gauge"),
            ("toren_claim_latency_seconds", "histogram"),
            ("toren_model_call_duration_seconds", "histogram"),
            ("toren_queue_depth", "gauge"),
            ("toren_runs", "gauge"),
            ("toren_tool_calls_total", "counter"),
        ]),
        "the families by tool and backend appear with their first series"
    );
    // Every tool and outcome starts at zero, so a rate sees the first call.
    assert_eq!(
        metrics.value(
            "toren_tool_calls_total",
            &[("tool", "bash"), ("outcome", "denied")]
        ),
        0.0
    );
    assert_eq!(metrics.by_labels("toren_tool_calls_total").len(), 5 * 4);
    for (name, (help, _)) in &metrics.families {
        assert!(help.len() > 20, "{name} has a real HELP: {help}");
    }
    // Nothing observed yet: empty histograms still report their count.
    assert_eq!(
        metrics.value("toren_model_call_duration_seconds_count", &[]),
        0.0
    );
    assert_eq!(metrics.value("toren_claim_latency_seconds_count", &[]), 0.0);
    assert_eq!(runs_by_status(&metrics), statuses(0.0, 0.0, 0.0, 0.0));
}

#[tokio::test]
async fn a_scrape_is_503_when_the_store_does_not_answer() {
    let home = Home::new().await;
    home.close_store().await;
    let reply = home.get("/metrics").await;
    assert_eq!(
        reply.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        reply.text()
    );
    assert_eq!(reply.content_type(), "application/problem+json");
}

#[test]
fn claims_are_timed_and_each_metrics_has_its_own_registry() {
    let counts = toren_store::RunCounts::default();
    let claims = toren_server::Metrics::new();
    claims.claimed(Duration::from_millis(300));
    claims.claimed(Duration::from_secs(20));
    let other = toren_server::Metrics::new();
    let seen = Scrape::parse(&claims.render(&counts));
    assert_eq!(seen.value("toren_claim_latency_seconds_count", &[]), 2.0);
    assert_eq!(
        seen.value("toren_claim_latency_seconds_bucket", &[("le", "0.5")]),
        1.0
    );
    assert_eq!(
        seen.value("toren_claim_latency_seconds_bucket", &[("le", "30")]),
        2.0
    );
    assert!((seen.value("toren_claim_latency_seconds_sum", &[]) - 20.3).abs() < 1e-9);
    let untouched = Scrape::parse(&other.render(&counts));
    assert_eq!(
        untouched.value("toren_claim_latency_seconds_count", &[]),
        0.0
    );
}
