//! A local Telegram Bot API server for tests: `/bot{token}/{method}` for `getUpdates` (long
//! polling with offsets: an offset confirms every update below it, which is then forgotten),
//! `sendMessage`, `editMessageText`, `editMessageReplyMarkup`, `sendChatAction`,
//! `sendPhoto`/`sendDocument` (multipart; the files are kept for inspection),
//! `answerCallbackQuery`, `getFile`, and the file download at `/file/bot{token}/{path}`.
//!
//! A test scripts what the people do — [`FakeTelegram::send_text`], [`FakeTelegram::press`],
//! [`FakeTelegram::send_file`] — and reads what the bot did: [`FakeTelegram::calls`] (every
//! call, in order, its parameters and uploads), [`FakeTelegram::message`] (a bot message as
//! it stands after its edits). [`FakeTelegram::rate_limit`] makes the next call of a method
//! answer 429 with `retry_after`. [`FakeTelegram::wait_for`] blocks until a condition on
//! the calls holds, woken by each call (no polling). A wrong token is answered 401, as
//! Telegram does.

mod methods;
mod multipart;

use std::collections::{BTreeMap, HashMap, VecDeque};
use std::net::SocketAddr;
use std::sync::{Arc, Condvar, Mutex, MutexGuard, PoisonError};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use axum::Router;
use axum::body::Bytes;
use axum::extract::{Path, RawQuery, State as AxState};
use axum::http::{HeaderMap, StatusCode};
use axum::response::{IntoResponse, Response};
use axum::routing::{any, get};
use serde_json::{Value, json};
use tokio::sync::{Notify, oneshot};

pub use multipart::Upload;

/// One call the bot made.
#[derive(Clone, Debug, PartialEq)]
pub struct Call {
    pub method: String,
    /// The parameters (JSON body, query or multipart text fields) as one object.
    pub params: Value,
    /// Files uploaded with the call (multipart).
    pub uploads: Vec<Upload>,
    /// The HTTP status answered.
    pub status: u16,
}

impl Call {
    /// A string parameter.
    pub fn str(&self, name: &str) -> Option<String> {
        match self.params.get(name)? {
            Value::String(s) => Some(s.clone()),
            other => Some(other.to_string()),
        }
    }
}

/// A message the bot sent, as it stands now.
#[derive(Clone, Debug, PartialEq)]
pub struct BotMessage {
    pub chat_id: i64,
    pub message_id: i64,
    /// `text`, `photo` or `document`.
    pub kind: String,
    pub text: String,
    pub parse_mode: Option<String>,
    /// The inline keyboard, if it has one.
    pub reply_markup: Option<Value>,
    /// How many times its text was edited.
    pub edits: u32,
    pub upload: Option<Upload>,
}

impl BotMessage {
    /// The callback data of every button, in order.
    pub fn buttons(&self) -> Vec<(String, String)> {
        let Some(rows) = self
            .reply_markup
            .as_ref()
            .and_then(|m| m.get("inline_keyboard"))
            .and_then(Value::as_array)
        else {
            return Vec::new();
        };
        rows.iter()
            .filter_map(Value::as_array)
            .flatten()
            .filter_map(|b| {
                Some((
                    b.get("text")?.as_str()?.to_owned(),
                    b.get("callback_data")?.as_str()?.to_owned(),
                ))
            })
            .collect()
    }
}

#[derive(Default)]
pub(crate) struct State {
    token: String,
    /// Updates not confirmed yet.
    pending: VecDeque<Value>,
    next_update: i64,
    pub(crate) next_message: i64,
    pub(crate) next_file: u64,
    /// The highest offset a `getUpdates` confirmed with.
    confirmed: i64,
    /// How many times each update id was handed out.
    handed: BTreeMap<i64, u32>,
    calls: Vec<Call>,
    pub(crate) messages: BTreeMap<(i64, i64), BotMessage>,
    /// file id → (path, bytes), both the people's and the bot's.
    pub(crate) files: HashMap<String, (String, Vec<u8>)>,
    /// method → retry_after for the next call of it.
    limits: HashMap<String, VecDeque<u32>>,
    /// Callback query id → the answer text.
    pub(crate) answers: BTreeMap<String, String>,
}

struct Shared {
    state: Mutex<State>,
    /// Woken on every call (for [`FakeTelegram::wait_for`]).
    changed: Condvar,
    /// Woken when an update is added (for long polling).
    updates: Notify,
}

impl Shared {
    fn lock(&self) -> MutexGuard<'_, State> {
        self.state.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// A running fake Bot API. Dropping it stops the server.
pub struct FakeTelegram {
    shared: Arc<Shared>,
    addr: SocketAddr,
    shutdown: Option<oneshot::Sender<()>>,
    thread: Option<JoinHandle<()>>,
}

impl FakeTelegram {
    /// Starts the server; `token` is the one bot token it accepts.
    pub fn start(token: &str) -> anyhow::Result<Self> {
        let shared = Arc::new(Shared {
            state: Mutex::new(State {
                token: token.to_owned(),
                next_update: 1000,
                next_message: 1,
                ..State::default()
            }),
            changed: Condvar::new(),
            updates: Notify::new(),
        });
        let listener = std::net::TcpListener::bind("127.0.0.1:0")?;
        listener.set_nonblocking(true)?;
        let addr = listener.local_addr()?;
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()?;
        let (shutdown, stopped) = oneshot::channel::<()>();
        let app = Router::new()
            .route("/{bot}/{method}", any(method))
            .route("/file/{bot}/{*path}", get(download))
            .with_state(Arc::clone(&shared));
        let thread = std::thread::Builder::new()
            .name("fake-telegram".into())
            .spawn(move || {
                runtime.block_on(async move {
                    let Ok(listener) = tokio::net::TcpListener::from_std(listener) else {
                        return;
                    };
                    let server = tokio::spawn(async move { axum::serve(listener, app).await });
                    let _ = stopped.await;
                    server.abort();
                });
            })?;
        Ok(Self {
            shared,
            addr,
            shutdown: Some(shutdown),
            thread: Some(thread),
        })
    }

    /// The API's base URL (`TELEGRAM_API_URL`).
    pub fn url(&self) -> String {
        format!("http://{}", self.addr)
    }

    fn push(&self, make: impl FnOnce(i64) -> Value) -> i64 {
        let id = {
            let mut state = self.shared.lock();
            state.next_update += 1;
            let id = state.next_update;
            let mut update = make(id);
            update["update_id"] = json!(id);
            state.pending.push_back(update);
            id
        };
        self.shared.updates.notify_waiters();
        id
    }

    /// A text message from `user` in their private chat (the chat id is the user id).
    /// Returns the update id.
    pub fn send_text(&self, user: i64, text: &str) -> i64 {
        self.send_text_in(user, "private", user, text)
    }

    /// A text message from `user` in chat `chat` of `kind` (`private`, `group`,
    /// `supergroup`).
    pub fn send_text_in(&self, chat: i64, kind: &str, user: i64, text: &str) -> i64 {
        self.push(|id| {
            json!({"message": {
                "message_id": id,
                "date": 1_700_000_000,
                "chat": {"id": chat, "type": kind},
                "from": {"id": user, "is_bot": false, "first_name": format!("user{user}")},
                "text": text,
            }})
        })
    }

    /// A file sent by `user` in their private chat: as a photo (`photo`) or a document
    /// named `name`, with `caption`.
    pub fn send_file(
        &self,
        user: i64,
        name: &str,
        bytes: &[u8],
        caption: Option<&str>,
        photo: bool,
    ) -> i64 {
        let file_id = {
            let mut state = self.shared.lock();
            state.next_file += 1;
            let id = format!("in{}", state.next_file);
            let path = if photo {
                format!("photos/{id}.jpg")
            } else {
                format!("documents/{name}")
            };
            state.files.insert(id.clone(), (path, bytes.to_vec()));
            id
        };
        let size = bytes.len();
        self.push(|id| {
            let mut message = json!({
                "message_id": id,
                "date": 1_700_000_000,
                "chat": {"id": user, "type": "private"},
                "from": {"id": user, "is_bot": false, "first_name": format!("user{user}")},
            });
            if photo {
                message["photo"] = json!([
                    {"file_id": format!("{file_id}_small"), "file_unique_id": "s", "width": 90, "height": 90, "file_size": 1},
                    {"file_id": file_id, "file_unique_id": "b", "width": 800, "height": 800, "file_size": size},
                ]);
            } else {
                message["document"] =
                    json!({"file_id": file_id, "file_unique_id": "d", "file_name": name, "file_size": size});
            }
            if let Some(caption) = caption {
                message["caption"] = json!(caption);
            }
            json!({ "message": message })
        })
    }

    /// `user` presses the button with `data` under the bot's message `message_id` in
    /// their private chat. Returns the update id (also the callback query's id).
    pub fn press(&self, user: i64, message_id: i64, data: &str) -> i64 {
        self.push(|id| {
            json!({"callback_query": {
                "id": id.to_string(),
                "from": {"id": user, "is_bot": false, "first_name": format!("user{user}")},
                "chat_instance": "ci",
                "data": data,
                "message": {
                    "message_id": message_id,
                    "date": 1_700_000_000,
                    "chat": {"id": user, "type": "private"},
                },
            }})
        })
    }

    /// The next `count` calls of `method` answer 429 with `retry_after` seconds.
    pub fn rate_limit(&self, method: &str, retry_after: u32, count: usize) {
        let mut state = self.shared.lock();
        let queue = state.limits.entry(method.to_owned()).or_default();
        queue.extend(std::iter::repeat_n(retry_after, count));
    }

    /// Every call so far, in order.
    pub fn calls(&self) -> Vec<Call> {
        self.shared.lock().calls.clone()
    }

    /// The calls of `method` so far.
    pub fn calls_of(&self, method: &str) -> Vec<Call> {
        self.shared
            .lock()
            .calls
            .iter()
            .filter(|c| c.method == method)
            .cloned()
            .collect()
    }

    /// The bot's messages in `chat`, oldest first, as they stand.
    pub fn messages(&self, chat: i64) -> Vec<BotMessage> {
        self.shared
            .lock()
            .messages
            .values()
            .filter(|m| m.chat_id == chat)
            .cloned()
            .collect()
    }

    /// One bot message as it stands.
    pub fn message(&self, chat: i64, message_id: i64) -> Option<BotMessage> {
        self.shared
            .lock()
            .messages
            .get(&(chat, message_id))
            .cloned()
    }

    /// The answer given to callback query `id` (the update id of [`Self::press`]).
    pub fn answer(&self, id: i64) -> Option<String> {
        self.shared.lock().answers.get(&id.to_string()).cloned()
    }

    /// The highest offset the bot confirmed (every update below it is handled).
    pub fn confirmed(&self) -> i64 {
        self.shared.lock().confirmed
    }

    /// How many times each update was handed to the bot.
    pub fn handed(&self) -> BTreeMap<i64, u32> {
        self.shared.lock().handed.clone()
    }

    /// Blocks until `done` holds for the server's view (woken by every call), or `timeout`
    /// passes; returns whether it held.
    pub fn wait_for(&self, timeout: Duration, mut done: impl FnMut(&FakeView<'_>) -> bool) -> bool {
        let deadline = Instant::now() + timeout;
        let mut state = self.shared.lock();
        loop {
            if done(&FakeView { state: &state }) {
                return true;
            }
            let left = deadline.saturating_duration_since(Instant::now());
            if left.is_zero() {
                return false;
            }
            state = self
                .shared
                .changed
                .wait_timeout(state, left)
                .unwrap_or_else(PoisonError::into_inner)
                .0;
        }
    }
}

/// What [`FakeTelegram::wait_for`] conditions look at.
pub struct FakeView<'a> {
    state: &'a State,
}

impl FakeView<'_> {
    pub fn calls(&self) -> &[Call] {
        &self.state.calls
    }

    pub fn messages(&self, chat: i64) -> Vec<&BotMessage> {
        self.state
            .messages
            .values()
            .filter(|m| m.chat_id == chat)
            .collect()
    }

    pub fn confirmed(&self) -> i64 {
        self.state.confirmed
    }

    pub fn answer(&self, id: i64) -> Option<&String> {
        self.state.answers.get(&id.to_string())
    }

    /// How many times update `id` was handed to the bot.
    pub fn handed(&self, id: i64) -> u32 {
        self.state.handed.get(&id).copied().unwrap_or(0)
    }
}

impl Drop for FakeTelegram {
    fn drop(&mut self) {
        if let Some(shutdown) = self.shutdown.take() {
            let _ = shutdown.send(());
        }
        if let Some(thread) = self.thread.take() {
            let _ = thread.join();
        }
    }
}

pub(crate) fn ok(result: Value) -> (u16, Value) {
    (200, json!({"ok": true, "result": result}))
}

pub(crate) fn bad(code: u16, description: &str) -> (u16, Value) {
    (
        code,
        json!({"ok": false, "error_code": code, "description": description}),
    )
}

fn reply((status, body): (u16, Value)) -> Response {
    let status = StatusCode::from_u16(status).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
    (status, axum::Json(body)).into_response()
}

/// The parameters of a call: the query, then a JSON or multipart body on top.
fn params(query: Option<&str>, headers: &HeaderMap, body: &[u8]) -> (Value, Vec<Upload>) {
    let mut params = serde_json::Map::new();
    if let Some(query) = query {
        for pair in query.split('&').filter(|p| !p.is_empty()) {
            let (k, v) = pair.split_once('=').unwrap_or((pair, ""));
            params.insert(k.to_owned(), Value::String(v.to_owned()));
        }
    }
    let content_type = headers
        .get("content-type")
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let mut uploads = Vec::new();
    if content_type.starts_with("application/json") {
        if let Ok(Value::Object(map)) = serde_json::from_slice::<Value>(body) {
            params.extend(map);
        }
    } else if content_type.starts_with("multipart/form-data") {
        for part in multipart::parse(content_type, body) {
            if part.filename.is_some() {
                uploads.push(part);
            } else {
                let value = String::from_utf8_lossy(&part.bytes).into_owned();
                // A reply markup arrives as JSON text.
                let value = match part.field.as_str() {
                    "reply_markup" => serde_json::from_str(&value).unwrap_or(Value::String(value)),
                    _ => Value::String(value),
                };
                params.insert(part.field.clone(), value);
            }
        }
    }
    (Value::Object(params), uploads)
}

pub(crate) fn int(params: &Value, name: &str) -> Option<i64> {
    match params.get(name)? {
        Value::Number(n) => n.as_i64(),
        Value::String(s) => s.parse().ok(),
        _ => None,
    }
}

async fn method(
    AxState(shared): AxState<Arc<Shared>>,
    Path((bot, method)): Path<(String, String)>,
    RawQuery(query): RawQuery,
    headers: HeaderMap,
    body: Bytes,
) -> Response {
    let (params, uploads) = params(query.as_deref(), &headers, &body);
    let token_ok = bot.strip_prefix("bot") == Some(shared.lock().token.as_str());
    let answer = if !token_ok {
        bad(401, "Unauthorized")
    } else if let Some(retry) = {
        let mut state = shared.lock();
        state.limits.get_mut(&method).and_then(VecDeque::pop_front)
    } {
        (
            429,
            json!({"ok": false, "error_code": 429,
                   "description": format!("Too Many Requests: retry after {retry}"),
                   "parameters": {"retry_after": retry}}),
        )
    } else if method == "getUpdates" {
        get_updates(&shared, &params).await
    } else {
        let mut state = shared.lock();
        methods::handle(&mut state, &method, &params, &uploads)
    };
    {
        let mut state = shared.lock();
        state.calls.push(Call {
            method,
            params,
            uploads,
            status: answer.0,
        });
    }
    shared.changed.notify_all();
    reply(answer)
}

async fn get_updates(shared: &Shared, params: &Value) -> (u16, Value) {
    let offset = int(params, "offset");
    let timeout = int(params, "timeout").unwrap_or(0).clamp(0, 60);
    let limit = usize::try_from(int(params, "limit").unwrap_or(100).clamp(1, 100)).unwrap_or(100);
    let deadline = tokio::time::Instant::now() + Duration::from_secs(timeout.unsigned_abs());
    loop {
        let waiting = shared.updates.notified();
        {
            let mut state = shared.lock();
            if let Some(offset) = offset {
                state.confirmed = state.confirmed.max(offset);
                state
                    .pending
                    .retain(|u| u["update_id"].as_i64().is_some_and(|id| id >= offset));
            }
            if !state.pending.is_empty() {
                let batch: Vec<Value> = state.pending.iter().take(limit).cloned().collect();
                for update in &batch {
                    if let Some(id) = update["update_id"].as_i64() {
                        *state.handed.entry(id).or_default() += 1;
                    }
                }
                return ok(Value::Array(batch));
            }
        }
        shared.changed.notify_all();
        if tokio::time::timeout_at(deadline, waiting).await.is_err() {
            return ok(json!([]));
        }
    }
}

async fn download(
    AxState(shared): AxState<Arc<Shared>>,
    Path((bot, path)): Path<(String, String)>,
) -> Response {
    let state = shared.lock();
    if bot.strip_prefix("bot") != Some(state.token.as_str()) {
        return StatusCode::UNAUTHORIZED.into_response();
    }
    match state.files.values().find(|(p, _)| *p == path) {
        Some((_, bytes)) => (StatusCode::OK, bytes.clone()).into_response(),
        None => StatusCode::NOT_FOUND.into_response(),
    }
}
