//! The few E2B endpoints Toren needs, by hand over reqwest (no E2B crate exists for Rust,
//! and the SDKs' defaults — a 60 s command deadline, no keep-alive — are what Toren must
//! avoid). Control plane: create, connect, timeout, pause, kill, list by metadata, each
//! with `X-API-Key`, errors mapped to [`Error`] by status and E2B's `{code, message}` body
//! (or whatever a proxy sent: HTML is cut short, never shown whole). Data plane: envd's
//! unary Connect calls and `/files`, with `X-Access-Token` and the `E2b-Sandbox-Id` /
//! `E2b-Sandbox-Port` routing headers; its server stream is `stream`. Transient failures
//! (429, capacity, 5xx, network) are retried with backoff by [`Client::retrying`].

use std::collections::BTreeMap;
use std::time::Duration;

use reqwest::{Method, RequestBuilder, StatusCode};
use serde::Deserialize;
use serde_json::{Value, json};

use crate::error::{Error, Result};

/// envd's port inside the VM.
pub const ENVD_PORT: u16 = 49983;
/// How long one control-plane call may take.
const CALL_TIMEOUT: Duration = Duration::from_secs(60);
/// Tries of a retryable call, with the waits between them.
const BACKOFF: &[Duration] = &[
    Duration::from_millis(200),
    Duration::from_millis(500),
    Duration::from_secs(1),
    Duration::from_secs(2),
    Duration::from_secs(4),
    Duration::from_secs(8),
];

/// Where E2B is and who Toren is to it.
#[derive(Clone)]
pub struct Endpoints {
    /// `X-API-Key`. Never logged, never sent to a sandbox.
    pub api_key: String,
    /// The control plane (`E2B_API_URL`, else `https://api.<domain>`).
    pub api_url: String,
    /// The data plane (`E2B_SANDBOX_URL`, else `https://sandbox.<domain>`), where the
    /// routing headers pick the sandbox.
    pub sandbox_url: String,
}

impl std::fmt::Debug for Endpoints {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Endpoints")
            .field("api_key", &"***")
            .field("api_url", &self.api_url)
            .field("sandbox_url", &self.sandbox_url)
            .finish()
    }
}

/// A sandbox as create and connect describe it.
#[derive(Clone, Deserialize)]
#[serde(rename_all = "camelCase")]
pub struct SandboxInfo {
    #[serde(rename = "sandboxID")]
    pub sandbox_id: String,
    #[serde(default)]
    pub envd_version: String,
    /// Present for secure sandboxes; sent as `X-Access-Token`.
    #[serde(default)]
    pub envd_access_token: Option<String>,
    #[serde(default)]
    pub state: Option<String>,
    #[serde(default)]
    pub metadata: Option<BTreeMap<String, String>>,
    #[serde(default, rename = "startedAt")]
    pub started_at: Option<String>,
}

impl std::fmt::Debug for SandboxInfo {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("SandboxInfo")
            .field("sandbox_id", &self.sandbox_id)
            .field("envd_version", &self.envd_version)
            .field("state", &self.state)
            .finish_non_exhaustive()
    }
}

/// What a create asks for.
#[derive(Clone)]
pub struct CreateRequest {
    pub template: String,
    pub timeout: Duration,
    pub internet: bool,
    pub metadata: BTreeMap<String, String>,
    /// The `network` object of a host list (`crate::network::create_network`); it may hold
    /// injected secrets' values, so it is never logged.
    pub network: Option<Value>,
}

impl std::fmt::Debug for CreateRequest {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("CreateRequest")
            .field("template", &self.template)
            .field("timeout", &self.timeout)
            .field("internet", &self.internet)
            .field("metadata", &self.metadata)
            .field("network", &self.network.as_ref().map(|_| "…"))
            .finish()
    }
}

/// The body of `POST /sandboxes` for `req`: always secure, with an explicit lifetime.
pub fn create_body(req: &CreateRequest) -> Value {
    let mut body = json!({
        "templateID": req.template,
        "timeout": seconds(req.timeout),
        "secure": true,
        "allow_internet_access": req.internet,
        "metadata": req.metadata,
    });
    if let Some(network) = &req.network {
        body["network"] = network.clone();
    }
    body
}

/// The HTTP client.
#[derive(Clone, Debug)]
pub struct Client {
    http: reqwest::Client,
    endpoints: Endpoints,
}

fn seconds(d: Duration) -> u64 {
    d.as_secs().max(1)
}

impl Client {
    pub fn new(endpoints: Endpoints) -> Result<Self> {
        // Err means some provider is installed already, which is all reqwest needs.
        let _ = rustls::crypto::ring::default_provider().install_default();
        let http = reqwest::Client::builder()
            .connect_timeout(Duration::from_secs(10))
            .build()
            .map_err(|e| Error::Network {
                url: endpoints.api_url.clone(),
                detail: chain(&e),
            })?;
        Ok(Self { http, endpoints })
    }

    pub fn endpoints(&self) -> &Endpoints {
        &self.endpoints
    }

    /// Runs `call` until it succeeds, fails for good, or the backoff is spent.
    pub async fn retrying<T, F, Fut>(&self, what: &str, mut call: F) -> Result<T>
    where
        F: FnMut() -> Fut,
        Fut: std::future::Future<Output = Result<T>>,
    {
        let mut waits = BACKOFF.iter();
        loop {
            match call().await {
                Err(err) if err.is_retryable() => match waits.next() {
                    Some(wait) => {
                        tracing::warn!(%err, ?wait, "{what} failed; retrying");
                        tokio::time::sleep(*wait).await;
                    }
                    None => return Err(err),
                },
                other => return other,
            }
        }
    }

    fn control(&self, method: Method, path: &str) -> RequestBuilder {
        let url = format!("{}{path}", self.endpoints.api_url.trim_end_matches('/'));
        self.http
            .request(method, url)
            .header("X-API-Key", &self.endpoints.api_key)
            .timeout(CALL_TIMEOUT)
    }

    /// Sends a control-plane request; returns the status and body of a 2xx answer.
    async fn send(
        &self,
        what: &str,
        request: RequestBuilder,
        id: Option<&str>,
    ) -> Result<(StatusCode, Vec<u8>)> {
        let url = self.endpoints.api_url.clone();
        let response = request.send().await.map_err(|e| Error::Network {
            url: url.clone(),
            detail: chain(&e),
        })?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| Error::Network {
            url: url.clone(),
            detail: chain(&e),
        })?;
        if status.is_success() {
            return Ok((status, body.to_vec()));
        }
        let message = message_of(&body);
        Err(match (status.as_u16(), id) {
            (401 | 403, _) => Error::Unauthorized { url, message },
            (404, Some(id)) => Error::Gone {
                id: id.to_owned(),
                why: message,
            },
            (429, _) => Error::RateLimited { message },
            (503 | 504, _) => Error::Capacity {
                status: status.as_u16(),
                message,
            },
            (status, _) => Error::Api {
                what: what.to_owned(),
                status,
                message,
            },
        })
    }

    /// `POST /sandboxes` (secure, with an explicit lifetime).
    pub async fn create(&self, req: &CreateRequest) -> Result<SandboxInfo> {
        let request = self
            .control(Method::POST, "/sandboxes")
            .json(&create_body(req));
        match self.send("create a sandbox", request, None).await {
            Ok((_, body)) => decode(&body, "create"),
            Err(Error::Api {
                status: 404,
                message,
                ..
            }) => Err(Error::UnknownTemplate {
                template: req.template.clone(),
                message,
            }),
            Err(Error::Api {
                status: 500,
                message,
                ..
            }) if message.contains("capacity") => Err(Error::Capacity {
                status: 500,
                message,
            }),
            Err(other) => Err(other),
        }
    }

    /// `POST /sandboxes/{id}/connect`: reattaches, resuming a paused sandbox.
    pub async fn connect(&self, id: &str, timeout: Duration) -> Result<SandboxInfo> {
        let request = self
            .control(Method::POST, &format!("/sandboxes/{id}/connect"))
            .json(&json!({"timeout": seconds(timeout)}));
        let (_, body) = self.send("connect to a sandbox", request, Some(id)).await?;
        decode(&body, "connect")
    }

    /// `POST /sandboxes/{id}/timeout`: the sandbox now lives `timeout` from now.
    pub async fn set_timeout(&self, id: &str, timeout: Duration) -> Result<()> {
        let request = self
            .control(Method::POST, &format!("/sandboxes/{id}/timeout"))
            .json(&json!({"timeout": seconds(timeout)}));
        self.send("refresh a sandbox's timeout", request, Some(id))
            .await
            .map(drop)
    }

    /// `POST /sandboxes/{id}/pause`; an already paused sandbox (409) is fine.
    pub async fn pause(&self, id: &str) -> Result<()> {
        let request = self.control(Method::POST, &format!("/sandboxes/{id}/pause"));
        match self.send("pause a sandbox", request, Some(id)).await {
            Ok(_) | Err(Error::Api { status: 409, .. }) => Ok(()),
            Err(other) => Err(other),
        }
    }

    /// `DELETE /sandboxes/{id}`; whether it was there (404: already gone).
    pub async fn kill(&self, id: &str) -> Result<bool> {
        let request = self.control(Method::DELETE, &format!("/sandboxes/{id}"));
        match self.send("kill a sandbox", request, Some(id)).await {
            Ok(_) => Ok(true),
            Err(Error::Gone { .. }) => Ok(false),
            Err(other) => Err(other),
        }
    }

    /// `GET /v2/sandboxes` of the running and paused sandboxes whose metadata holds every
    /// pair of `filter`.
    pub async fn list(&self, filter: &BTreeMap<String, String>) -> Result<Vec<SandboxInfo>> {
        let metadata: Vec<String> = filter
            .iter()
            .map(|(k, v)| format!("{}={}", encode(k), encode(v)))
            .collect();
        let path = format!(
            "/v2/sandboxes?metadata={}&state={}",
            encode(&metadata.join("&")),
            encode("running,paused")
        );
        let request = self.control(Method::GET, &path);
        let (_, body) = self.send("list sandboxes", request, None).await?;
        decode(&body, "list")
    }

    /// A data-plane request to sandbox `id` (its token, if it has one).
    pub fn envd(
        &self,
        method: Method,
        path: &str,
        id: &str,
        token: Option<&str>,
    ) -> RequestBuilder {
        let url = format!("{}{path}", self.endpoints.sandbox_url.trim_end_matches('/'));
        let mut request = self
            .http
            .request(method, url)
            .header("E2b-Sandbox-Id", id)
            .header("E2b-Sandbox-Port", ENVD_PORT.to_string());
        if let Some(token) = token {
            request = request.header("X-Access-Token", token);
        }
        request
    }

    /// A unary Connect call to envd; the decoded answer.
    pub async fn unary(
        &self,
        id: &str,
        token: Option<&str>,
        procedure: &str,
        message: &Value,
    ) -> Result<Value> {
        let request = self
            .envd(Method::POST, &format!("/{procedure}"), id, token)
            .header("Content-Type", "application/json")
            .header("Connect-Protocol-Version", "1")
            .timeout(CALL_TIMEOUT)
            .json(message);
        let (status, body) = self.envd_send(id, request).await?;
        if status.is_success() {
            return decode(&body, procedure);
        }
        Err(envd_error(id, procedure, status, &body))
    }

    /// Sends a data-plane request; the status and body (any status but 502).
    pub async fn envd_send(
        &self,
        id: &str,
        request: RequestBuilder,
    ) -> Result<(StatusCode, Vec<u8>)> {
        let url = self.endpoints.sandbox_url.clone();
        let response = request.send().await.map_err(|e| Error::Network {
            url: url.clone(),
            detail: chain(&e),
        })?;
        let status = response.status();
        let body = response.bytes().await.map_err(|e| Error::Network {
            url,
            detail: chain(&e),
        })?;
        if status == StatusCode::BAD_GATEWAY {
            return Err(Error::Gone {
                id: id.to_owned(),
                why: format!("envd answered 502: {}", message_of(&body)),
            });
        }
        Ok((status, body.to_vec()))
    }
}

/// envd's error answer as an [`Error`].
pub(crate) fn envd_error(id: &str, what: &str, status: StatusCode, body: &[u8]) -> Error {
    let message = message_of(body);
    match status.as_u16() {
        401 => Error::Unauthorized {
            url: format!("envd of sandbox {id}"),
            message,
        },
        502 => Error::Gone {
            id: id.to_owned(),
            why: message,
        },
        429 => Error::RateLimited { message },
        status => Error::Api {
            what: what.to_owned(),
            status,
            message,
        },
    }
}

fn decode<T: serde::de::DeserializeOwned>(body: &[u8], what: &str) -> Result<T> {
    serde_json::from_slice(body).map_err(|e| Error::Protocol {
        id: String::new(),
        why: format!("answered {what} with JSON that does not decode: {e}"),
    })
}

/// The `message` of an E2B or Connect error body; else the body's start, as text.
pub(crate) fn message_of(body: &[u8]) -> String {
    if let Ok(value) = serde_json::from_slice::<Value>(body)
        && let Some(message) = value.get("message").and_then(Value::as_str)
    {
        return message.to_owned();
    }
    let text = String::from_utf8_lossy(body);
    let text = text.trim();
    if text.starts_with('<') {
        return "an HTML page instead of an E2B answer (a proxy in between?)".to_owned();
    }
    text.chars().take(200).collect()
}

/// Percent-encodes everything but unreserved characters, as `encodeURIComponent`.
pub(crate) fn encode(s: &str) -> String {
    let mut out = String::new();
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

fn chain(err: &dyn std::error::Error) -> String {
    let mut text = err.to_string();
    let mut source = err.source();
    while let Some(s) = source {
        text.push_str(": ");
        text.push_str(&s.to_string());
        source = s.source();
    }
    text
}
