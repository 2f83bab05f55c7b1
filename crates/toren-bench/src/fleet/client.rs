//! The fleet benchmark's HTTP client of the front (create a run, whether any is
//! unfinished, a run's events) and the steps built on it: a backlog created 16 requests
//! at a time, waiting until it is drained, every log read and checked.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use toren_protocol::Event;

use super::procs::{self, Front, Home, TOKEN};
use super::workload::{AGENT, Workload};

/// The minimal HTTP client of the front.
pub(crate) struct Api {
    client: reqwest::Client,
    base: String,
}

impl Api {
    pub(crate) fn new(front: &Front) -> anyhow::Result<Self> {
        Ok(Self {
            client: reqwest::Client::builder()
                .timeout(Duration::from_secs(60))
                .build()?,
            base: front.base.clone(),
        })
    }

    pub(crate) async fn create(&self, input: String) -> anyhow::Result<String> {
        let r = self
            .client
            .post(format!("{}/runs", self.base))
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({"agent": AGENT, "input": input}))
            .send()
            .await
            .context("POST /runs")?;
        let status = r.status();
        let body: serde_json::Value = r.json().await.context("POST /runs: the answer")?;
        if status != reqwest::StatusCode::ACCEPTED {
            bail!("POST /runs answered {status}: {body}");
        }
        body["id"]
            .as_str()
            .map(str::to_owned)
            .context("POST /runs: no id")
    }

    /// Whether no run is queued, running or awaiting approval.
    async fn drained(&self) -> anyhow::Result<bool> {
        let r = self
            .client
            .get(format!(
                "{}/runs?status=queued,running,awaiting_approval&limit=1",
                self.base
            ))
            .bearer_auth(TOKEN)
            .send()
            .await
            .context("GET /runs")?;
        let body: serde_json::Value = r.error_for_status()?.json().await?;
        Ok(body["runs"].as_array().is_some_and(Vec::is_empty))
    }

    async fn events(&self, run: &str) -> anyhow::Result<Vec<Event>> {
        let r = self
            .client
            .get(format!("{}/runs/{run}/events?format=json", self.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .context("GET events")?;
        Ok(r.error_for_status()?.json().await?)
    }
}

/// Creates `n` runs, 16 requests at a time; their ids in order.
pub(crate) async fn create_runs(api: &Api, n: usize) -> anyhow::Result<Vec<String>> {
    let mut ids = Vec::with_capacity(n);
    for chunk in (0..n).collect::<Vec<_>>().chunks(16) {
        let made =
            futures::future::join_all(chunk.iter().map(|i| api.create(format!("fleet run {i}"))))
                .await;
        for id in made {
            ids.push(id?);
        }
    }
    Ok(ids)
}

/// Waits until no run is left unfinished, failing if a worker exits or `timeout` passes.
pub(crate) async fn drain(
    api: &Api,
    home: &Home,
    workers: &mut [tokio::process::Child],
    timeout: Duration,
) -> anyhow::Result<()> {
    let deadline = Instant::now() + timeout;
    loop {
        if api.drained().await? {
            return Ok(());
        }
        if let Some(status) = procs::exited(workers) {
            bail!(
                "a worker exited ({status}) under load: {}",
                home.tail("worker-0.log")
            );
        }
        if Instant::now() > deadline {
            bail!(
                "runs were still unfinished after {timeout:?}: {}",
                home.tail("worker-0.log")
            );
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// Reads every run's log, records what is wrong with it.
pub(crate) async fn logs(
    api: &Api,
    ids: &[String],
    workload: Workload,
    problems: &mut Vec<String>,
) -> anyhow::Result<Vec<Vec<Event>>> {
    let mut all = Vec::with_capacity(ids.len());
    for id in ids {
        let events = api.events(id).await?;
        problems.extend(workload.problems(id, &events));
        all.push(events);
    }
    Ok(all)
}
