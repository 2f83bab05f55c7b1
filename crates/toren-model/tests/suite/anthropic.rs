//! The Anthropic client against the fake Messages API.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::json;
use toren_model::anthropic::{AnthropicConfig, AnthropicProvider};
use toren_model::{Error, ModelProvider, ModelResponse};
use toren_protocol::{Message, ToolResult, Usage};
use toren_test_support::{FAKE_USAGE, FakeAnthropic, Reply, anthropic_sse};

use super::common::{Collected, anthropic, call, dead_url, fast_retry, request, turn, user};

#[tokio::test]
async fn streams_text_and_several_tool_calls_cut_at_odd_bytes() {
    let expected = turn(
        "Looking around — ünïcödé ✓ and a longer sentence to cut in pieces.",
        vec![
            call("toolu_1", "bash", json!({"command": "ls -la"})),
            call(
                "toolu_2",
                "write_file",
                json!({"path": "notes.txt", "content": "hé\n{\"x\": [1, 2]}"}),
            ),
        ],
    );
    let fake = FakeAnthropic::start([Reply::Turn(expected.clone())]).unwrap();
    let seen = Collected::default();

    let response = anthropic(&fake)
        .respond(&request(vec![user("hi")]), &seen.sink())
        .await
        .unwrap();

    assert_eq!(
        response,
        ModelResponse {
            message: expected.clone(),
            stop_reason: "tool_use".into(),
            usage: FAKE_USAGE,
            model: "claude-test".into(),
        }
    );
    assert_eq!(seen.text(), expected.text);
    assert!(
        seen.pieces().len() > 5,
        "text arrives in deltas: {:?}",
        seen.pieces()
    );
}

#[tokio::test]
async fn sends_the_documented_request() {
    let fake = FakeAnthropic::start([Reply::text("ok")]).unwrap();
    let conversation = vec![
        user("list files"),
        Message::Assistant(turn(
            "Sure.",
            vec![
                call("toolu_1", "bash", json!({"command": "ls"})),
                call("toolu_2", "bash", json!("{\"command\": \"broken")),
            ],
        )),
        Message::ToolResults {
            results: vec![
                ToolResult {
                    call_id: "toolu_1".into(),
                    content: "a.txt\n".into(),
                    is_error: false,
                },
                ToolResult {
                    call_id: "toolu_2".into(),
                    content: "invalid JSON".into(),
                    is_error: true,
                },
            ],
        },
        user("and now?"),
        Message::Assistant(turn(
            "",
            vec![call("toolu_3", "bash", json!({"command": "pwd"}))],
        )),
    ];

    anthropic(&fake)
        .respond(&request(conversation), &|_: &str| {})
        .await
        .unwrap();

    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    let sent = &requests[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/messages")
    );
    assert_eq!(sent.header("x-api-key"), Some("sk-ant-test"));
    assert_eq!(sent.header("anthropic-version"), Some("2023-06-01"));
    assert_eq!(sent.header("content-type"), Some("application/json"));
    assert_eq!(
        sent.body,
        json!({
            "model": "claude-test",
            "max_tokens": 1024,
            "system": "You are a test.",
            "stream": true,
            "tools": [
                {"name": "bash", "description": "Run a command.", "input_schema": {
                    "type": "object", "properties": {"command": {"type": "string"}},
                    "required": ["command"]}},
                {"name": "write_file", "description": "Write a file.", "input_schema": {
                    "type": "object", "properties": {
                        "path": {"type": "string"}, "content": {"type": "string"}}}},
            ],
            "messages": [
                {"role": "user", "content": [{"type": "text", "text": "list files"}]},
                {"role": "assistant", "content": [
                    {"type": "text", "text": "Sure."},
                    {"type": "tool_use", "id": "toolu_1", "name": "bash", "input": {"command": "ls"}},
                    {"type": "tool_use", "id": "toolu_2", "name": "bash", "input": {}},
                ]},
                {"role": "user", "content": [
                    {"type": "tool_result", "tool_use_id": "toolu_1", "content": "a.txt\n", "is_error": false},
                    {"type": "tool_result", "tool_use_id": "toolu_2", "content": "invalid JSON", "is_error": true},
                    {"type": "text", "text": "and now?"},
                ]},
                {"role": "assistant", "content": [
                    {"type": "tool_use", "id": "toolu_3", "name": "bash", "input": {"command": "pwd"}},
                ]},
            ],
        })
    );
}

#[tokio::test]
async fn tool_input_that_is_not_json_reaches_the_tool_as_a_string() {
    let raw = "{\"command\": \"ls";
    let fake = FakeAnthropic::start([Reply::Turn(turn(
        "",
        vec![call("toolu_9", "bash", json!(raw))],
    ))])
    .unwrap();

    let response = anthropic(&fake)
        .respond(&request(vec![user("go")]), &|_: &str| {})
        .await
        .unwrap();

    assert_eq!(
        response.message.tool_calls,
        vec![call("toolu_9", "bash", json!(raw))]
    );
}

#[tokio::test]
async fn empty_tool_input_is_an_empty_object_and_unknown_blocks_are_ignored() {
    let body = anthropic_sse(&[
        json!({"type": "message_start", "message": {"model": "claude-x", "usage": {
            "input_tokens": 10, "cache_read_input_tokens": 5, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "thinking", "thinking": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "thinking_delta", "thinking": "hmm"}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "signature_delta", "signature": "s"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "some_future_event", "data": 1}),
        json!({"type": "content_block_start", "index": 1, "content_block": {"type": "tool_use", "id": "t1", "name": "bash", "input": {}}}),
        json!({"type": "content_block_delta", "index": 1, "delta": {"type": "input_json_delta", "partial_json": ""}}),
        json!({"type": "content_block_stop", "index": 1}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"}, "usage": {"output_tokens": 3}}),
        json!({"type": "message_delta", "delta": {}, "usage": {"output_tokens": 9}}),
        json!({"type": "message_stop"}),
    ]);
    let fake = FakeAnthropic::start([Reply::RawSse(body)]).unwrap();

    let response = anthropic(&fake)
        .respond(&request(vec![user("go")]), &|_: &str| {})
        .await
        .unwrap();

    assert_eq!(
        response,
        ModelResponse {
            message: turn("", vec![call("t1", "bash", json!({}))]),
            stop_reason: "tool_use".into(),
            usage: Usage {
                cache_read_input_tokens: 5,
                ..Usage::new(15, 9)
            },
            model: "claude-x".into(),
        }
    );
}

#[tokio::test]
async fn rate_limit_waits_for_retry_after_then_succeeds() {
    let fake = FakeAnthropic::start([
        Reply::Status {
            status: 429,
            message: "slow down".into(),
            retry_after: Some(1),
        },
        Reply::text("finally"),
    ])
    .unwrap();
    let started = Instant::now();

    let response = anthropic(&fake)
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap();

    assert_eq!(response.message.text, "finally");
    assert_eq!(fake.requests().len(), 2);
    assert!(
        started.elapsed() >= Duration::from_secs(1),
        "retry-after: 1 was not honoured"
    );
}

#[tokio::test]
async fn overloaded_and_server_errors_are_retried() {
    let fake = FakeAnthropic::start([
        Reply::Status {
            status: 529,
            message: "Overloaded".into(),
            retry_after: None,
        },
        Reply::Status {
            status: 500,
            message: "boom".into(),
            retry_after: None,
        },
        Reply::text("ok"),
    ])
    .unwrap();

    let response = anthropic(&fake)
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap();

    assert_eq!(response.message.text, "ok");
    assert_eq!(fake.requests().len(), 3);
    assert!(
        fake.requests()
            .iter()
            .all(|r| r.body == fake.requests()[0].body)
    );
}

#[tokio::test]
async fn retries_are_bounded_and_the_last_error_says_what_happened() {
    let overloaded = || Reply::Status {
        status: 529,
        message: "Overloaded".into(),
        retry_after: None,
    };
    let fake = FakeAnthropic::start([
        overloaded(),
        overloaded(),
        overloaded(),
        overloaded(),
        Reply::text("never"),
    ])
    .unwrap();

    let error = anthropic(&fake)
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap_err();

    assert!(matches!(error, Error::Api { status: 529, .. }), "{error:?}");
    assert!(error.is_retryable());
    assert_eq!(
        error.to_string(),
        "anthropic API returned HTTP 529: Overloaded"
    );
    assert_eq!((fake.requests().len(), fake.remaining()), (4, 1));
}

#[tokio::test]
async fn client_errors_are_not_retried_and_carry_the_api_message() {
    let fake = FakeAnthropic::start([
        Reply::Status {
            status: 400,
            message: "max_tokens: must be positive".into(),
            retry_after: None,
        },
        Reply::text("never"),
    ])
    .unwrap();

    let error = anthropic(&fake)
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap_err();

    assert_eq!(
        error.to_string(),
        "anthropic API returned HTTP 400: max_tokens: must be positive"
    );
    assert!(!error.is_retryable());
    assert_eq!(fake.requests().len(), 1);
}

#[tokio::test]
async fn an_overloaded_error_mid_stream_is_retried() {
    let fake = FakeAnthropic::start([
        Reply::StreamError {
            text: "Partial".into(),
            kind: "overloaded_error".into(),
            message: "Overloaded".into(),
        },
        Reply::text("Whole answer"),
    ])
    .unwrap();
    let seen = Collected::default();

    let response = anthropic(&fake)
        .respond(&request(vec![user("hi")]), &seen.sink())
        .await
        .unwrap();

    assert_eq!(response.message.text, "Whole answer");
    assert_eq!(seen.text(), "PartialWhole answer");
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn a_fatal_error_mid_stream_fails_the_call() {
    let fake = FakeAnthropic::start([Reply::StreamError {
        text: "Partial".into(),
        kind: "invalid_request_error".into(),
        message: "prompt is too long".into(),
    }])
    .unwrap();

    let error = anthropic(&fake)
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap_err();

    assert_eq!(
        error.to_string(),
        "anthropic stream failed with invalid_request_error: prompt is too long"
    );
    assert!(!error.is_retryable());
}

#[tokio::test]
async fn a_stream_cut_short_is_retried() {
    let answer = turn(
        "Complete.",
        vec![call("toolu_1", "bash", json!({"command": "ls"}))],
    );
    let fake = FakeAnthropic::start([
        Reply::Truncated(answer.clone()),
        Reply::Turn(answer.clone()),
    ])
    .unwrap();

    let response = anthropic(&fake)
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap();

    assert_eq!(response.message, answer);
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn an_unreachable_server_is_a_retryable_transport_error() {
    let provider = AnthropicProvider::new(AnthropicConfig {
        base_url: dead_url(),
        api_key: "k".into(),
        model: "m".into(),
        retry: fast_retry(),
    })
    .unwrap();

    let error = provider
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap_err();

    assert!(
        matches!(
            error,
            Error::Transport {
                provider: "anthropic",
                ..
            }
        ),
        "{error:?}"
    );
    assert!(error.is_retryable());
    assert!(
        error
            .to_string()
            .contains("check the network and the base URL"),
        "{error}"
    );
}
