//! The HTTP calls of the `concurrency` and `sse` benchmarks: `POST /runs` (timed until the
//! whole answer is read), the runs listed with given statuses (all pages), a run's
//! journaled events, its pending approvals and a decision. Any answer but the documented
//! one is an error naming the route and the status.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde::Deserialize;
use toren_protocol::Event;

use super::serve::TOKEN;

/// The largest page `GET /runs` serves.
const PAGE: u32 = 1000;
/// How long any one request may take.
const REQUEST: Duration = Duration::from_secs(120);

#[derive(Clone)]
pub(crate) struct Api {
    client: reqwest::Client,
    pub(crate) base: String,
}

/// A run as `GET /runs` lists it (the field read here).
#[derive(Debug, Deserialize)]
pub(crate) struct Listed {
    pub(crate) id: String,
}

#[derive(Deserialize)]
struct Page {
    runs: Vec<Listed>,
    #[serde(default)]
    next_cursor: Option<String>,
}

#[derive(Deserialize)]
struct Created {
    id: String,
}

#[derive(Deserialize)]
struct Approvals {
    pending: Vec<Pending>,
}

#[derive(Deserialize)]
struct Pending {
    call_id: String,
}

impl Api {
    pub(crate) fn new(base: &str) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(REQUEST)
            .build()
            .context("cannot build the HTTP client")?;
        Ok(Self {
            client,
            base: base.to_owned(),
        })
    }

    /// A client without the overall timeout, for streams that last as long as a run.
    pub(crate) fn streaming() -> anyhow::Result<reqwest::Client> {
        reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(30))
            .build()
            .context("cannot build the HTTP client")
    }

    /// `POST /runs`: the new run's id and how long the request took.
    pub(crate) async fn create(
        &self,
        agent: &str,
        input: &str,
    ) -> anyhow::Result<(String, Duration)> {
        let started = Instant::now();
        let response = self
            .client
            .post(format!("{}/runs", self.base))
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({ "agent": agent, "input": input }))
            .send()
            .await
            .context("POST /runs")?;
        let status = response.status();
        let body = response.bytes().await.context("POST /runs: the answer")?;
        let took = started.elapsed();
        if status != reqwest::StatusCode::ACCEPTED {
            bail!(
                "POST /runs answered {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        let created: Created =
            serde_json::from_slice(&body).context("POST /runs: the answer is not a run")?;
        Ok((created.id, took))
    }

    /// Every run listed with one of `statuses` (e.g. `queued,running`), all pages.
    pub(crate) async fn listed(&self, statuses: &str) -> anyhow::Result<Vec<Listed>> {
        let mut runs = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = format!("{}/runs?status={statuses}&limit={PAGE}", self.base);
            if let Some(cursor) = &cursor {
                url.push_str("&cursor=");
                url.push_str(&encode(cursor));
            }
            let page: Page = self.get(&url, "GET /runs").await?;
            runs.extend(page.runs);
            match page.next_cursor {
                Some(next) if cursor.as_ref() != Some(&next) => cursor = Some(next),
                _ => return Ok(runs),
            }
        }
    }

    /// `GET /runs/{id}/events?format=json`.
    pub(crate) async fn events(&self, run: &str) -> anyhow::Result<Vec<Event>> {
        let url = format!("{}/runs/{}/events?format=json", self.base, encode(run));
        self.get(&url, "GET /runs/{id}/events").await
    }

    /// The call ids of the run's pending approvals.
    pub(crate) async fn pending(&self, run: &str) -> anyhow::Result<Vec<String>> {
        let url = format!("{}/runs/{}/approvals", self.base, encode(run));
        let approvals: Approvals = self.get(&url, "GET /runs/{id}/approvals").await?;
        Ok(approvals.pending.into_iter().map(|p| p.call_id).collect())
    }

    /// `POST /runs/{id}/approvals/{call}` approving the call.
    pub(crate) async fn approve(&self, run: &str, call: &str) -> anyhow::Result<()> {
        let route = "POST /runs/{id}/approvals/{call}";
        let response = self
            .client
            .post(format!(
                "{}/runs/{}/approvals/{}",
                self.base,
                encode(run),
                encode(call)
            ))
            .bearer_auth(TOKEN)
            .json(&serde_json::json!({ "decision": "approve" }))
            .send()
            .await
            .context(route)?;
        let status = response.status();
        if !status.is_success() {
            let body = response.text().await.unwrap_or_default();
            bail!("{route} answered {status}: {body}");
        }
        Ok(())
    }

    async fn get<T: serde::de::DeserializeOwned>(
        &self,
        url: &str,
        route: &str,
    ) -> anyhow::Result<T> {
        let response = self
            .client
            .get(url)
            .bearer_auth(TOKEN)
            .send()
            .await
            .with_context(|| route.to_owned())?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .with_context(|| format!("{route}: the answer"))?;
        if !status.is_success() {
            bail!(
                "{route} answered {status}: {}",
                String::from_utf8_lossy(&body)
            );
        }
        serde_json::from_slice(&body).with_context(|| format!("{route}: unexpected answer"))
    }
}

/// `raw` percent-encoded for a path segment or query value.
pub(crate) fn encode(raw: &str) -> String {
    let mut out = String::with_capacity(raw.len());
    for byte in raw.bytes() {
        if byte.is_ascii_alphanumeric() || b"-._~".contains(&byte) {
            out.push(char::from(byte));
        } else {
            out.push_str(&format!("%{byte:02X}"));
        }
    }
    out
}
