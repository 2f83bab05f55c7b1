//! Renders [`Reply`]s as OpenAI Chat Completions would stream them: `data:` chunks with a
//! role delta, content deltas, tool-call fragments (the calls' argument fragments
//! interleaved, which the API allows), a finish chunk, a usage chunk with `choices: []` and
//! `data: [DONE]`; or an error body / an `{"error": …}` chunk.

use serde_json::{Value, json};
use toren_protocol::AssistantMessage;

use super::server::{Rendered, Wire, pieces, status_reply};
use super::{FAKE_USAGE, Reply};

/// An SSE body of OpenAI chunks followed by `data: [DONE]`.
pub fn openai_sse(chunks: &[Value]) -> String {
    let mut body: String = chunks
        .iter()
        .map(|chunk| format!("data: {chunk}\n\n"))
        .collect();
    body.push_str("data: [DONE]\n\n");
    body
}

pub(crate) fn error_body(status: u16, message: &str) -> Value {
    let kind = match status {
        400 | 404 | 413 => "invalid_request_error",
        401 | 403 => "authentication_error",
        429 => "rate_limit_exceeded",
        _ => "server_error",
    };
    json!({"error": {"message": message, "type": kind, "param": null, "code": null}})
}

pub(crate) fn render(reply: &Reply, model: &str, number: usize) -> Rendered {
    let sse = Rendered::sse;
    match reply {
        Reply::Turn(turn) => sse(openai_sse(&turn_chunks(turn, model, number))),
        Reply::Truncated(turn) => {
            let chunks = turn_chunks(turn, model, number);
            let body: String = chunks[..chunks.len() / 2]
                .iter()
                .map(|chunk| format!("data: {chunk}\n\n"))
                .collect();
            sse(body)
        }
        Reply::StreamError {
            text,
            kind,
            message,
        } => {
            let mut body: String = text_chunks(text, model, number)
                .iter()
                .map(|chunk| format!("data: {chunk}\n\n"))
                .collect();
            let error = json!({"error": {"message": message, "type": kind, "code": null}});
            body.push_str(&format!("data: {error}\n\n"));
            sse(body)
        }
        Reply::RawSse(body) => sse(body.clone()),
        // The server never answers it (see `server::handle`).
        Reply::Hang => sse(String::new()),
        Reply::Status {
            status,
            message,
            retry_after,
        } => status_reply(Wire::OpenAi, *status, message, *retry_after),
    }
}

fn chunk(model: &str, number: usize, delta: Value, finish_reason: Value) -> Value {
    json!({"id": format!("chatcmpl-fake-{number}"), "object": "chat.completion.chunk",
        "created": 1_700_000_000, "model": model, "system_fingerprint": "fp_fake",
        "choices": [{"index": 0, "delta": delta, "logprobs": null, "finish_reason": finish_reason}]})
}

fn text_chunks(text: &str, model: &str, number: usize) -> Vec<Value> {
    let mut chunks = vec![chunk(
        model,
        number,
        json!({"role": "assistant", "content": ""}),
        Value::Null,
    )];
    for piece in pieces(text, 5) {
        chunks.push(chunk(model, number, json!({"content": piece}), Value::Null));
    }
    chunks
}

fn turn_chunks(turn: &AssistantMessage, model: &str, number: usize) -> Vec<Value> {
    let mut chunks = text_chunks(&turn.text, model, number);
    let fragment = |index: usize, body: Value| {
        let mut call = json!({"index": index});
        if let (Some(call), Some(body)) = (call.as_object_mut(), body.as_object()) {
            call.extend(body.clone());
        }
        chunk(model, number, json!({"tool_calls": [call]}), Value::Null)
    };
    let mut arguments: Vec<Vec<String>> = Vec::new();
    for (index, call) in turn.tool_calls.iter().enumerate() {
        chunks.push(fragment(
            index,
            json!({"id": call.id, "type": "function",
            "function": {"name": call.name, "arguments": ""}}),
        ));
        let json = match &call.arguments {
            Value::String(raw) => raw.clone(),
            other => other.to_string(),
        };
        arguments.push(pieces(&json, 7));
    }
    // Round-robin over the calls, so their fragments interleave.
    let longest = arguments.iter().map(Vec::len).max().unwrap_or(0);
    for round in 0..longest {
        for (index, call_pieces) in arguments.iter().enumerate() {
            if let Some(piece) = call_pieces.get(round) {
                chunks.push(fragment(index, json!({"function": {"arguments": piece}})));
            }
        }
    }
    let finish = if turn.tool_calls.is_empty() {
        "stop"
    } else {
        "tool_calls"
    };
    chunks.push(chunk(model, number, json!({}), json!(finish)));
    chunks.push(json!({"id": format!("chatcmpl-fake-{number}"), "object": "chat.completion.chunk",
        "created": 1_700_000_000, "model": model, "choices": [],
        "usage": {"prompt_tokens": FAKE_USAGE.input_tokens, "completion_tokens": FAKE_USAGE.output_tokens,
            "total_tokens": FAKE_USAGE.input_tokens + FAKE_USAGE.output_tokens}}));
    chunks
}
