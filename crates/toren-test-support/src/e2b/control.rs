//! The fake's control plane: create, get, list (`/v2/sandboxes` with the doubly encoded
//! metadata filter), connect (resumes a paused sandbox: 201; extends a running one only if
//! longer: 200), timeout, pause (409 when already paused), kill (404 when gone), each
//! behind `X-API-Key`, with E2B's error body `{"code", "message"}`; and the evictor that
//! kills sandboxes whose time ran out, every 50 ms as E2B's does.

#![expect(
    clippy::result_large_err,
    reason = "handlers return the answer to send as their error; it is sent at once"
)]

use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, Query, State};
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use axum::routing::{get, post};
use serde_json::{Value, json};

use super::egress::{self, Net};
use super::{Disk, ENVD_VERSION, Sandbox, Shared, lock, new_id, record};

#[derive(Clone)]
struct Ctx {
    state: Shared,
    disks: Arc<PathBuf>,
}

pub(crate) fn router(state: Shared, disks: PathBuf) -> Router {
    let ctx = Ctx {
        state,
        disks: Arc::new(disks),
    };
    Router::new()
        .route("/sandboxes", post(create))
        .route("/v2/sandboxes", get(list))
        .route("/sandboxes/{id}", get(info).delete(delete))
        .route("/sandboxes/{id}/connect", post(connect))
        .route("/sandboxes/{id}/timeout", post(set_timeout))
        .route("/sandboxes/{id}/pause", post(pause))
        .with_state(ctx)
}

fn error(status: u16, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        axum::Json(json!({"code": status, "message": message})),
    )
        .into_response()
}

fn not_found(id: &str) -> Response {
    error(
        404,
        &format!("Sandbox \"{id}\" doesn't exist or you don't have access to it"),
    )
}

/// Records the request and checks the key; `Err` is the answer to send instead.
fn admit(
    ctx: &Ctx,
    route: &'static str,
    method: &Method,
    uri: &Uri,
    headers: &HeaderMap,
    body: &[u8],
) -> Result<(), Response> {
    record(&ctx.state, "control", method, uri, headers, body);
    let mut state = lock(&ctx.state);
    *state.calls.entry(route).or_default() += 1;
    if state.faults.control_down {
        return Err((
            StatusCode::BAD_GATEWAY,
            [("content-type", "text/html")],
            "<html><body><h1>502 Bad Gateway</h1></body></html>",
        )
            .into_response());
    }
    let key = headers.get("x-api-key").and_then(|v| v.to_str().ok());
    if key != Some(state.api_key.as_str()) {
        return Err(error(
            401,
            "Invalid API key, it must start with 'e2b_' prefix",
        ));
    }
    Ok(())
}

fn sandbox_json(s: &Sandbox, with_token: bool) -> Value {
    let left = s.end_at.saturating_duration_since(Instant::now());
    let end_at = jiff::Timestamp::now()
        .checked_add(jiff::SignedDuration::try_from(left).unwrap_or_default())
        .unwrap_or_else(|_| jiff::Timestamp::now());
    let mut v = json!({
        "templateID": s.template,
        "sandboxID": s.id,
        "clientID": "6532622b",
        "envdVersion": ENVD_VERSION,
        "domain": null,
        "startedAt": s.started_at.to_string(),
        "endAt": end_at.to_string(),
        "cpuCount": 2,
        "memoryMB": 512,
        "diskSizeMB": 1024,
        "metadata": s.metadata,
        "state": if s.paused { "paused" } else { "running" },
        "allowInternetAccess": s.internet,
    });
    // E2B returns the network whole, the rules' header values too (to the key's holder).
    if let Some(network) = &s.network {
        v["network"] = network.clone();
    }
    if with_token {
        v["envdAccessToken"] = json!(s.token);
    }
    v
}

fn timeout_of(body: &Value) -> Result<Duration, Response> {
    match body.get("timeout").and_then(Value::as_i64) {
        Some(t) if t > 0 && t <= 86_400 => Ok(Duration::from_secs(t.unsigned_abs())),
        Some(t) if t > 86_400 => Err(error(400, "Timeout cannot be greater than 24 hours")),
        Some(_) => Err(error(400, "Timeout must be greater than 0")),
        None => Ok(Duration::from_secs(15)),
    }
}

fn parse(body: &[u8]) -> Result<Value, Response> {
    if body.is_empty() {
        return Ok(json!({}));
    }
    serde_json::from_slice(body).map_err(|e| error(400, &format!("invalid body: {e}")))
}

async fn create(
    State(ctx): State<Ctx>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(answer) = admit(&ctx, "create", &method, &uri, &headers, &body) {
        return answer;
    }
    let body = match parse(&body) {
        Ok(body) => body,
        Err(answer) => return answer,
    };
    let timeout = match timeout_of(&body) {
        Ok(t) => t,
        Err(answer) => return answer,
    };
    let Some(template) = body.get("templateID").and_then(Value::as_str) else {
        return error(400, "templateID is required");
    };
    let template = template.to_lowercase();
    let net = match egress::decide(&body) {
        Ok(net) => net,
        Err(message) => return error(400, &message),
    };
    let strings = |key: &str| -> BTreeMap<String, String> {
        body.get(key)
            .and_then(Value::as_object)
            .map(|m| {
                m.iter()
                    .filter_map(|(k, v)| Some((k.clone(), v.as_str()?.to_owned())))
                    .collect()
            })
            .unwrap_or_default()
    };
    let mut state = lock(&ctx.state);
    if !state.faults.create_errors.is_empty() {
        let (status, message) = state.faults.create_errors.remove(0);
        return error(status, &message);
    }
    if !state.templates.contains(&template) {
        return error(404, &format!("template '{template}' not found"));
    }
    let id = new_id(&mut state, 'i');
    let token = new_id(&mut state, 't');
    let disk = match Disk::create(ctx.disks.join(&id), &id, state.disk_size) {
        Ok(disk) => Arc::new(disk),
        Err(e) => return error(500, &format!("cannot make the sandbox's disk: {e}")),
    };
    let sandbox = Sandbox {
        id: id.clone(),
        template,
        // Only a secure sandbox gets a token; without one envd takes anyone.
        token: if body.get("secure").and_then(Value::as_bool) == Some(true) {
            token
        } else {
            String::new()
        },
        metadata: strings("metadata"),
        env_vars: strings("envVars"),
        internet: net == Net::Open,
        network: body.get("network").cloned(),
        firewall: None,
        started_at: jiff::Timestamp::now(),
        end_at: Instant::now() + timeout,
        paused: false,
        disk,
        pids: Vec::new(),
    };
    let mut sandbox = sandbox;
    if let Net::Firewalled { allow, headers } = &net {
        let trust = match &state.egress_trust {
            Some(pem) => toren_egress::UpstreamTrust::Only(pem.clone()),
            None => toren_egress::UpstreamTrust::System,
        };
        let root = ctx.disks.join(&id);
        let judged = Arc::clone(&state.judged);
        match egress::start(
            &root,
            allow,
            headers,
            state.egress_names.clone(),
            &trust,
            judged,
        ) {
            Ok(firewall) => sandbox.firewall = Some(firewall),
            Err(e) => return error(500, &format!("cannot start the sandbox's firewall: {e}")),
        }
    }
    let answer = sandbox_json(&sandbox, !sandbox.token.is_empty());
    state.sandboxes.insert(id, sandbox);
    (StatusCode::CREATED, axum::Json(answer)).into_response()
}

async fn info(
    State(ctx): State<Ctx>,
    Path(id): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(answer) = admit(&ctx, "get", &method, &uri, &headers, &[]) {
        return answer;
    }
    let state = lock(&ctx.state);
    match state.sandboxes.get(&id) {
        Some(s) => axum::Json(sandbox_json(s, !s.token.is_empty())).into_response(),
        None => not_found(&id),
    }
}

async fn list(
    State(ctx): State<Ctx>,
    Query(query): Query<BTreeMap<String, String>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(answer) = admit(&ctx, "list", &method, &uri, &headers, &[]) {
        return answer;
    }
    // `metadata` is `k=v&k2=v2` with each part percent-encoded once more.
    let mut filters = Vec::new();
    if let Some(filter) = query.get("metadata") {
        for pair in filter.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            filters.push((percent_decode(k), percent_decode(v)));
        }
    }
    let states: Vec<&str> = query
        .get("state")
        .map_or_else(|| vec!["running", "paused"], |s| s.split(',').collect());
    let state = lock(&ctx.state);
    let listed: Vec<Value> = state
        .sandboxes
        .values()
        .filter(|s| filters.iter().all(|(k, v)| s.metadata.get(k) == Some(v)))
        .filter(|s| states.contains(&if s.paused { "paused" } else { "running" }))
        .map(|s| sandbox_json(s, false))
        .collect();
    axum::Json(listed).into_response()
}

async fn connect(
    State(ctx): State<Ctx>,
    Path(id): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(answer) = admit(&ctx, "connect", &method, &uri, &headers, &body) {
        return answer;
    }
    let timeout = match parse(&body).and_then(|b| timeout_of(&b)) {
        Ok(t) => t,
        Err(answer) => return answer,
    };
    let mut state = lock(&ctx.state);
    let Some(s) = state.sandboxes.get_mut(&id) else {
        return not_found(&id);
    };
    let status = if s.paused {
        s.paused = false;
        s.end_at = Instant::now() + timeout;
        s.disk.signal_all(&s.pids, rustix::process::Signal::CONT);
        StatusCode::CREATED
    } else {
        s.end_at = s.end_at.max(Instant::now() + timeout);
        StatusCode::OK
    };
    (status, axum::Json(sandbox_json(s, !s.token.is_empty()))).into_response()
}

async fn set_timeout(
    State(ctx): State<Ctx>,
    Path(id): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(answer) = admit(&ctx, "timeout", &method, &uri, &headers, &body) {
        return answer;
    }
    let timeout = match parse(&body).and_then(|b| timeout_of(&b)) {
        Ok(t) => t,
        Err(answer) => return answer,
    };
    let mut state = lock(&ctx.state);
    match state.sandboxes.get_mut(&id) {
        Some(s) if s.paused => error(409, "Sandbox is not running"),
        Some(s) => {
            s.end_at = Instant::now() + timeout;
            StatusCode::NO_CONTENT.into_response()
        }
        None => not_found(&id),
    }
}

async fn pause(
    State(ctx): State<Ctx>,
    Path(id): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    if let Err(answer) = admit(&ctx, "pause", &method, &uri, &headers, &body) {
        return answer;
    }
    let mut state = lock(&ctx.state);
    match state.sandboxes.get_mut(&id) {
        Some(s) if s.paused => error(409, &format!("Sandbox \"{id}\" is already paused")),
        Some(s) => {
            s.paused = true;
            // A paused sandbox does not expire.
            s.end_at = Instant::now() + Duration::from_secs(30 * 86_400);
            s.disk.signal_all(&s.pids, rustix::process::Signal::STOP);
            StatusCode::NO_CONTENT.into_response()
        }
        None => not_found(&id),
    }
}

async fn delete(
    State(ctx): State<Ctx>,
    Path(id): Path<String>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
) -> Response {
    if let Err(answer) = admit(&ctx, "kill", &method, &uri, &headers, &[]) {
        return answer;
    }
    if kill(&ctx.state, &id) {
        StatusCode::NO_CONTENT.into_response()
    } else {
        not_found(&id)
    }
}

/// Kills sandbox `id` and every process in it; whether it was there.
pub(crate) fn kill(state: &Shared, id: &str) -> bool {
    let mut state = lock(state);
    let Some(s) = state.sandboxes.remove(id) else {
        return false;
    };
    // The machine ends: every process in it, whatever group it made.
    s.disk.stop(&s.pids);
    state.gone.insert(id.to_owned(), s.disk);
    true
}

/// Kills sandboxes whose time is up, every 50 ms.
pub(crate) async fn evict(state: Shared) {
    loop {
        tokio::time::sleep(Duration::from_millis(50)).await;
        let now = Instant::now();
        let expired: Vec<String> = lock(&state)
            .sandboxes
            .values()
            .filter(|s| s.end_at <= now)
            .map(|s| s.id.clone())
            .collect();
        for id in expired {
            kill(&state, &id);
        }
    }
}

pub(crate) fn percent_decode(s: &str) -> String {
    let bytes = s.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'%' if i + 2 < bytes.len() => {
                let hex = std::str::from_utf8(&bytes[i + 1..i + 3]).ok();
                match hex.and_then(|h| u8::from_str_radix(h, 16).ok()) {
                    Some(b) => {
                        out.push(b);
                        i += 3;
                        continue;
                    }
                    None => out.push(b'%'),
                }
            }
            b'+' => out.push(b' '),
            b => out.push(b),
        }
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}
