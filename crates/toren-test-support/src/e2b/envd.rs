//! The fake's data plane, envd behind E2B's proxy on one address: a request names its
//! sandbox in `E2b-Sandbox-Id` and the port in `E2b-Sandbox-Port` (49983); a gone or paused
//! sandbox answers 502 as the proxy does, a wrong or missing `X-Access-Token` 401 as envd
//! does. `process.Process/Start` is a Connect server stream over JSON: one request
//! envelope in; `start`, `data` (base64 stdout/stderr in chunks of at most 32 KiB),
//! `keepalive` (after `Keepalive-Ping-Interval` seconds of silence, default 90) and `end`
//! events out, then the end-of-stream envelope. A client going away leaves the process
//! running, as envd does. `Connect-Timeout-Ms` on Start is the process's deadline.

use std::collections::BTreeMap;
use std::io;
use std::sync::Arc;
use std::time::Duration;

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri};
use axum::response::{IntoResponse, Response};
use base64::Engine;
use base64::engine::general_purpose::STANDARD as B64;
use futures::StreamExt;
use rustix::process::Signal;
use serde_json::{Value, json};
use tokio::io::AsyncReadExt;
use tokio::sync::mpsc;

use super::{Disk, ENVD_PORT, Shared, disk, fs, lock, record};

/// Envelope flag of the stream's last message.
const END_STREAM: u8 = 0x02;
/// The largest chunk of output in one `data` event, as envd's.
const CHUNK: usize = 32 * 1024;
/// envd's own `PATH`, inherited by every process.
const ENVD_PATH: &str = "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin";

pub(crate) fn router(state: Shared) -> Router {
    // envd takes uploads of any size (the file lands on the sandbox's disk); axum's
    // default limit of 2 MiB would turn a large write_file away with 413.
    Router::new()
        .fallback(handle)
        .layer(axum::extract::DefaultBodyLimit::disable())
        .with_state(state)
}

/// One framed message.
fn envelope(flags: u8, message: &Value) -> Bytes {
    let payload = serde_json::to_vec(message).unwrap_or_default();
    let mut frame = Vec::with_capacity(payload.len() + 5);
    frame.push(flags);
    frame.extend_from_slice(
        &u32::try_from(payload.len())
            .unwrap_or(u32::MAX)
            .to_be_bytes(),
    );
    frame.extend_from_slice(&payload);
    Bytes::from(frame)
}

pub(super) fn connect_error(code: &str, message: &str) -> Response {
    let status = match code {
        "invalid_argument" => StatusCode::BAD_REQUEST,
        "unauthenticated" => StatusCode::UNAUTHORIZED,
        "permission_denied" => StatusCode::FORBIDDEN,
        "not_found" => StatusCode::NOT_FOUND,
        "already_exists" => StatusCode::CONFLICT,
        "unimplemented" => StatusCode::NOT_IMPLEMENTED,
        _ => StatusCode::INTERNAL_SERVER_ERROR,
    };
    (
        status,
        axum::Json(json!({"code": code, "message": message})),
    )
        .into_response()
}

pub(super) fn plain_error(status: u16, message: &str) -> Response {
    let code = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (
        code,
        axum::Json(json!({"code": status, "message": message})),
    )
        .into_response()
}

/// What the handlers need of the sandbox a request is routed to.
pub(super) struct Target {
    id: String,
    template: String,
    pub(super) disk: Arc<Disk>,
    internet: bool,
    env_vars: BTreeMap<String, String>,
}

async fn handle(
    State(state): State<Shared>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    record(&state, "envd", &method, &uri, &headers, &body);
    let header = |name: &str| {
        headers
            .get(name)
            .and_then(|v| v.to_str().ok())
            .map(str::to_owned)
    };
    let (Some(id), port) = (header("e2b-sandbox-id"), header("e2b-sandbox-port")) else {
        return plain_error(400, "missing E2b-Sandbox-Id");
    };
    let target = {
        let mut st = lock(&state);
        if st.faults.envd_429 > 0 {
            st.faults.envd_429 -= 1;
            return plain_error(429, "rate limit exceeded");
        }
        let html = st.faults.html_502;
        if method == Method::POST
            && uri.path() == "/files"
            && st
                .faults
                .upload_limit
                .is_some_and(|limit| body.len() > limit)
        {
            return (
                StatusCode::PAYLOAD_TOO_LARGE,
                [("content-type", "text/html")],
                "<html><head><title>413 Request Entity Too Large</title></head><body><center><h1>413 Request Entity Too Large</h1></center><hr><center>nginx</center></body></html>",
            )
                .into_response();
        }
        match st.sandboxes.get(&id) {
            Some(s) if !s.paused => {
                if port.as_deref() != Some(&ENVD_PORT.to_string()) {
                    return (
                        StatusCode::BAD_GATEWAY,
                        axum::Json(json!({"sandboxId": id, "message": "The sandbox is running but port is not open", "port": port, "code": 502})),
                    )
                        .into_response();
                }
                if uri.path() != "/health"
                    && !s.token.is_empty()
                    && header("x-access-token").as_deref() != Some(s.token.as_str())
                {
                    return plain_error(
                        401,
                        "unauthorized access, please provide a valid access token or method signing if supported",
                    );
                }
                Target {
                    id: s.id.clone(),
                    template: s.template.clone(),
                    disk: Arc::clone(&s.disk),
                    internet: s.internet,
                    env_vars: s.env_vars.clone(),
                }
            }
            _ if html => {
                return (
                    StatusCode::BAD_GATEWAY,
                    [("content-type", "text/html")],
                    "<html><head><title>502 Bad Gateway</title></head><body><center><h1>502 Bad Gateway</h1></center><hr><center>nginx</center></body></html>",
                )
                    .into_response();
            }
            _ => {
                return (
                    StatusCode::BAD_GATEWAY,
                    axum::Json(json!({"sandboxId": id, "message": "The sandbox was not found", "code": 502})),
                )
                    .into_response();
            }
        }
    };
    let user = user_of(&headers);
    match (method.as_str(), uri.path()) {
        ("GET", "/health") => StatusCode::NO_CONTENT.into_response(),
        ("POST", "/process.Process/Start") => start(&state, &target, &user, &headers, &body).await,
        ("POST", "/process.Process/SendSignal") => send_signal(&state, &target, &body),
        ("POST", path) if path.starts_with("/filesystem.Filesystem/") => {
            fs::filesystem(&target, path, &body)
        }
        ("GET", "/files") => fs::download(&target, &uri),
        ("POST", "/files") => fs::upload(&target, &uri, &headers, &body),
        _ => connect_error(
            "unimplemented",
            &format!("{method} {} is not served here", uri.path()),
        ),
    }
}

/// The user named by `Authorization: Basic base64("<user>:")`, else `user`.
fn user_of(headers: &HeaderMap) -> String {
    headers
        .get("authorization")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.strip_prefix("Basic "))
        .and_then(|b| B64.decode(b).ok())
        .and_then(|b| String::from_utf8(b).ok())
        .and_then(|s| s.split(':').next().map(str::to_owned))
        .filter(|u| !u.is_empty())
        .unwrap_or_else(|| "user".to_owned())
}

async fn start(
    state: &Shared,
    target: &Target,
    user: &str,
    headers: &HeaderMap,
    body: &[u8],
) -> Response {
    let content_type = headers.get("content-type").and_then(|v| v.to_str().ok());
    if content_type != Some("application/connect+json") {
        return connect_error("invalid_argument", "expected application/connect+json");
    }
    let Some(request) = body
        .get(5..)
        .filter(|p| {
            body.first() == Some(&0)
                && p.len() == u32::from_be_bytes([body[1], body[2], body[3], body[4]]) as usize
        })
        .and_then(|p| serde_json::from_slice::<Value>(p).ok())
    else {
        return connect_error(
            "invalid_argument",
            "the body is not one Connect envelope of JSON",
        );
    };
    if let Some(unknown) = request.as_object().and_then(|o| {
        o.keys()
            .find(|k| !["process", "pty", "tag", "stdin"].contains(&k.as_str()))
    }) {
        return stream_error("invalid_argument", &format!("unknown field \"{unknown}\""));
    }
    let process = &request["process"];
    let Some(cmd) = process.get("cmd").and_then(Value::as_str) else {
        return stream_error("invalid_argument", "process.cmd is required");
    };
    let args: Vec<String> = process
        .get("args")
        .and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|v| v.as_str().map(str::to_owned))
                .collect()
        })
        .unwrap_or_default();
    let home = if user == "root" {
        "/root".to_owned()
    } else {
        format!("/home/{user}")
    };
    let cwd = process
        .get("cwd")
        .and_then(Value::as_str)
        .unwrap_or(&home)
        .to_owned();
    if !target.disk.host_path(&cwd).is_some_and(|(p, _)| p.is_dir()) {
        return stream_error("invalid_argument", &format!("cwd '{cwd}' does not exist"));
    }
    let mut env: Vec<(String, String)> = vec![
        ("PATH".into(), ENVD_PATH.into()),
        ("HOME".into(), home.clone()),
        ("USER".into(), user.to_owned()),
        ("LOGNAME".into(), user.to_owned()),
    ];
    env.extend(target.env_vars.iter().map(|(k, v)| (k.clone(), v.clone())));
    env.push(("E2B_SANDBOX".into(), "true".into()));
    env.push(("E2B_SANDBOX_ID".into(), target.id.clone()));
    env.push(("E2B_TEMPLATE_ID".into(), target.template.clone()));
    if let Some(envs) = process.get("envs").and_then(Value::as_object) {
        for (k, v) in envs {
            env.retain(|(n, _)| n != k);
            env.push((k.clone(), v.as_str().unwrap_or_default().to_owned()));
        }
    }
    let keepalive = headers
        .get("keepalive-ping-interval")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .unwrap_or(90);
    let deadline = headers
        .get("connect-timeout-ms")
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.parse::<u64>().ok())
        .map(Duration::from_millis);
    let n = {
        let mut st = lock(state);
        st.next += 1;
        st.next
    };
    let (fifo, status) = match (target.disk.fifo("info", n), target.disk.fifo("status", n)) {
        (Ok(fifo), Ok(status)) => (fifo, status),
        (Err(e), _) | (_, Err(e)) => {
            return stream_error("internal", &format!("cannot make a FIFO: {e}"));
        }
    };
    let report = disk::read_report(status.clone());
    let mut child = match target
        .disk
        .command(
            cmd,
            &args,
            &env,
            &cwd,
            disk::Who {
                internet: target.internet,
                root: user == "root",
            },
            (&fifo, &status),
        )
        .spawn()
    {
        Ok(child) => child,
        Err(e) => {
            disk::release_fifo(&status);
            return stream_error("internal", &format!("cannot start the process: {e}"));
        }
    };
    let Some((proc, inside)) = target.disk.read_proc(fifo, n, report.pid).await else {
        let _ = child.kill().await;
        let mut why = String::new();
        if let Some(mut stderr) = child.stderr.take() {
            let _ = stderr.read_to_string(&mut why).await;
        }
        return stream_error(
            "internal",
            &format!("the process did not start: {}", why.trim()),
        );
    };
    let cut = {
        let mut st = lock(state);
        if let Some(s) = st.sandboxes.get_mut(&target.id) {
            s.pids.push(proc);
        }
        std::mem::take(&mut st.faults.cut_next_stream)
    };
    let (tx, rx) = mpsc::channel::<Result<Bytes, io::Error>>(64);
    let _ = tx
        .send(Ok(envelope(
            0,
            &json!({"event": {"start": {"pid": inside}}}),
        )))
        .await;
    if cut {
        // Once the headers and the start event are out, the connection fails.
        let tx = tx.clone();
        tokio::spawn(async move {
            tokio::time::sleep(Duration::from_millis(200)).await;
            let _ = tx
                .send(Err(io::Error::other("the stream was cut (fault switch)")))
                .await;
        });
    }
    let state = Arc::clone(state);
    let id = target.id.clone();
    tokio::spawn(async move {
        let mut stdout = child.stdout.take();
        let mut stderr = child.stderr.take();
        let (mut out_buf, mut err_buf) = (vec![0u8; CHUNK], vec![0u8; CHUNK]);
        let idle = Duration::from_secs(keepalive.max(1));
        let started = tokio::time::Instant::now();
        let mut killed_at_deadline = false;
        while stdout.is_some() || stderr.is_some() {
            let until_deadline = deadline.map(|d| d.saturating_sub(started.elapsed()));
            let event = tokio::select! {
                read = read_some(&mut stdout, &mut out_buf) => read.map(|b| json!({"data": {"stdout": B64.encode(b)}})),
                read = read_some(&mut stderr, &mut err_buf) => read.map(|b| json!({"data": {"stderr": B64.encode(b)}})),
                () = tokio::time::sleep(idle) => Some(json!({"keepalive": {}})),
                () = tokio::time::sleep(until_deadline.unwrap_or(Duration::MAX)), if until_deadline.is_some() => {
                    killed_at_deadline = true;
                    if let Some(s) = lock(&state).sandboxes.get(&id) {
                        s.pids.iter().filter(|p| p.n == n).for_each(|p| p.signal(Signal::KILL));
                    }
                    break;
                }
            };
            if let Some(event) = event {
                // Nobody listening: the output is dropped and the process runs on.
                let _ = tx.send(Ok(envelope(0, &json!({"event": event})))).await;
            }
        }
        let status = child.wait().await;
        let alive = match lock(&state).sandboxes.get_mut(&id) {
            Some(s) => {
                s.pids.retain(|p| p.n != n);
                true
            }
            None => false,
        };
        if !alive {
            // The VM is gone: its streams break, with no end event.
            let _ = tx
                .send(Err(io::Error::other("the sandbox was killed")))
                .await;
            return;
        }
        if killed_at_deadline {
            let _ = tx
                .send(Ok(envelope(END_STREAM, &json!({"error": {"code": "deadline_exceeded", "message": "context deadline exceeded"}}))))
                .await;
            return;
        }
        // How the command ended, as its reporter saw it; should it not say (it was
        // killed itself), bubblewrap's status, which tells a signal N as 128 + N.
        let ended = report.ended.await.ok().flatten().unwrap_or_else(|| {
            match status.ok().and_then(|s| s.code()) {
                Some(code) => disk::Ended::Exited(code),
                None => disk::Ended::Signaled {
                    signal: 9,
                    core: false,
                },
            }
        });
        let end = end_event(ended);
        let _ = tx
            .send(Ok(envelope(0, &json!({"event": {"end": end}}))))
            .await;
        let _ = tx.send(Ok(envelope(END_STREAM, &json!({})))).await;
    });
    let body = futures::stream::unfold(rx, |mut rx| async move {
        rx.recv().await.map(|item| (item, rx))
    });
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/connect+json")
        .body(Body::from_stream(body.boxed()))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

/// The `end` event envd sends for a process that ended so: Go's `ProcessState` as
/// envd's `Wait` reports it (`handler.go`): `exitCode` (omitted when 0; -1 for a signal),
/// `exited` (omitted when false: killed by a signal), `status` (`exit status N`,
/// `signal: killed`, `… (core dumped)`) and `error`, the same text, unless it exited 0.
fn end_event(ended: disk::Ended) -> Value {
    match ended {
        disk::Ended::Exited(0) => json!({"exited": true, "status": "exit status 0"}),
        disk::Ended::Exited(code) => {
            let status = format!("exit status {code}");
            json!({"exitCode": code, "exited": true, "status": status, "error": status})
        }
        disk::Ended::Signaled { signal, core } => {
            let status = format!(
                "signal: {}{}",
                signal_name(signal),
                if core { " (core dumped)" } else { "" }
            );
            json!({"exitCode": -1, "status": status, "error": status})
        }
    }
}

/// Go's name of a Linux signal (`syscall.Signal.String()`).
fn signal_name(signal: i32) -> String {
    let name = match signal {
        1 => "hangup",
        2 => "interrupt",
        3 => "quit",
        4 => "illegal instruction",
        5 => "trace/breakpoint trap",
        6 => "aborted",
        7 => "bus error",
        8 => "floating point exception",
        9 => "killed",
        10 => "user defined signal 1",
        11 => "segmentation fault",
        12 => "user defined signal 2",
        13 => "broken pipe",
        14 => "alarm clock",
        15 => "terminated",
        16 => "stack fault",
        17 => "child exited",
        18 => "continued",
        19 => "stopped (signal)",
        20 => "stopped",
        21 => "stopped (tty input)",
        22 => "stopped (tty output)",
        23 => "urgent I/O condition",
        24 => "CPU time limit exceeded",
        25 => "file size limit exceeded",
        26 => "virtual timer expired",
        27 => "profiling timer expired",
        28 => "window changed",
        29 => "I/O possible",
        30 => "power failure",
        31 => "bad system call",
        other => return format!("signal {other}"),
    };
    name.to_owned()
}

/// Reads what is there (up to the buffer); `None` and the reader dropped at its end.
async fn read_some<R: tokio::io::AsyncRead + Unpin>(
    reader: &mut Option<R>,
    buf: &mut [u8],
) -> Option<Vec<u8>> {
    let Some(r) = reader.as_mut() else {
        return std::future::pending().await;
    };
    match r.read(buf).await {
        Ok(0) | Err(_) => {
            *reader = None;
            None
        }
        Ok(n) => Some(buf[..n].to_vec()),
    }
}

/// A stream that fails before its first event.
fn stream_error(code: &str, message: &str) -> Response {
    let frame = envelope(
        END_STREAM,
        &json!({"error": {"code": code, "message": message}}),
    );
    Response::builder()
        .status(StatusCode::OK)
        .header("content-type", "application/connect+json")
        .body(Body::from(frame))
        .unwrap_or_else(|_| StatusCode::INTERNAL_SERVER_ERROR.into_response())
}

fn send_signal(state: &Shared, target: &Target, body: &[u8]) -> Response {
    let Ok(request) = serde_json::from_slice::<Value>(body) else {
        return connect_error("invalid_argument", "the body is not JSON");
    };
    let pid = request["process"]["pid"]
        .as_u64()
        .and_then(|p| u32::try_from(p).ok());
    let signal = match request["signal"].as_str() {
        Some("SIGNAL_SIGKILL") => Signal::KILL,
        Some("SIGNAL_SIGTERM") => Signal::TERM,
        _ => return connect_error("unimplemented", "only SIGKILL and SIGTERM are supported"),
    };
    // The pid is the sandbox's; the process is signalled through the pidfd taken when it
    // started (never by a number that may be someone else's by now). envd signals the
    // process itself, not its group.
    let state = lock(state);
    let known = pid.filter(|pid| *pid != 0).and_then(|pid| {
        state
            .sandboxes
            .get(&target.id)
            .and_then(|s| s.pids.iter().find(|p| p.inside == pid))
    });
    let Some(proc) = known else {
        return connect_error("not_found", "process not found");
    };
    proc.signal(signal);
    axum::Json(json!({})).into_response()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn end_events_are_what_envd_sends() {
        // envd's `Wait` (handler.go): ExitCode(), Exited(), String() of Go's ProcessState,
        // and the error's text (the same) unless the process exited 0; proto3 JSON omits
        // zero values.
        assert_eq!(
            end_event(disk::Ended::Exited(0)),
            json!({"exited": true, "status": "exit status 0"})
        );
        assert_eq!(
            end_event(disk::Ended::Exited(3)),
            json!({"exitCode": 3, "exited": true, "status": "exit status 3", "error": "exit status 3"})
        );
        assert_eq!(
            end_event(disk::Ended::Signaled {
                signal: 9,
                core: false
            }),
            json!({"exitCode": -1, "status": "signal: killed", "error": "signal: killed"})
        );
        assert_eq!(
            end_event(disk::Ended::Signaled {
                signal: 11,
                core: true
            })["status"],
            "signal: segmentation fault (core dumped)"
        );
        assert_eq!(signal_name(34), "signal 34");
    }
}
