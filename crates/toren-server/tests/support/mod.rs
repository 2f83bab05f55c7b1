//! A temp home for the API tests: agents directory, SQLite store, run service, a worker
//! over the real `local` backend, and the router called with `oneshot`.

#![allow(
    dead_code,
    reason = "each test binary uses its own part of the support"
)]

use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::body::Body;
use axum::http::{HeaderMap, Request, StatusCode, header};
use http_body_util::BodyExt as _;
use serde_json::Value;
use tempfile::TempDir;
use tokio_util::sync::CancellationToken;
use toren_model::ProviderSettings;
use toren_protocol::RunId;
use toren_runtime::{PolicySettings, RunService, ServiceSettings};
use toren_sandbox::{LocalBackend, LocalSettings};
use toren_server::{AppState, Metrics, Token, app};
use toren_store::{EventLog, SqliteStore};
use toren_tools::Toolkit;
use toren_worker::{Observers, Worker, WorkerConfig, holder};
use tower::ServiceExt as _;

pub(crate) const TOKEN: &str = "test-token-0123456789";
const WAIT: Duration = Duration::from_secs(30);

pub(crate) struct Reply {
    pub(crate) status: StatusCode,
    pub(crate) headers: HeaderMap,
    pub(crate) body: Vec<u8>,
}

impl Reply {
    pub(crate) fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }
    pub(crate) fn json(&self) -> Value {
        serde_json::from_slice(&self.body).unwrap_or_else(|e| panic!("{e}: {}", self.text()))
    }
    pub(crate) fn content_type(&self) -> String {
        self.headers
            .get(header::CONTENT_TYPE)
            .map(|v| v.to_str().unwrap().to_owned())
            .unwrap_or_default()
    }
}

pub(crate) struct Home {
    pub(crate) dir: TempDir,
    pub(crate) state: AppState,
    worker: Arc<Worker>,
    sqlite: Arc<SqliteStore>,
    /// The runs the worker said wait for a decision (told after every other observer saw
    /// the request).
    waiting: Arc<Waiting>,
}

/// Records the runs a worker announced as waiting for a decision.
#[derive(Default)]
pub(crate) struct Waiting(std::sync::Mutex<Vec<String>>);

impl toren_worker::Observer for Waiting {
    fn awaiting_approval(
        &self,
        run: &toren_protocol::RunId,
        _: &toren_protocol::ApprovalRequested,
    ) {
        self.0.lock().unwrap().push(run.to_string());
    }
}

impl Home {
    pub(crate) async fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("sandboxes");
        let agents = dir.path().join("agents");
        std::fs::create_dir_all(&agents).unwrap();
        let url = format!("sqlite://{}", dir.path().join("toren.db").display());
        let sqlite = Arc::new(SqliteStore::open(&url).await.unwrap());
        let store: Arc<dyn EventLog> = sqlite.clone();
        let service = RunService::new(
            Arc::clone(&store),
            ServiceSettings {
                policy: PolicySettings {
                    backend: Some(LocalBackend::NAME.into()),
                    sandbox_root: root.clone(),
                    volume: None,
                    asks_hosts: true,
                },
                lease_ttl: Duration::from_secs(30),
                follow_poll: Duration::from_millis(50),
                streams: None,
            },
        )
        .with_sessions(sqlite.clone());
        let metrics = Metrics::new();
        let waiting = Arc::new(Waiting::default());
        let local: Arc<dyn toren_sandbox::SandboxBackend> =
            Arc::new(LocalBackend::new(LocalSettings {
                sandbox_root: root,
                bwrap: None,
            }));
        let worker = Worker::new(WorkerConfig {
            store,
            models: Arc::new(ProviderSettings::default()),
            backends: vec![Arc::clone(&local)],
            toolkit: Toolkit::default(),
            env: Arc::new(|_: &str| None),
            observer: Arc::new(Observers(vec![
                Arc::new(service.notifier().clone()),
                Arc::new(metrics.clone()),
                Arc::clone(&waiting) as Arc<dyn toren_worker::Observer>,
            ])),
            approver: None,
            max_tokens: 1024,
            approval_poll: Duration::from_millis(20),
            holder: holder::this_process(),
            lease_ttl: Duration::from_secs(30),
        })
        .with_history(Arc::new(service.clone()));
        let state = AppState {
            service,
            agents_dir: agents,
            tokens: Arc::new(vec![Token {
                name: "api-client".into(),
                secret: TOKEN.into(),
            }]),
            metrics,
            backends: vec![local],
            shutdown: tokio_util::sync::CancellationToken::new(),
        };
        Self {
            dir,
            state,
            worker: Arc::new(worker),
            sqlite,
            waiting,
        }
    }

    /// Writes agent `name` with `script` as its scripted model's turns.
    pub(crate) fn agent(&self, name: &str, script: &str, sandbox: bool) {
        let agents = &self.state.agents_dir;
        std::fs::write(agents.join(format!("{name}.script.yaml")), script).unwrap();
        let sandbox = if sandbox { "sandbox: true\n" } else { "" };
        std::fs::write(
            agents.join(format!("{name}.yaml")),
            format!("name: {name}\nmodel: scripted/{name}.script.yaml\n{sandbox}"),
        )
        .unwrap();
    }

    pub(crate) async fn call(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<String>,
    ) -> Reply {
        self.request(method, path, token, body, None).await
    }

    async fn request(
        &self,
        method: &str,
        path: &str,
        token: Option<&str>,
        body: Option<String>,
        last_event_id: Option<&str>,
    ) -> Reply {
        let mut request = Request::builder().method(method).uri(path);
        if let Some(token) = token {
            request = request.header(header::AUTHORIZATION, format!("Bearer {token}"));
        }
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let body = match body {
            Some(body) => {
                request = request.header(header::CONTENT_TYPE, "application/json");
                Body::from(body)
            }
            None => Body::empty(),
        };
        let response = app(self.state.clone())
            .oneshot(request.body(body).unwrap())
            .await
            .unwrap();
        let status = response.status();
        let headers = response.headers().clone();
        let body = tokio::time::timeout(WAIT, response.into_body().collect())
            .await
            .expect("the body ends")
            .unwrap()
            .to_bytes()
            .to_vec();
        Reply {
            status,
            headers,
            body,
        }
    }

    /// Opens the run's event stream (after `last_event_id`) and reads it until `until`
    /// holds of the text so far; returns that text. The stream is dropped (a client that
    /// went away).
    pub(crate) async fn sse_until(
        &self,
        run: &str,
        last_event_id: Option<u64>,
        until: impl Fn(&str) -> bool,
    ) -> String {
        let mut request = Request::builder()
            .uri(format!("/runs/{run}/events"))
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id.to_string());
        }
        let response = app(self.state.clone())
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        let mut body = response.into_body();
        let mut text = String::new();
        tokio::time::timeout(WAIT, async {
            while !until(&text) {
                match body.frame().await {
                    Some(frame) => {
                        if let Ok(data) = frame.unwrap().into_data() {
                            text.push_str(&String::from_utf8_lossy(&data));
                        }
                    }
                    None => break,
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("the stream did not get there: {text}"));
        text
    }

    /// Opens the event stream at `path` (with `Last-Event-ID: last_event_id` if given),
    /// to be read bit by bit.
    pub(crate) async fn open_sse(&self, path: &str, last_event_id: Option<&str>) -> SseReader {
        let mut request = Request::builder()
            .uri(path)
            .header(header::AUTHORIZATION, format!("Bearer {TOKEN}"));
        if let Some(id) = last_event_id {
            request = request.header("last-event-id", id);
        }
        let response = app(self.state.clone())
            .oneshot(request.body(Body::empty()).unwrap())
            .await
            .unwrap();
        assert_eq!(response.status(), StatusCode::OK);
        assert_eq!(
            response.headers()[header::CONTENT_TYPE],
            "text/event-stream"
        );
        SseReader {
            body: response.into_body(),
            text: String::new(),
            ended: false,
        }
    }

    /// `GET path` with `Last-Event-ID: last_event_id` if given.
    pub(crate) async fn get_with_last_event_id(
        &self,
        path: &str,
        last_event_id: Option<&str>,
    ) -> Reply {
        self.request("GET", path, Some(TOKEN), None, last_event_id)
            .await
    }

    pub(crate) async fn get(&self, path: &str) -> Reply {
        self.call("GET", path, Some(TOKEN), None).await
    }

    pub(crate) async fn create(&self, agent: &str, input: &str) -> Reply {
        let body = serde_json::json!({ "agent": agent, "input": input }).to_string();
        self.call("POST", "/runs", Some(TOKEN), Some(body)).await
    }

    /// The journaled events of the SSE stream that starts after `seq`.
    pub(crate) async fn sse_after(&self, run: &str, seq: u64) -> Vec<Value> {
        let path = format!("/runs/{run}/events");
        let reply = self
            .request("GET", &path, Some(TOKEN), None, Some(&seq.to_string()))
            .await;
        assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
        sse_events(&reply.text())
    }

    /// Claims the queued run as a worker would and drives it to its end.
    pub(crate) async fn drive(&self, run: &str) {
        self.spawn_drive(run).await.await.unwrap();
    }

    pub(crate) async fn spawn_drive(&self, run: &str) -> tokio::task::JoinHandle<()> {
        let run: RunId = run.parse().unwrap();
        let lease = self.worker.acquire(&run).await.unwrap();
        let worker = Arc::clone(&self.worker);
        tokio::spawn(async move {
            worker
                .drive(lease, &CancellationToken::new())
                .await
                .unwrap();
        })
    }

    /// Waits until the run asks for a decision, and returns the call's id.
    pub(crate) async fn pending_call(&self, run: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            let pending = self.get(&format!("/runs/{run}/approvals")).await.json();
            let announced = self.waiting.0.lock().unwrap().iter().any(|r| r == run);
            // In the log, and every observer of the worker was told (a test that stops the
            // driver now leaves nothing half-seen).
            if let Some(call) = pending["pending"][0]["call_id"].as_str()
                && announced
            {
                return call.to_owned();
            }
            assert!(
                Instant::now() < deadline,
                "no approval requested: {pending}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    pub(crate) async fn post(&self, path: &str, body: serde_json::Value) -> Reply {
        self.call("POST", path, Some(TOKEN), Some(body.to_string()))
            .await
    }

    /// Closes the store: every query fails from now on.
    pub(crate) async fn close_store(&self) {
        self.sqlite.close().await;
    }

    pub(crate) fn workspace(&self, run: &str) -> std::path::PathBuf {
        toren_sandbox::workspace_path(&self.dir.path().join("sandboxes"), run)
    }
}

/// The journaled events of an SSE body (those with an id; the id is checked to be the
/// event's seq), in order.
pub(crate) fn sse_events(body: &str) -> Vec<Value> {
    let mut events = Vec::new();
    for block in body.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut id = None;
        let mut data = String::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id:") {
                id = Some(v.trim().parse::<u64>().unwrap());
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
            }
        }
        if let Some(id) = id {
            let event: Value = serde_json::from_str(&data).unwrap();
            assert_eq!(event["seq"], id, "{block}");
            events.push(event);
        }
    }
    events
}

/// An open event stream read as it comes (see [`Home::open_sse`]).
pub(crate) struct SseReader {
    body: Body,
    /// Everything read so far.
    pub(crate) text: String,
    /// Whether the server ended the stream.
    pub(crate) ended: bool,
}

impl SseReader {
    /// Reads until `until` holds of the text so far or the stream ends; returns the text.
    pub(crate) async fn until(&mut self, until: impl Fn(&str) -> bool) -> &str {
        let (body, text, ended) = (&mut self.body, &mut self.text, &mut self.ended);
        tokio::time::timeout(WAIT, async {
            while !until(text) {
                match body.frame().await {
                    Some(frame) => {
                        if let Ok(data) = frame.unwrap().into_data() {
                            text.push_str(&String::from_utf8_lossy(&data));
                        }
                    }
                    None => {
                        *ended = true;
                        break;
                    }
                }
            }
        })
        .await
        .unwrap_or_else(|_| panic!("the stream did not get there: {text}"));
        &self.text
    }
}

/// The journaled events of an SSE body with their ids as given (any id format), in order.
pub(crate) fn sse_events_with_ids(body: &str) -> Vec<(String, Value)> {
    let mut events = Vec::new();
    for block in body.split("\n\n").filter(|b| !b.trim().is_empty()) {
        let mut id = None;
        let mut data = String::new();
        for line in block.lines() {
            if let Some(v) = line.strip_prefix("id:") {
                id = Some(v.trim().to_owned());
            } else if let Some(v) = line.strip_prefix("data:") {
                data.push_str(v.trim_start());
            }
        }
        if let Some(id) = id {
            events.push((id, serde_json::from_str(&data).unwrap()));
        }
    }
    events
}
