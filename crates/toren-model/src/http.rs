//! The HTTP plumbing both API clients share: building the `reqwest` client (rustls with the
//! `ring` provider), sending one streaming POST, turning an HTTP error status into
//! [`Error::Api`] with the API's own message, and decoding the body as Server-Sent Events.
//! What the events mean is the business of `anthropic::stream` and `openai::stream`.

use std::time::Duration;

use eventsource_stream::{Event, EventStreamError, Eventsource};
use futures::{Stream, StreamExt};
use reqwest::header::HeaderMap;
use serde_json::Value;

use crate::error::{Error, Result};

const CONNECT_TIMEOUT: Duration = Duration::from_secs(30);
/// The longest silence tolerated between two reads of a response; local models can take
/// minutes before their first token.
const READ_TIMEOUT: Duration = Duration::from_secs(600);
/// How much of an unreadable error body goes into a message.
const MAX_ERROR_BODY: usize = 1000;

/// A client for one provider. TLS uses rustls with the `ring` crypto provider, installed
/// process-wide on first use (an already installed provider is kept).
pub(crate) fn client() -> Result<reqwest::Client> {
    // Err means some provider is installed already, which is all reqwest needs.
    let _ = rustls::crypto::ring::default_provider().install_default();
    reqwest::Client::builder()
        .connect_timeout(CONNECT_TIMEOUT)
        .read_timeout(READ_TIMEOUT)
        .build()
        .map_err(|e| Error::Client { detail: chain(&e) })
}

/// Sends `request` and, on a 2xx status, returns its body as a stream of SSE events.
pub(crate) async fn send_sse(
    provider: &'static str,
    request: reqwest::RequestBuilder,
) -> Result<impl Stream<Item = Result<Event>> + Send + Unpin> {
    let response = request
        .header(reqwest::header::ACCEPT, "text/event-stream")
        .send()
        .await
        .map_err(|e| transport(provider, &e))?;
    let status = response.status();
    if !status.is_success() {
        let retry_after = retry_after(response.headers());
        let body = response.text().await.unwrap_or_default();
        return Err(Error::Api {
            provider,
            status: status.as_u16(),
            message: error_message(&body),
            retry_after,
        });
    }
    let content_type = response
        .headers()
        .get(reqwest::header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or_default()
        .to_ascii_lowercase();
    if content_type.starts_with("application/json") {
        let body = response.text().await.unwrap_or_default();
        return Err(Error::Protocol {
            provider,
            detail: format!(
                "expected a stream (text/event-stream) but got JSON: {}; the server may not \
                 support streaming",
                truncate(body.trim())
            ),
        });
    }
    Ok(response
        .bytes_stream()
        .eventsource()
        .map(move |item| item.map_err(|e| sse_error(provider, e))))
}

pub(crate) fn transport(provider: &'static str, error: &reqwest::Error) -> Error {
    Error::Transport {
        provider,
        detail: chain(error),
    }
}

fn sse_error(provider: &'static str, error: EventStreamError<reqwest::Error>) -> Error {
    match error {
        EventStreamError::Transport(e) => transport(provider, &e),
        EventStreamError::Utf8(e) => Error::Protocol {
            provider,
            detail: format!("not UTF-8: {e}"),
        },
        EventStreamError::Parser(e) => Error::Protocol {
            provider,
            detail: format!("not a Server-Sent Events stream: {e}"),
        },
    }
}

/// Decodes one event's JSON payload.
pub(crate) fn parse_data<T: serde::de::DeserializeOwned>(
    provider: &'static str,
    data: &str,
) -> Result<T> {
    serde_json::from_str(data).map_err(|e| Error::Protocol {
        provider,
        detail: format!("invalid event data ({e}): {}", truncate(data)),
    })
}

/// `retry-after-ms` (OpenAI) or `retry-after` in whole or fractional seconds.
fn retry_after(headers: &HeaderMap) -> Option<Duration> {
    let number = |name: &str| -> Option<f64> {
        let value = headers
            .get(name)?
            .to_str()
            .ok()?
            .trim()
            .parse::<f64>()
            .ok()?;
        (value.is_finite() && value >= 0.0).then_some(value)
    };
    number("retry-after-ms")
        .map(|ms| Duration::from_secs_f64(ms / 1000.0))
        .or_else(|| number("retry-after").map(Duration::from_secs_f64))
}

/// The API's own words from an error body: `error.message` (Anthropic, OpenAI, Ollama),
/// a plain `error` or `message` string, or the body itself.
pub(crate) fn error_message(body: &str) -> String {
    let json: Option<Value> = serde_json::from_str(body).ok();
    let from_json = json.as_ref().and_then(|v| {
        v.pointer("/error/message")
            .or_else(|| v.get("error"))
            .or_else(|| v.get("message"))
            .and_then(Value::as_str)
            .map(str::to_owned)
    });
    match from_json {
        Some(message) => message,
        None if body.trim().is_empty() => "(empty response body)".to_owned(),
        None => truncate(body.trim()),
    }
}

fn truncate(text: &str) -> String {
    match text.char_indices().nth(MAX_ERROR_BODY) {
        Some((cut, _)) => format!("{}…", &text[..cut]),
        None => text.to_owned(),
    }
}

/// An error and its causes, for messages: reqwest's own text omits the interesting part
/// ("connection refused").
fn chain(error: &dyn std::error::Error) -> String {
    let mut text = error.to_string();
    let mut source = error.source();
    while let Some(cause) = source {
        let cause_text = cause.to_string();
        if !text.contains(&cause_text) {
            text.push_str(": ");
            text.push_str(&cause_text);
        }
        source = cause.source();
    }
    text
}

#[cfg(test)]
mod tests {
    use super::*;
    use reqwest::header::HeaderValue;

    #[test]
    fn error_message_prefers_the_api_text() {
        let anthropic =
            r#"{"type":"error","error":{"type":"overloaded_error","message":"Overloaded"}}"#;
        assert_eq!(error_message(anthropic), "Overloaded");
        assert_eq!(
            error_message(r#"{"error":"model not found"}"#),
            "model not found"
        );
        assert_eq!(
            error_message("<html>bad gateway</html>\n"),
            "<html>bad gateway</html>"
        );
        assert_eq!(error_message(""), "(empty response body)");
    }

    #[test]
    fn retry_after_reads_seconds_and_milliseconds() {
        let mut headers = HeaderMap::new();
        assert_eq!(retry_after(&headers), None);
        headers.insert("retry-after", HeaderValue::from_static("2"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
        headers.insert("retry-after-ms", HeaderValue::from_static("250"));
        assert_eq!(retry_after(&headers), Some(Duration::from_millis(250)));
        headers.insert("retry-after-ms", HeaderValue::from_static("soon"));
        assert_eq!(retry_after(&headers), Some(Duration::from_secs(2)));
    }
}
