//! The HTTP side of the fakes: binds `127.0.0.1:0`, runs axum on a dedicated thread with
//! its own runtime, records requests, pops the next reply, and streams the rendered body in
//! awkwardly cut chunks. Rendering belongs to `super::anthropic` / `super::openai`.

use std::collections::{BTreeMap, VecDeque};
use std::convert::Infallible;
use std::sync::{Arc, Mutex, MutexGuard};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::{Body, Bytes};
use axum::extract::State;
use axum::http::{HeaderMap, Method, StatusCode, Uri, header};
use axum::response::{IntoResponse, Response};
use futures::StreamExt;
use serde_json::Value;
use tokio::sync::oneshot;

use super::{ReceivedRequest, Reply, anthropic, limit, openai};

/// Which wire protocol a fake speaks.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Wire {
    Anthropic,
    OpenAi,
}

impl Wire {
    fn path(self) -> &'static str {
        match self {
            Wire::Anthropic => "/v1/messages",
            Wire::OpenAi => "/v1/chat/completions",
        }
    }

    fn error_body(self, status: u16, message: &str) -> Value {
        match self {
            Wire::Anthropic => anthropic::error_body(status, message),
            Wire::OpenAi => openai::error_body(status, message),
        }
    }
}

/// A rendered reply: a status, extra headers and an SSE or JSON body.
pub(crate) struct Rendered {
    pub(crate) status: u16,
    pub(crate) headers: Vec<(&'static str, String)>,
    pub(crate) body: String,
    pub(crate) sse: bool,
}

impl Rendered {
    /// HTTP 200 with an event stream.
    pub(crate) fn sse(body: String) -> Self {
        Self {
            status: 200,
            headers: Vec::new(),
            body,
            sse: true,
        }
    }
}

#[derive(Default)]
struct Queue {
    replies: VecDeque<Reply>,
    requests: Vec<ReceivedRequest>,
    /// The context window, in tokens (see `limit`); `None`: no limit.
    input_limit: Option<u64>,
    /// Stream bodies in one piece instead of cut in small chunks.
    whole: bool,
    /// When the last byte of each streamed body was handed to the connection, in order
    /// (for benchmarks that time what a client does after a model's last byte).
    last_bytes: Vec<Instant>,
}

struct Shared {
    wire: Wire,
    queue: Mutex<Queue>,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, Queue> {
        // A test that panicked while holding the lock already failed; keep serving.
        self.queue
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
    }
}

pub(crate) struct FakeServer {
    shared: Arc<Shared>,
    url: String,
    stop: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeServer {
    pub(crate) fn start(wire: Wire, replies: VecDeque<Reply>) -> anyhow::Result<Self> {
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let url = format!("http://{}", listener.local_addr()?);
        let shared = Arc::new(Shared {
            wire,
            queue: Mutex::new(Queue {
                replies,
                ..Queue::default()
            }),
        });
        let app = Router::new()
            .fallback(handle)
            .with_state(Arc::clone(&shared));
        let (stop, stopped) = oneshot::channel::<()>();
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let thread = std::thread::Builder::new()
            .name("fake-llm".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    tokio::select! {
                        _ = axum::serve(listener, app) => {}
                        _ = stopped => {}
                    }
                });
            })?;
        Ok(FakeServer {
            shared,
            url,
            stop: Some(stop),
            thread: Some(thread),
        })
    }

    pub(crate) fn host_url(&self) -> String {
        self.url.clone()
    }

    pub(crate) fn push(&self, reply: Reply) {
        self.shared.lock().replies.push_back(reply);
    }

    pub(crate) fn requests(&self) -> Vec<ReceivedRequest> {
        self.shared.lock().requests.clone()
    }

    pub(crate) fn stream_whole(&self) {
        self.shared.lock().whole = true;
    }

    pub(crate) fn limit_input_tokens(&self, limit: Option<u64>) {
        self.shared.lock().input_limit = limit;
    }

    pub(crate) fn remaining(&self) -> usize {
        self.shared.lock().replies.len()
    }

    pub(crate) fn last_bytes(&self) -> Vec<Instant> {
        self.shared.lock().last_bytes.clone()
    }
}

impl Drop for FakeServer {
    fn drop(&mut self) {
        if let Some(stop) = self.stop.take() {
            let _ = stop.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

async fn handle(
    State(shared): State<Arc<Shared>>,
    method: Method,
    uri: Uri,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let received = ReceivedRequest {
        method: method.to_string(),
        path: uri.path().to_owned(),
        headers: headers
            .iter()
            .map(|(k, v)| {
                (
                    k.as_str().to_owned(),
                    String::from_utf8_lossy(v.as_bytes()).into_owned(),
                )
            })
            .collect::<BTreeMap<_, _>>(),
        body: serde_json::from_slice(&body).unwrap_or(Value::Null),
        raw_body: body.to_vec(),
    };
    let wire = shared.wire;
    let (number, reply, refused, whole) = {
        let mut queue = shared.lock();
        queue.requests.push(received.clone());
        let number = queue.requests.len();
        let call = method == Method::POST && uri.path() == wire.path();
        // Too large for the window: refused as the real API does, no reply used.
        let refused = queue
            .input_limit
            .filter(|_| call)
            .and_then(|l| limit::refusal(wire, &body, &received.body, l));
        let reply = if call && refused.is_none() {
            queue.replies.pop_front()
        } else {
            None
        };
        (number, reply, refused, queue.whole)
    };
    if let Some(refused) = refused {
        return respond(refused, number as u64, &shared);
    }
    if reply == Some(Reply::Hang) {
        // Never answers: the client waits until it gives up or is killed.
        std::future::pending::<()>().await;
    }
    let model = received
        .body
        .get("model")
        .and_then(Value::as_str)
        .unwrap_or("fake-model");
    let rendered = match reply {
        Some(reply) => match wire {
            Wire::Anthropic => anthropic::render(&reply, model, number),
            Wire::OpenAi => openai::render(&reply, model, number),
        },
        None if uri.path() != wire.path() => json_error(
            wire,
            404,
            &format!(
                "fake server: no route for {method} {}; use {}",
                uri.path(),
                wire.path()
            ),
        ),
        None => json_error(
            wire,
            400,
            &format!("fake server: no scripted reply left for request #{number}"),
        ),
    };
    if whole {
        return respond_whole(rendered);
    }
    respond(rendered, number as u64, &shared)
}

/// `rendered` in one piece.
fn respond_whole(rendered: Rendered) -> Response {
    let status = StatusCode::from_u16(rendered.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = if rendered.sse {
        "text/event-stream"
    } else {
        "application/json"
    };
    let mut response = (status, rendered.body).into_response();
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    for (name, value) in rendered.headers {
        if let Ok(value) = header::HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    response
}

pub(crate) fn json_error(wire: Wire, status: u16, message: &str) -> Rendered {
    status_reply(wire, status, message, None)
}

/// An HTTP error in the protocol's error shape, with `retry-after` (seconds) if given.
pub(crate) fn status_reply(
    wire: Wire,
    status: u16,
    message: &str,
    retry_after: Option<u64>,
) -> Rendered {
    Rendered {
        status,
        headers: retry_after
            .map(|s| ("retry-after", s.to_string()))
            .into_iter()
            .collect(),
        body: wire.error_body(status, message).to_string(),
        sse: false,
    }
}

fn respond(rendered: Rendered, seed: u64, shared: &Arc<Shared>) -> Response {
    let status = StatusCode::from_u16(rendered.status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    let content_type = if rendered.sse {
        "text/event-stream"
    } else {
        "application/json"
    };
    let mut response = if rendered.sse {
        let pieces = cut(rendered.body.into_bytes(), seed);
        let last = pieces.len().saturating_sub(1);
        let shared = Arc::clone(shared);
        let stream =
            futures::stream::iter(pieces.into_iter().enumerate()).then(move |(n, piece)| {
                let shared = Arc::clone(&shared);
                async move {
                    if n % 20 == 19 {
                        tokio::time::sleep(Duration::from_millis(1)).await;
                    } else {
                        tokio::task::yield_now().await;
                    }
                    if n == last {
                        shared.lock().last_bytes.push(Instant::now());
                    }
                    Ok::<_, Infallible>(piece)
                }
            });
        (status, Body::from_stream(stream)).into_response()
    } else {
        (status, rendered.body).into_response()
    };
    let headers = response.headers_mut();
    headers.insert(
        header::CONTENT_TYPE,
        header::HeaderValue::from_static(content_type),
    );
    for (name, value) in rendered.headers {
        if let Ok(value) = header::HeaderValue::from_str(&value) {
            headers.insert(name, value);
        }
    }
    response
}

/// Cuts `body` into pieces of 1 to 13 bytes with a seeded generator, so every run of a
/// test sees the same awkward boundaries.
fn cut(body: Vec<u8>, seed: u64) -> Vec<Bytes> {
    let body = Bytes::from(body);
    let mut state = seed
        .wrapping_mul(6364136223846793005)
        .wrapping_add(1442695040888963407);
    let mut pieces = Vec::new();
    let mut start = 0;
    while start < body.len() {
        state = state
            .wrapping_mul(6364136223846793005)
            .wrapping_add(1442695040888963407);
        let size = 1 + (state >> 59) as usize % 13;
        let end = (start + size).min(body.len());
        pieces.push(body.slice(start..end));
        start = end;
    }
    pieces
}

/// Splits `text` into pieces of at most `size` characters (never inside a character).
pub(crate) fn pieces(text: &str, size: usize) -> Vec<String> {
    let chars: Vec<char> = text.chars().collect();
    chars
        .chunks(size.max(1))
        .map(|c| c.iter().collect())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cut_keeps_every_byte_in_order() {
        let body = "data: {\"text\":\"héllo wörld\"}\n\n"
            .repeat(20)
            .into_bytes();
        let pieces = cut(body.clone(), 7);
        assert!(pieces.len() > 20);
        assert!(pieces.iter().all(|p| (1..=13).contains(&p.len())));
        assert_eq!(pieces.concat(), body);
    }

    #[test]
    fn pieces_split_on_characters() {
        assert_eq!(pieces("héllo", 2), vec!["hé", "ll", "o"]);
        assert!(pieces("", 3).is_empty());
    }
}
