//! Fake model servers: an axum app on `127.0.0.1:0`, run on its own thread and runtime (so
//! it works from sync and async tests alike), that records every request and answers each
//! with the next scripted [`Reply`], rendered by `anthropic` or `openai` into the real SSE
//! wire format and streamed in small chunks cut at arbitrary byte positions (mid-line,
//! mid-JSON, mid-UTF-8), with tiny pauses so the client really sees them separately.

mod anthropic;
mod limit;
mod openai;
mod server;

use std::collections::BTreeMap;

use serde_json::Value;
use toren_protocol::{AssistantMessage, Usage};

pub use anthropic::anthropic_sse;
pub use limit::fake_input_tokens;
pub use openai::openai_sse;
use server::{FakeServer, Wire};

/// The token counts every rendered turn reports.
pub const FAKE_USAGE: Usage = Usage::new(42, 7);

/// One scripted answer of a fake server.
#[derive(Clone, Debug, PartialEq)]
pub enum Reply {
    /// A complete turn, rendered into the protocol's stream. Text arrives in several
    /// deltas; tool arguments in several fragments (a `Value::String` is sent as the raw,
    /// possibly invalid, JSON text). Ids are the message's own.
    Turn(AssistantMessage),
    /// An HTTP error with the protocol's error body; `retry_after` (seconds) sets the
    /// `retry-after` header.
    Status {
        status: u16,
        message: String,
        retry_after: Option<u64>,
    },
    /// HTTP 200, `text` streamed, then an error inside the stream (Anthropic
    /// `event: error`, OpenAI `{"error": …}`) of type `kind`.
    StreamError {
        text: String,
        kind: String,
        message: String,
    },
    /// HTTP 200 and the turn's stream, cut off halfway.
    Truncated(AssistantMessage),
    /// HTTP 200 with exactly this SSE body, still streamed in small chunks.
    RawSse(String),
    /// No answer at all: the request is received and recorded, then left waiting (until
    /// the client gives up or its process is killed).
    Hang,
}

impl Reply {
    /// A turn with only text.
    pub fn text(text: &str) -> Reply {
        Reply::Turn(AssistantMessage {
            text: text.to_owned(),
            tool_calls: Vec::new(),
        })
    }

    /// Replies for a sequence of turns, e.g. `toren_model::scripted::Script::turns()`, so
    /// one scenario runs against the scripted provider and both fakes alike.
    pub fn turns(turns: impl IntoIterator<Item = AssistantMessage>) -> Vec<Reply> {
        turns.into_iter().map(Reply::Turn).collect()
    }
}

/// One request a fake received.
#[derive(Clone, Debug, PartialEq)]
pub struct ReceivedRequest {
    pub method: String,
    pub path: String,
    /// Header names in lower case.
    pub headers: BTreeMap<String, String>,
    /// The JSON body (`Value::Null` if it was not JSON).
    pub body: Value,
    /// The body's bytes, as sent.
    pub raw_body: Vec<u8>,
}

impl ReceivedRequest {
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .get(&name.to_ascii_lowercase())
            .map(String::as_str)
    }
}

macro_rules! fake_handle {
    ($name:ident, $wire:expr, $doc:literal) => {
        #[doc = $doc]
        pub struct $name {
            server: FakeServer,
        }

        impl $name {
            /// Starts the server; it stops when the handle is dropped.
            pub fn start(replies: impl IntoIterator<Item = Reply>) -> anyhow::Result<Self> {
                Ok($name {
                    server: FakeServer::start($wire, replies.into_iter().collect())?,
                })
            }

            /// Queues another reply.
            pub fn push(&self, reply: Reply) {
                self.server.push(reply);
            }

            /// Every request received so far, in order.
            pub fn requests(&self) -> Vec<ReceivedRequest> {
                self.server.requests()
            }

            /// Gives the server a context window of `tokens` (counted as
            /// [`fake_input_tokens`]): a larger request, or one whose input and
            /// `max_tokens` together are larger, is refused with the real API's HTTP 400
            /// (`prompt is too long: N tokens > M maximum`) and uses no reply.
            pub fn limit_input_tokens(&self, tokens: u64) {
                self.server.limit_input_tokens(Some(tokens));
            }

            /// Streams every body in one piece from now on, for long runs where cutting
            /// them in small chunks would only cost time (the clients' parsers are tested
            /// on cut streams elsewhere).
            pub fn stream_whole(&self) {
                self.server.stream_whole();
            }

            /// When the last byte of each streamed answer was handed to the connection, in
            /// the order the answers were sent (bodies streamed in chunks only, not after
            /// [`Self::stream_whole`]).
            pub fn last_bytes(&self) -> Vec<std::time::Instant> {
                self.server.last_bytes()
            }

            /// Replies not yet used.
            pub fn remaining(&self) -> usize {
                self.server.remaining()
            }

            /// `http://127.0.0.1:PORT`, without a path.
            pub fn host_url(&self) -> String {
                self.server.host_url()
            }
        }
    };
}

fake_handle!(
    FakeAnthropic,
    Wire::Anthropic,
    "A fake Anthropic Messages API serving `POST /v1/messages`."
);
fake_handle!(
    FakeOpenAi,
    Wire::OpenAi,
    "A fake OpenAI Chat Completions API serving `POST /v1/chat/completions`. Also stands \
     in for Ollama: its host URL is what `ollama_host` expects."
);

impl FakeAnthropic {
    /// The value for `ANTHROPIC_BASE_URL` (no `/v1`).
    pub fn base_url(&self) -> String {
        self.server.host_url()
    }
}

impl FakeOpenAi {
    /// The value for `OPENAI_BASE_URL` (with `/v1`).
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.server.host_url())
    }
}
