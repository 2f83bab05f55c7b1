//! The load's HTTP client: `POST /runs` timed from sending to the whole answer read,
//! the runs that have not ended (`GET /runs?status=…`, following `next_cursor`), and
//! a run's journaled events (`?format=json`). Any answer but the documented one is an
//! error naming the route and the status.

use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use serde::Deserialize;
use toren_protocol::{Event, RunStatus};

/// The largest page `GET /runs` serves.
const PAGE: u32 = 1000;
/// How long any one request may take.
const REQUEST: Duration = Duration::from_secs(60);

#[derive(Clone)]
pub(crate) struct Api {
    client: reqwest::Client,
    base: String,
    token: String,
}

/// A run as `GET /runs` lists it (the fields the load reads).
#[derive(Debug, Deserialize)]
pub(crate) struct Listed {
    pub(crate) id: String,
    pub(crate) status: RunStatus,
    pub(crate) last_seq: u64,
}

#[derive(Deserialize)]
struct Page {
    runs: Vec<Listed>,
    /// Where the next page starts; none on the last page.
    #[serde(default)]
    next_cursor: Option<String>,
}

#[derive(Deserialize)]
struct Created {
    id: String,
}

impl Api {
    pub(crate) fn new(base: &str, token: &str) -> anyhow::Result<Self> {
        let client = reqwest::Client::builder()
            .timeout(REQUEST)
            .build()
            .context("cannot build the HTTP client")?;
        Ok(Self {
            client,
            base: base.to_owned(),
            token: token.to_owned(),
        })
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
            .bearer_auth(&self.token)
            .json(&serde_json::json!({ "agent": agent, "input": input }))
            .send()
            .await
            .context("POST /runs")?;
        let status = response.status();
        let body = response
            .bytes()
            .await
            .context("POST /runs: reading the answer")?;
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

    /// Every run the server lists that has not ended (`?status=` the statuses that are
    /// not terminal), following its pages.
    pub(crate) async fn unfinished(&self) -> anyhow::Result<Vec<Listed>> {
        let mut runs = Vec::new();
        let mut cursor: Option<String> = None;
        loop {
            let mut url = format!(
                "{}/runs?status=queued,running,awaiting_approval&limit={PAGE}",
                self.base
            );
            if let Some(cursor) = &cursor {
                url.push_str("&cursor=");
                url.push_str(&encode(cursor));
            }
            let request = self.client.get(url).bearer_auth(&self.token);
            let page: Page = ok(request.send().await, "GET /runs").await?;
            runs.extend(page.runs);
            match page.next_cursor {
                Some(next) if cursor.as_ref() != Some(&next) => cursor = Some(next),
                _ => return Ok(runs),
            }
        }
    }

    /// `GET /runs/{id}/events?format=json`.
    pub(crate) async fn events(&self, run: &str) -> anyhow::Result<Vec<Event>> {
        let request = self
            .client
            .get(format!(
                "{}/runs/{}/events?format=json",
                self.base,
                encode(run)
            ))
            .bearer_auth(&self.token);
        ok(request.send().await, "GET /runs/{id}/events").await
    }
}

/// The body of a 2xx answer as `T`; anything else as an error naming `route`.
async fn ok<T: serde::de::DeserializeOwned>(
    sent: reqwest::Result<reqwest::Response>,
    route: &str,
) -> anyhow::Result<T> {
    let response = sent.with_context(|| route.to_owned())?;
    let status = response.status();
    let body = response
        .bytes()
        .await
        .with_context(|| format!("{route}: reading the answer"))?;
    if !status.is_success() {
        bail!(
            "{route} answered {status}: {}",
            String::from_utf8_lossy(&body)
        );
    }
    serde_json::from_slice(&body).with_context(|| format!("{route}: unexpected answer"))
}

/// `raw` percent-encoded for a URL's path segment or query value (all but unreserved
/// characters).
fn encode(raw: &str) -> String {
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

#[cfg(test)]
mod tests {
    #[test]
    fn cursors_are_percent_encoded() {
        assert_eq!(super::encode("run_01AB-x.~"), "run_01AB-x.~");
        assert_eq!(super::encode("a+b/c=="), "a%2Bb%2Fc%3D%3D");
    }
}
