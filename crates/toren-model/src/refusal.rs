//! Telling a provider's refusal of a request too large for the model's window from other
//! errors, with the numbers it gives: Anthropic's `prompt is too long: N tokens > M maximum`
//! and `input length and `max_tokens` exceed context limit: N + K > M`, OpenAI's
//! `maximum context length is M tokens. However, your messages resulted in N tokens` (or
//! `you requested T tokens (N in the messages, K in the completion)`) and its
//! `context_length_exceeded`. The state machine compacts and learns from it instead of
//! failing the run.

use toren_protocol::SizeRefusal;

use crate::error::Error;

impl Error {
    /// The provider refused the request as too large for the model's context window.
    pub fn size_refusal(&self) -> Option<SizeRefusal> {
        match self {
            Error::Api {
                status: 400 | 413,
                message,
                ..
            } => parse(message),
            Error::Stream { kind, message, .. } if kind == "invalid_request_error" => {
                parse(message)
            }
            Error::Api { .. }
            | Error::Stream { .. }
            | Error::MissingKey { .. }
            | Error::InvalidModel { .. }
            | Error::UnknownProvider { .. }
            | Error::Script { .. }
            | Error::Client { .. }
            | Error::Transport { .. }
            | Error::Truncated { .. }
            | Error::Protocol { .. } => None,
        }
    }
}

fn parse(message: &str) -> Option<SizeRefusal> {
    let lower = message.to_ascii_lowercase();
    let after = |marker: &str| lower.find(marker).map(|i| &lower[i + marker.len()..]);
    let (input_tokens, limit_tokens) = if let Some(rest) = after("prompt is too long: ") {
        let n = numbers(rest);
        (n.first().copied(), n.get(1).copied())
    } else if let Some(rest) = after("exceed context limit: ") {
        let n = numbers(rest);
        (n.first().copied(), n.get(2).copied())
    } else if let Some(rest) = after("maximum context length is ") {
        let n = numbers(rest);
        let input = if rest.contains(" in the messages") {
            n.get(2)
        } else {
            n.get(1)
        };
        (input.copied(), n.first().copied())
    } else if lower.contains("context_length_exceeded")
        || (lower.contains("context window") && lower.contains("exceed"))
    {
        (None, None)
    } else {
        return None;
    };
    Some(SizeRefusal {
        input_tokens,
        limit_tokens,
        message: message.to_owned(),
    })
}

/// The integers in `text`, in order (`1,234` is one).
fn numbers(text: &str) -> Vec<u64> {
    let mut out = Vec::new();
    let mut current: Option<u64> = None;
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        if let Some(d) = c.to_digit(10) {
            current = Some(
                current
                    .unwrap_or(0)
                    .saturating_mul(10)
                    .saturating_add(u64::from(d)),
            );
        } else if c == ',' && current.is_some() && chars.peek().is_some_and(char::is_ascii_digit) {
            continue;
        } else if let Some(n) = current.take() {
            out.push(n);
        }
    }
    out.extend(current);
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn api(status: u16, message: &str) -> Error {
        Error::Api {
            provider: "anthropic",
            status,
            message: message.to_owned(),
            retry_after: None,
        }
    }

    fn numbers_of(error: &Error) -> Option<(Option<u64>, Option<u64>)> {
        error
            .size_refusal()
            .map(|r| (r.input_tokens, r.limit_tokens))
    }

    #[test]
    fn the_providers_refusals_are_recognised_with_their_numbers() {
        let cases = [
            (
                "prompt is too long: 215432 tokens > 200000 maximum",
                Some((Some(215_432), Some(200_000))),
            ),
            (
                "input length and `max_tokens` exceed context limit: 188240 + 21333 > 200000, \
                 decrease input length or `max_tokens` and try again",
                Some((Some(188_240), Some(200_000))),
            ),
            (
                "This model's maximum context length is 128000 tokens. However, your messages \
                 resulted in 130,512 tokens. Please reduce the length of the messages.",
                Some((Some(130_512), Some(128_000))),
            ),
            (
                "This model's maximum context length is 16385 tokens. However, you requested \
                 21000 tokens (17000 in the messages, 4000 in the completion). Please reduce \
                 the length of the messages or completion.",
                Some((Some(17_000), Some(16_385))),
            ),
            (
                "Your input exceeds the context window of this model.",
                Some((None, None)),
            ),
            ("max_tokens: 0 must be at least 1", None),
        ];
        for (message, want) in cases {
            assert_eq!(numbers_of(&api(400, message)), want, "{message}");
        }
        let refusal = api(400, "prompt is too long: 3 tokens > 2 maximum").size_refusal();
        assert_eq!(
            refusal.map(|r| r.message),
            Some("prompt is too long: 3 tokens > 2 maximum".to_owned())
        );
    }

    #[test]
    fn other_errors_are_not_refusals() {
        assert_eq!(
            numbers_of(&api(429, "prompt is too long: 3 tokens > 2 maximum")),
            None
        );
        assert_eq!(numbers_of(&Error::Truncated { provider: "openai" }), None);
    }
}
