//! Renders [`Reply`]s as the Anthropic Messages API would send them: the `event:`/`data:`
//! stream of `message_start`, content blocks with text and `input_json_delta` fragments,
//! `message_delta` and `message_stop`, or an error body / `error` event.

use serde_json::{Value, json};
use toren_protocol::AssistantMessage;

use super::server::{Rendered, Wire, pieces, status_reply};
use super::{FAKE_USAGE, Reply};

/// An SSE body of Anthropic events; each event's name is its `type`.
pub fn anthropic_sse(events: &[Value]) -> String {
    events
        .iter()
        .map(|event| {
            let name = event
                .get("type")
                .and_then(Value::as_str)
                .unwrap_or("message");
            format!("event: {name}\ndata: {event}\n\n")
        })
        .collect()
}

pub(crate) fn error_type(status: u16) -> &'static str {
    match status {
        400 | 413 => "invalid_request_error",
        401 => "authentication_error",
        403 => "permission_error",
        404 => "not_found_error",
        429 => "rate_limit_error",
        529 => "overloaded_error",
        _ => "api_error",
    }
}

pub(crate) fn error_body(status: u16, message: &str) -> Value {
    json!({"type": "error", "error": {"type": error_type(status), "message": message}})
}

pub(crate) fn render(reply: &Reply, model: &str, number: usize) -> Rendered {
    let sse = Rendered::sse;
    match reply {
        Reply::Turn(turn) => sse(anthropic_sse(&turn_events(turn, model, number))),
        Reply::Truncated(turn) => {
            let events = turn_events(turn, model, number);
            sse(anthropic_sse(&events[..events.len() / 2]))
        }
        Reply::StreamError {
            text,
            kind,
            message,
        } => {
            let mut events = vec![message_start(model, number)];
            events.extend(text_block(0, text));
            events.push(json!({"type": "error", "error": {"type": kind, "message": message}}));
            sse(anthropic_sse(&events))
        }
        Reply::RawSse(body) => sse(body.clone()),
        // The server never answers it (see `server::handle`).
        Reply::Hang => sse(String::new()),
        Reply::Status {
            status,
            message,
            retry_after,
        } => status_reply(Wire::Anthropic, *status, message, *retry_after),
    }
}

fn message_start(model: &str, number: usize) -> Value {
    json!({"type": "message_start", "message": {
        "id": format!("msg_fake_{number}"), "type": "message", "role": "assistant",
        "model": model, "content": [], "stop_reason": null, "stop_sequence": null,
        "usage": {"input_tokens": FAKE_USAGE.input_tokens, "output_tokens": 1},
    }})
}

fn text_block(index: usize, text: &str) -> Vec<Value> {
    let mut events = vec![
        json!({"type": "content_block_start", "index": index, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "ping"}),
    ];
    for piece in pieces(text, 5) {
        events.push(json!({"type": "content_block_delta", "index": index,
            "delta": {"type": "text_delta", "text": piece}}));
    }
    events.push(json!({"type": "content_block_stop", "index": index}));
    events
}

fn turn_events(turn: &AssistantMessage, model: &str, number: usize) -> Vec<Value> {
    let mut events = vec![message_start(model, number)];
    let mut index = 0;
    if !turn.text.is_empty() {
        events.extend(text_block(index, &turn.text));
        index += 1;
    }
    for call in &turn.tool_calls {
        events.push(
            json!({"type": "content_block_start", "index": index, "content_block": {
            "type": "tool_use", "id": call.id, "name": call.name, "input": {}}}),
        );
        let json = match &call.arguments {
            Value::String(raw) => raw.clone(),
            other => other.to_string(),
        };
        // The real API opens with an empty fragment.
        for piece in std::iter::once(String::new()).chain(pieces(&json, 7)) {
            events.push(json!({"type": "content_block_delta", "index": index,
                "delta": {"type": "input_json_delta", "partial_json": piece}}));
        }
        events.push(json!({"type": "content_block_stop", "index": index}));
        index += 1;
    }
    let stop_reason = if turn.tool_calls.is_empty() {
        "end_turn"
    } else {
        "tool_use"
    };
    events.push(json!({"type": "message_delta",
        "delta": {"stop_reason": stop_reason, "stop_sequence": null},
        "usage": {"output_tokens": FAKE_USAGE.output_tokens}}));
    events.push(json!({"type": "message_stop"}));
    events
}
