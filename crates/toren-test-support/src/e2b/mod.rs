//! A local E2B service for tests: the control plane (`POST /sandboxes`, `GET`, `connect`,
//! `timeout`, `pause`, `DELETE`, `GET /v2/sandboxes` with metadata filters) on one loopback
//! address and envd's data plane (`process.Process/Start` as a real Connect server stream
//! over JSON with envelope framing and keepalives, `SendSignal`, `/files` GET/POST, the
//! `filesystem.Filesystem` calls `Stat`, `MakeDir`, `Remove`) on another, where requests are
//! routed to a sandbox by the `E2b-Sandbox-Id` and `E2b-Sandbox-Port` headers, as E2B's
//! shared `sandbox.<domain>` host does. Both planes check credentials: `X-API-Key` on the
//! control plane, the sandbox's `envdAccessToken` in `X-Access-Token` on the data plane.
//!
//! Each sandbox really executes commands, as one machine of its own: a kept bubblewrap
//! holds the sandbox's user and PID namespaces (its init is PID 1 there, and killing it
//! ends every process, as a VM's end does), and every process is a bubblewrap sandbox
//! joining them (so a second command sees and can signal the first's process group, and
//! nothing of the host or of other sandboxes; envd's pids are the sandbox's) over the
//! sandbox's own disk, a temp dir whose `workspace`, `home` and `tmp` are bound at
//! `/workspace`, `/home/user` and `/tmp`, with the host's `/usr` and `/etc` read-only, and
//! without network unless the sandbox was created with `allow_internet_access`. Paths the
//! file endpoints take are mapped the same way (anything else reads the host's read-only
//! image, as a VM's root would). The environment is envd's: `PATH`, `HOME`, `USER`,
//! `LOGNAME`, the create-time `envVars`, `E2B_SANDBOX*`, then the request's `envs`. Each
//! machine is bounded as a VM is (`vm`): a cgroup of [`SANDBOX_MEMORY`] and
//! [`SANDBOX_PIDS`] where this host lets one be made ([`Disk::is_bounded`]), and a disk of
//! a test's chosen size ([`FakeE2b::set_disk_size`]).
//!
//! Every request on both planes is recorded ([`FakeE2b::requests`]), so a test can check
//! that no credential was ever sent; [`Faults`] switch on the failure modes of the
//! protocol reference (expired or killed sandboxes answer 404 on the control plane and
//! 502 on envd, a 502 with an HTML body, a stream cut mid-way, 429 and capacity errors, a
//! proxy's 413 for a large upload).

mod control;
mod disk;
mod egress;
mod envd;
mod fs;
mod vm;

use std::collections::{BTreeMap, HashMap};
use std::net::SocketAddr;
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use tokio::sync::oneshot;

pub use disk::{Disk, machines_work};
pub use egress::EGRESS_DIR;
pub use vm::{MEMORY as SANDBOX_MEMORY, PIDS as SANDBOX_PIDS, available as sandboxes_bounded};

/// The port envd listens on inside every sandbox.
pub const ENVD_PORT: u16 = 49983;
/// The envd version the fake reports.
pub const ENVD_VERSION: &str = "0.6.13";
/// The templates a fresh fake knows.
pub const TEMPLATES: &[&str] = &["base"];

/// One request either plane received.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Recorded {
    /// `control` or `envd`.
    pub plane: &'static str,
    pub method: String,
    /// Path and query.
    pub uri: String,
    pub headers: Vec<(String, String)>,
    /// The body, lossily decoded (envelopes included as they came).
    pub body: String,
}

impl Recorded {
    /// The request whole, as one text to search for a secret.
    pub fn text(&self) -> String {
        let headers: Vec<String> = self
            .headers
            .iter()
            .map(|(k, v)| format!("{k}: {v}"))
            .collect();
        format!(
            "{} {}\n{}\n\n{}",
            self.method,
            self.uri,
            headers.join("\n"),
            self.body
        )
    }
}

/// Failure modes to switch on.
#[derive(Clone, Debug, Default)]
pub struct Faults {
    /// The next creates answer with this status (429, 503, …) and an E2B error body.
    pub create_errors: Vec<(u16, String)>,
    /// envd answers for gone sandboxes with an nginx-like HTML 502 instead of JSON.
    pub html_502: bool,
    /// The next process stream is cut (the connection fails) right after its `start`
    /// event, while the process keeps running.
    pub cut_next_stream: bool,
    /// Every control-plane request answers 502 with an HTML body.
    pub control_down: bool,
    /// The next this many data-plane requests answer 429 (the proxy's rate limit).
    pub envd_429: u32,
    /// Uploads (`POST /files`) of more bytes than this answer 413 with an HTML body, as a
    /// proxy with a body limit in front of envd does.
    pub upload_limit: Option<usize>,
}

/// What the fake knows of one sandbox.
#[derive(Debug)]
pub(crate) struct Sandbox {
    pub(crate) id: String,
    pub(crate) template: String,
    pub(crate) token: String,
    pub(crate) metadata: BTreeMap<String, String>,
    pub(crate) env_vars: BTreeMap<String, String>,
    pub(crate) internet: bool,
    /// The create request's `network`, as sent.
    pub(crate) network: Option<serde_json::Value>,
    /// The egress firewall of a sandbox created with an allow-list (`egress`).
    pub(crate) firewall: Option<egress::Firewall>,
    pub(crate) started_at: jiff::Timestamp,
    pub(crate) end_at: Instant,
    pub(crate) paused: bool,
    pub(crate) disk: Arc<Disk>,
    /// Live processes started by envd, by host and sandbox pid (a process's group is its
    /// own once the command's `setsid` ran).
    pub(crate) pids: Vec<disk::Proc>,
}

#[derive(Default)]
pub(crate) struct State {
    pub(crate) api_key: String,
    pub(crate) templates: Vec<String>,
    pub(crate) sandboxes: HashMap<String, Sandbox>,
    /// The disks of sandboxes that were killed (by DELETE, expiry or a test), kept for
    /// tests to look at.
    pub(crate) gone: HashMap<String, Arc<Disk>>,
    pub(crate) requests: Vec<Recorded>,
    pub(crate) faults: Faults,
    pub(crate) next: u64,
    /// Counts of control-plane calls by route name (`create`, `connect`, `timeout`, …).
    pub(crate) calls: BTreeMap<&'static str, u64>,
    /// What the egress firewalls resolve names to, and the CA they verify hosts that get
    /// headers against (`None`: the system's roots).
    pub(crate) egress_names: egress::Names,
    pub(crate) egress_trust: Option<Vec<u8>>,
    /// Every connection a firewall judged.
    pub(crate) judged: egress::Judged,
    /// The size of new sandboxes' disks (`None`: a directory of this host's disk).
    pub(crate) disk_size: Option<u64>,
}

pub(crate) type Shared = Arc<Mutex<State>>;

pub(crate) fn lock(state: &Shared) -> MutexGuard<'_, State> {
    state.lock().unwrap_or_else(PoisonError::into_inner)
}

/// A running fake E2B service. Dropping it stops both servers and kills every sandbox.
pub struct FakeE2b {
    state: Shared,
    api: SocketAddr,
    envd: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
    _root: tempfile::TempDir,
}

impl FakeE2b {
    /// Starts the service; `api_key` is the one key the control plane accepts.
    pub fn start(api_key: &str) -> anyhow::Result<Self> {
        let root = tempfile::Builder::new().prefix("fake-e2b").tempdir()?;
        let state: Shared = Arc::new(Mutex::new(State {
            api_key: api_key.to_owned(),
            templates: TEMPLATES.iter().map(|t| (*t).to_owned()).collect(),
            ..State::default()
        }));
        let api_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        let envd_listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        api_listener.set_nonblocking(true)?;
        envd_listener.set_nonblocking(true)?;
        let (api, envd) = (api_listener.local_addr()?, envd_listener.local_addr()?);
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let (shutdown, stopped) = oneshot::channel::<()>();
        let disks = root.path().to_owned();
        let thread_state = Arc::clone(&state);
        let thread = std::thread::Builder::new()
            .name("fake-e2b".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let control = control::router(Arc::clone(&thread_state), disks);
                    let data = envd::router(Arc::clone(&thread_state));
                    let Ok(api) = tokio::net::TcpListener::from_std(api_listener) else {
                        return;
                    };
                    let Ok(envd) = tokio::net::TcpListener::from_std(envd_listener) else {
                        return;
                    };
                    let evictor = tokio::spawn(control::evict(Arc::clone(&thread_state)));
                    let a = tokio::spawn(async move { axum::serve(api, control).await });
                    let b = tokio::spawn(async move { axum::serve(envd, data).await });
                    let _ = stopped.await;
                    a.abort();
                    b.abort();
                    evictor.abort();
                    let ids: Vec<String> = lock(&thread_state).sandboxes.keys().cloned().collect();
                    for id in ids {
                        control::kill(&thread_state, &id);
                    }
                });
            })?;
        Ok(Self {
            state,
            api,
            envd,
            shutdown: Some(shutdown),
            thread: Some(thread),
            _root: root,
        })
    }

    /// The control plane's base URL (`E2B_API_URL`).
    pub fn api_url(&self) -> String {
        format!("http://{}", self.api)
    }

    /// The data plane's base URL (`E2B_SANDBOX_URL`).
    pub fn sandbox_url(&self) -> String {
        format!("http://{}", self.envd)
    }

    /// Every request received so far, both planes, in order.
    pub fn requests(&self) -> Vec<Recorded> {
        lock(&self.state).requests.clone()
    }

    /// How many control-plane calls of `route` (`create`, `connect`, `timeout`, `pause`,
    /// `kill`, `get`, `list`) were answered.
    pub fn calls(&self, route: &str) -> u64 {
        lock(&self.state).calls.get(route).copied().unwrap_or(0)
    }

    /// The ids of the live (running or paused) sandboxes.
    pub fn sandboxes(&self) -> Vec<String> {
        let mut ids: Vec<String> = lock(&self.state).sandboxes.keys().cloned().collect();
        ids.sort();
        ids
    }

    /// Whether sandbox `id` is paused (`None`: no such live sandbox).
    pub fn paused(&self, id: &str) -> Option<bool> {
        lock(&self.state).sandboxes.get(id).map(|s| s.paused)
    }

    /// The metadata sandbox `id` was created with.
    pub fn metadata(&self, id: &str) -> Option<BTreeMap<String, String>> {
        lock(&self.state)
            .sandboxes
            .get(id)
            .map(|s| s.metadata.clone())
    }

    /// The create-time `envVars` of sandbox `id`.
    pub fn env_vars(&self, id: &str) -> Option<BTreeMap<String, String>> {
        lock(&self.state)
            .sandboxes
            .get(id)
            .map(|s| s.env_vars.clone())
    }

    /// The `network` sandbox `id` was created with.
    pub fn network(&self, id: &str) -> Option<serde_json::Value> {
        lock(&self.state)
            .sandboxes
            .get(id)
            .and_then(|s| s.network.clone())
    }

    /// Makes the egress firewalls of sandboxes created from now on resolve `name` to `ip`
    /// (a test's server playing the host; its address meets the same checks as any).
    pub fn set_egress_host(&self, name: &str, ip: std::net::IpAddr) {
        lock(&self.state)
            .egress_names
            .0
            .entry(name.to_ascii_lowercase())
            .or_default()
            .push(ip);
    }

    /// Makes the egress firewalls of sandboxes created from now on verify the hosts they
    /// put headers in for against this CA (PEM) instead of the system's roots.
    pub fn set_egress_trust(&self, ca_pem: Vec<u8>) {
        lock(&self.state).egress_trust = Some(ca_pem);
    }

    /// Every connection an egress firewall judged: host, port, and whether it went out.
    pub fn egress_judged(&self) -> Vec<(String, u16, bool)> {
        let judged = std::sync::Arc::clone(&lock(&self.state).judged);
        judged.lock().map(|j| j.clone()).unwrap_or_default()
    }

    /// Whether sandbox `id` may reach the internet.
    pub fn internet(&self, id: &str) -> Option<bool> {
        lock(&self.state).sandboxes.get(id).map(|s| s.internet)
    }

    /// How long sandbox `id` has left before it expires.
    pub fn time_left(&self, id: &str) -> Option<Duration> {
        lock(&self.state)
            .sandboxes
            .get(id)
            .map(|s| s.end_at.saturating_duration_since(Instant::now()))
    }

    /// The disk of sandbox `id` (its files, from the host), also after it was killed.
    pub fn disk(&self, id: &str) -> Option<Arc<Disk>> {
        let state = lock(&self.state);
        match state.sandboxes.get(id) {
            Some(s) => Some(Arc::clone(&s.disk)),
            None => state.gone.get(id).map(Arc::clone),
        }
    }

    /// Whether sandbox `id` was killed.
    pub fn is_gone(&self, id: &str) -> bool {
        lock(&self.state).gone.contains_key(id)
    }

    /// Kills sandbox `id` behind its user's back, as an expiry would.
    pub fn kill(&self, id: &str) -> bool {
        control::kill(&self.state, id)
    }

    /// Sets the failure modes.
    pub fn set_faults(&self, faults: Faults) {
        lock(&self.state).faults = faults;
    }

    /// Gives sandboxes created from now on a disk of `bytes` (a tmpfs of that size), as a
    /// VM's disk is bounded; a create fails if this host cannot mount one.
    pub fn set_disk_size(&self, bytes: Option<u64>) {
        lock(&self.state).disk_size = bytes;
    }

    /// Adds a template that creates accept.
    pub fn add_template(&self, name: &str) {
        lock(&self.state).templates.push(name.to_owned());
    }
}

impl Drop for FakeE2b {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

/// Records a request; returns its body's bytes back.
pub(crate) fn record(
    state: &Shared,
    plane: &'static str,
    method: &axum::http::Method,
    uri: &axum::http::Uri,
    headers: &axum::http::HeaderMap,
    body: &[u8],
) {
    let headers = headers
        .iter()
        .map(|(k, v)| {
            (
                k.as_str().to_owned(),
                String::from_utf8_lossy(v.as_bytes()).into_owned(),
            )
        })
        .collect();
    lock(state).requests.push(Recorded {
        plane,
        method: method.to_string(),
        uri: uri.to_string(),
        headers,
        body: String::from_utf8_lossy(body).into_owned(),
    });
}

/// A fresh id of 20 lowercase alphanumerics, as E2B's.
pub(crate) fn new_id(state: &mut State, prefix: char) -> String {
    state.next += 1;
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let mut n = nanos ^ (u128::from(state.next) << 64) ^ u128::from(std::process::id());
    let alphabet = b"abcdefghijklmnopqrstuvwxyz0123456789";
    let mut id = String::from(prefix);
    while id.len() < 20 {
        id.push(char::from(alphabet[(n % 36) as usize]));
        n = n / 36 + u128::from(state.next) * 7919;
    }
    id
}
