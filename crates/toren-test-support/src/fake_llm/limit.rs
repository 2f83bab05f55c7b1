//! A fake's context window: a request whose input is over the limit is refused the way the
//! real API refuses it, before any reply is used. Tokens are counted as 1 per 4 bytes of
//! the request body (the real tokenizers' average, JSON included), so a client that
//! estimates more conservatively than that never meets the refusal.

use serde_json::{Value, json};

use super::server::{Rendered, Wire};

/// The input tokens of a request body, as the fakes count them.
pub fn fake_input_tokens(body: &[u8]) -> u64 {
    (body.len() as u64).div_ceil(4)
}

/// The refusal of a request of `body` (`json`: the parsed body) to a fake with a window of
/// `limit` tokens, if it goes over: the input alone, or the input with `max_tokens`.
pub(crate) fn refusal(wire: Wire, body: &[u8], json: &Value, limit: u64) -> Option<Rendered> {
    let input = fake_input_tokens(body);
    let output = ["max_tokens", "max_completion_tokens"]
        .iter()
        .find_map(|k| json.get(k).and_then(Value::as_u64))
        .unwrap_or(0);
    if input <= limit && input + output <= limit {
        return None;
    }
    let body = match wire {
        // As api.anthropic.com answers, HTTP 400.
        Wire::Anthropic => {
            let message = if input > limit {
                format!("prompt is too long: {input} tokens > {limit} maximum")
            } else {
                format!(
                    "input length and `max_tokens` exceed context limit: {input} + {output} > \
                     {limit}, decrease input length or `max_tokens` and try again"
                )
            };
            json!({"type": "error", "error": {"type": "invalid_request_error", "message": message},
                "request_id": "req_fake_context_limit"})
        }
        // As api.openai.com answers, HTTP 400.
        Wire::OpenAi => {
            let message = if input > limit {
                format!(
                    "This model's maximum context length is {limit} tokens. However, your \
                     messages resulted in {input} tokens. Please reduce the length of the \
                     messages."
                )
            } else {
                format!(
                    "This model's maximum context length is {limit} tokens. However, you \
                     requested {} tokens ({input} in the messages, {output} in the \
                     completion). Please reduce the length of the messages or completion.",
                    input + output
                )
            };
            json!({"error": {"message": message, "type": "invalid_request_error",
                "param": "messages", "code": "context_length_exceeded"}})
        }
    };
    Some(Rendered {
        status: 400,
        headers: Vec::new(),
        body: body.to_string(),
        sse: false,
    })
}
