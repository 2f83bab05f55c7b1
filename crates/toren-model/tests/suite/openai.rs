//! The Chat Completions client against the fake OpenAI API, including the quirks of
//! Ollama and other compatible servers.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toren_model::{Error, ModelProvider, ModelResponse, ProviderSettings, build_provider};
use toren_protocol::{Message, ToolResult, Usage};
use toren_test_support::{FAKE_USAGE, FakeOpenAi, Reply, openai_sse};

use super::common::{Collected, call, openai, request, turn, user};

fn chunk(delta: Value, finish_reason: Value) -> Value {
    json!({"choices": [{"index": 0, "delta": delta, "finish_reason": finish_reason}]})
}

async fn respond_raw(body: String) -> ModelResponse {
    let fake = FakeOpenAi::start([Reply::RawSse(body)]).unwrap();
    openai(&fake)
        .respond(&request(vec![user("go")]), &|_: &str| {})
        .await
        .unwrap()
}

#[tokio::test]
async fn streams_text_and_interleaved_tool_calls() {
    let expected = turn(
        "Plän — two calls ✓",
        vec![
            call("call_a", "bash", json!({"command": "ls -la /tmp"})),
            call(
                "call_b",
                "write_file",
                json!({"path": "n.txt", "content": "hi\n"}),
            ),
        ],
    );
    let fake = FakeOpenAi::start([Reply::Turn(expected.clone())]).unwrap();
    let seen = Collected::default();

    let response = openai(&fake)
        .respond(&request(vec![user("hi")]), &seen.sink())
        .await
        .unwrap();

    assert_eq!(
        response,
        ModelResponse {
            message: expected.clone(),
            stop_reason: "tool_use".into(),
            usage: FAKE_USAGE,
            model: "gpt-test".into(),
        }
    );
    assert_eq!(seen.text(), expected.text);
    assert!(seen.pieces().len() > 2);
}

#[tokio::test]
async fn sends_the_documented_request() {
    let fake = FakeOpenAi::start([Reply::text("ok")]).unwrap();
    let conversation = vec![
        user("list files"),
        Message::Assistant(turn(
            "",
            vec![
                call("call_1", "bash", json!({"command": "ls"})),
                call("call_2", "bash", json!("{\"command\": \"broken")),
            ],
        )),
        Message::ToolResults {
            results: vec![
                ToolResult {
                    call_id: "call_1".into(),
                    content: "a.txt\n".into(),
                    is_error: false,
                },
                ToolResult {
                    call_id: "call_2".into(),
                    content: "invalid JSON".into(),
                    is_error: true,
                },
            ],
        },
        Message::Assistant(turn("Done.", vec![])),
        user("thanks"),
    ];

    openai(&fake)
        .respond(&request(conversation), &|_: &str| {})
        .await
        .unwrap();

    let sent = &fake.requests()[0];
    assert_eq!(
        (sent.method.as_str(), sent.path.as_str()),
        ("POST", "/v1/chat/completions")
    );
    assert_eq!(sent.header("authorization"), Some("Bearer sk-test"));
    assert_eq!(
        sent.body,
        json!({
            "model": "gpt-test",
            "max_completion_tokens": 1024,
            "stream": true,
            "stream_options": {"include_usage": true},
            "tools": [
                {"type": "function", "function": {"name": "bash", "description": "Run a command.",
                    "parameters": {"type": "object", "properties": {"command": {"type": "string"}},
                        "required": ["command"]}}},
                {"type": "function", "function": {"name": "write_file", "description": "Write a file.",
                    "parameters": {"type": "object", "properties": {
                        "path": {"type": "string"}, "content": {"type": "string"}}}}},
            ],
            "messages": [
                {"role": "system", "content": "You are a test."},
                {"role": "user", "content": "list files"},
                {"role": "assistant", "content": null, "tool_calls": [
                    {"id": "call_1", "type": "function", "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}},
                    {"id": "call_2", "type": "function", "function": {"name": "bash", "arguments": "{\"command\": \"broken"}},
                ]},
                {"role": "tool", "tool_call_id": "call_1", "content": "a.txt\n"},
                {"role": "tool", "tool_call_id": "call_2", "content": "Error: invalid JSON"},
                {"role": "assistant", "content": "Done."},
                {"role": "user", "content": "thanks"},
            ],
        })
    );
}

#[tokio::test]
async fn ollama_reuses_index_zero_for_every_call_and_says_stop() {
    let body = openai_sse(&[
        chunk(
            json!({"role": "assistant", "content": "Two calls."}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_x", "type": "function",
            "function": {"name": "bash", "arguments": "{\"command\":\"ls\"}"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 0, "id": "call_y", "type": "function",
            "function": {"name": "bash", "arguments": {"command": "pwd"}}}]}),
            Value::Null,
        ),
        chunk(json!({"content": ""}), json!("stop")),
        json!({"choices": [], "usage": {"prompt_tokens": 3, "completion_tokens": 4}}),
    ]);

    let response = respond_raw(body).await;

    assert_eq!(
        response,
        ModelResponse {
            message: turn(
                "Two calls.",
                vec![
                    call("call_x", "bash", json!({"command": "ls"})),
                    call("call_y", "bash", json!({"command": "pwd"})),
                ]
            ),
            stop_reason: "tool_use".into(),
            usage: Usage::new(3, 4),
            model: "gpt-test".into(),
        }
    );
}

#[tokio::test]
async fn fragments_without_index_follow_their_id() {
    let body = openai_sse(&[
        chunk(
            json!({"tool_calls": [{"id": "c1", "function": {"name": "bash", "arguments": "{\"comm"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"function": {"arguments": "and\":\"ls\"}"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"id": "c2", "function": {"name": "bash", "arguments": ""}}]}),
            Value::Null,
        ),
        chunk(Value::Null, json!("tool_calls")),
    ]);

    let response = respond_raw(body).await;

    assert_eq!(
        response.message.tool_calls,
        vec![
            call("c1", "bash", json!({"command": "ls"})),
            call("c2", "bash", json!({}))
        ]
    );
}

#[tokio::test]
async fn an_index_whose_first_fragment_has_no_id_keeps_the_later_id() {
    let body = openai_sse(&[
        chunk(
            json!({"tool_calls": [{"index": 1, "function": {"name": "write_file", "arguments": "{\"path\":"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 1, "id": "late", "function": {"arguments": "\"a\"}"}}]}),
            Value::Null,
        ),
        chunk(
            json!({"tool_calls": [{"index": 2, "function": {"name": "bash", "arguments": "{\"command\": \"l"}}]}),
            Value::Null,
        ),
        chunk(json!({}), json!("tool_calls")),
    ]);

    let response = respond_raw(body).await;

    assert_eq!(
        response.message.tool_calls,
        vec![
            call("late", "write_file", json!({"path": "a"})),
            // No id ever came: it stays empty for the run to assign one unique within the
            // run (toren-agent's `admit`); the broken JSON goes on as text.
            call("", "bash", json!("{\"command\": \"l")),
        ]
    );
}

#[tokio::test]
async fn nulls_unknown_fields_and_odd_finish_reasons_are_tolerated() {
    let body = openai_sse(&[
        json!({"id": null, "model": "llama3.2", "service_tier": "flex-2099", "obfuscation": "xx",
            "choices": [{"index": 0, "delta": {"role": "assistant", "content": null, "reasoning": "..."},
                "finish_reason": "", "logprobs": null}], "usage": null}),
        json!({"choices": [{"delta": {"content": "Hi", "tool_calls": null}, "finish_reason": null}]}),
        json!({"choices": [{"index": 1, "delta": {"content": "other choice"}}]}),
        json!({"choices": null}),
        chunk(json!({"refusal": " there"}), json!("length")),
    ]);

    let response = respond_raw(body).await;

    assert_eq!(
        response,
        ModelResponse {
            message: turn("Hi there", vec![]),
            stop_reason: "max_tokens".into(),
            usage: Usage::default(),
            model: "llama3.2".into(),
        }
    );
}

#[tokio::test]
async fn a_stream_without_done_is_complete_once_a_finish_reason_came() {
    let body = format!(
        "data: {}\n\n",
        chunk(json!({"content": "ok"}), json!("stop"))
    );

    let response = respond_raw(body).await;

    assert_eq!(
        (
            response.message.text.as_str(),
            response.stop_reason.as_str()
        ),
        ("ok", "end_turn")
    );
}

#[tokio::test]
async fn an_error_chunk_fails_the_call_and_a_server_error_chunk_is_retried() {
    let fake = FakeOpenAi::start([
        Reply::StreamError {
            text: "Par".into(),
            kind: "server_error".into(),
            message: "try again".into(),
        },
        Reply::StreamError {
            text: "".into(),
            kind: "invalid_request_error".into(),
            message: "bad tools".into(),
        },
    ])
    .unwrap();

    let error = openai(&fake)
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap_err();

    assert_eq!(
        error.to_string(),
        "openai stream failed with invalid_request_error: bad tools"
    );
    assert_eq!(fake.requests().len(), 2);
}

#[tokio::test]
async fn rate_limits_and_cut_streams_are_retried() {
    let answer = turn(
        "Fine.",
        vec![call("call_1", "bash", json!({"command": "ls"}))],
    );
    let fake = FakeOpenAi::start([
        Reply::Status {
            status: 429,
            message: "Rate limit reached".into(),
            retry_after: Some(0),
        },
        Reply::Truncated(answer.clone()),
        Reply::Turn(answer.clone()),
    ])
    .unwrap();

    let response = openai(&fake)
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap();

    assert_eq!(response.message, answer);
    assert_eq!(fake.requests().len(), 3);
}

#[tokio::test]
async fn an_unauthorized_key_is_a_clear_final_error() {
    let fake = FakeOpenAi::start([Reply::Status {
        status: 401,
        message: "Incorrect API key provided".into(),
        retry_after: None,
    }])
    .unwrap();

    let error = openai(&fake)
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap_err();

    assert_eq!(
        error.to_string(),
        "openai API returned HTTP 401: Incorrect API key provided"
    );
    assert!(!error.is_retryable());
    assert!(error.hint().is_some_and(|h| h.contains("OPENAI_API_KEY")));
}

#[tokio::test]
async fn ollama_goes_to_the_host_under_v1_without_a_key() {
    let fake = FakeOpenAi::start([Reply::text("local answer")]).unwrap();
    let settings = ProviderSettings {
        ollama_host: format!("{}/", fake.host_url()),
        ..ProviderSettings::default()
    };
    let provider = build_provider("ollama/llama3.2", None, &settings).unwrap();

    let response = provider
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap();

    assert_eq!(
        (response.message.text.as_str(), response.model.as_str()),
        ("local answer", "llama3.2")
    );
    let sent = &fake.requests()[0];
    assert_eq!(sent.path, "/v1/chat/completions");
    assert_eq!(sent.header("authorization"), None);
    assert_eq!(sent.body["max_tokens"], json!(1024));
    assert_eq!(sent.body.get("max_completion_tokens"), None);
}

#[tokio::test]
async fn a_wrong_base_url_names_the_expected_path() {
    let fake = FakeOpenAi::start([Reply::text("unused")]).unwrap();
    // The classic mistake: the base URL without `/v1`.
    let settings = ProviderSettings {
        openai_api_key: Some("k".into()),
        openai_base_url: fake.host_url(),
        ..ProviderSettings::default()
    };
    let provider = build_provider("openai/gpt-test", None, &settings).unwrap();

    let error = provider
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap_err();

    assert!(matches!(error, Error::Api { status: 404, .. }), "{error:?}");
    assert!(
        error.to_string().contains("/v1/chat/completions"),
        "{error}"
    );
}

#[tokio::test]
async fn a_server_that_does_not_stream_gets_a_clear_error() {
    let fake = FakeOpenAi::start([Reply::Status {
        status: 200,
        message: "a JSON completion".into(),
        retry_after: None,
    }])
    .unwrap();

    let error = openai(&fake)
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap_err();

    assert!(matches!(error, Error::Protocol { .. }), "{error:?}");
    assert!(
        error
            .to_string()
            .contains("expected a stream (text/event-stream) but got JSON"),
        "{error}"
    );
    assert_eq!(fake.requests().len(), 1);
}
