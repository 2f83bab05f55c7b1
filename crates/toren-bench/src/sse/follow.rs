//! One client following a run's `GET /runs/{id}/events` as Server-Sent Events: the stream
//! read to its end (the server closes it after the run's final event), each journaled
//! event (those with an `id`) kept with its seq, its type and the wall-clock moment it
//! arrived. [`Parser`] is the pure part: bytes in, whole events out.

use std::time::Duration;

use anyhow::{Context as _, bail};
use futures::StreamExt as _;
use jiff::Timestamp;
use tokio::sync::mpsc;

use crate::concurrency::api::encode;
use crate::concurrency::serve::TOKEN;

/// A journaled event as a client received it.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Received {
    pub(crate) seq: u64,
    pub(crate) kind: String,
    /// When its last byte was read.
    pub(crate) at: Timestamp,
    /// The `at` of the event as journaled (from its data).
    pub(crate) journaled: Option<Timestamp>,
}

/// One SSE event: `id`, `event` and `data` as sent (data lines joined by newlines).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct SseEvent {
    pub(crate) id: Option<String>,
    pub(crate) event: Option<String>,
    pub(crate) data: String,
}

/// Cuts a byte stream into SSE events (blank-line separated; comments skipped).
#[derive(Debug, Default)]
pub(crate) struct Parser {
    buffer: Vec<u8>,
}

impl Parser {
    /// The events completed by `bytes`.
    pub(crate) fn feed(&mut self, bytes: &[u8]) -> Vec<SseEvent> {
        self.buffer.extend_from_slice(bytes);
        let mut events = Vec::new();
        while let Some(end) = find_blank_line(&self.buffer) {
            let block: Vec<u8> = self.buffer.drain(..end.0).collect();
            self.buffer.drain(..end.1 - end.0);
            if let Some(event) = parse_block(&String::from_utf8_lossy(&block)) {
                events.push(event);
            }
        }
        events
    }
}

/// Where the first blank line is: (end of the block, end of the separator).
fn find_blank_line(buffer: &[u8]) -> Option<(usize, usize)> {
    let lf = buffer
        .windows(2)
        .position(|w| w == b"\n\n")
        .map(|i| (i, i + 2));
    let crlf = buffer
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .map(|i| (i, i + 4));
    match (lf, crlf) {
        (Some(a), Some(b)) => Some(if a.0 <= b.0 { a } else { b }),
        (a, b) => a.or(b),
    }
}

fn parse_block(block: &str) -> Option<SseEvent> {
    let mut event = SseEvent::default();
    let mut data = Vec::new();
    let mut any = false;
    for line in block.lines() {
        if line.starts_with(':') || line.is_empty() {
            continue;
        }
        let (field, value) = line.split_once(':').unwrap_or((line, ""));
        let value = value.strip_prefix(' ').unwrap_or(value);
        any = true;
        match field {
            "id" => event.id = Some(value.to_owned()),
            "event" => event.event = Some(value.to_owned()),
            "data" => data.push(value),
            _ => {}
        }
    }
    event.data = data.join("\n");
    any.then_some(event)
}

/// Follows run `run` until the server ends the stream; tells `following` once the stream
/// is open (its first event read). The journaled events received, in order.
pub(crate) async fn follow(
    client: reqwest::Client,
    base: String,
    run: String,
    following: mpsc::UnboundedSender<()>,
    within: Duration,
) -> anyhow::Result<Vec<Received>> {
    let response = client
        .get(format!("{base}/runs/{}/events", encode(&run)))
        .bearer_auth(TOKEN)
        .header("accept", "text/event-stream")
        .send()
        .await
        .context("GET /runs/{id}/events")?;
    if !response.status().is_success() {
        bail!("GET /runs/{{id}}/events answered {}", response.status());
    }
    let mut parser = Parser::default();
    let mut received = Vec::new();
    let mut told = Some(following);
    let mut body = response.bytes_stream();
    let read = async {
        while let Some(chunk) = body.next().await {
            let chunk = chunk.context("reading the event stream")?;
            let at = Timestamp::now();
            for event in parser.feed(&chunk) {
                let Some(id) = event.id else { continue };
                let seq = id
                    .parse()
                    .with_context(|| format!("the event id {id:?} is not a seq"))?;
                let journaled = serde_json::from_str::<serde_json::Value>(&event.data)
                    .ok()
                    .and_then(|v| v.get("at")?.as_str()?.parse().ok());
                received.push(Received {
                    seq,
                    kind: event.event.unwrap_or_default(),
                    at,
                    journaled,
                });
                if let Some(told) = told.take() {
                    let _ = told.send(());
                }
            }
        }
        anyhow::Ok(())
    };
    tokio::time::timeout(within, read)
        .await
        .context("the event stream did not end in time")??;
    Ok(received)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn events_cut_anywhere_come_out_whole() {
        let body = ": heartbeat\n\nid: 1\nevent: run_created\ndata: {\"a\":1}\n\nevent: text\ndata: {\"text\":\"hi\"}\r\n\r\nid: 2\nevent: run_completed\ndata: x\ndata: y\n\n";
        let want = vec![
            SseEvent {
                id: Some("1".into()),
                event: Some("run_created".into()),
                data: "{\"a\":1}".into(),
            },
            SseEvent {
                id: None,
                event: Some("text".into()),
                data: "{\"text\":\"hi\"}".into(),
            },
            SseEvent {
                id: Some("2".into()),
                event: Some("run_completed".into()),
                data: "x\ny".into(),
            },
        ];
        for size in [1, 2, 3, 7, body.len()] {
            let mut parser = Parser::default();
            let got: Vec<SseEvent> = body
                .as_bytes()
                .chunks(size)
                .flat_map(|c| parser.feed(c))
                .collect();
            assert_eq!(got, want, "cut every {size} bytes");
        }
    }
}
