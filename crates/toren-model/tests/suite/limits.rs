//! What the fakes answer a request too large for the model's context window, as the real
//! APIs do (HTTP 400, not retried), and the cache counts the clients read from usage.

use pretty_assertions::assert_eq;
use serde_json::json;
use toren_model::{Error, ModelProvider};
use toren_protocol::Usage;
use toren_test_support::{
    FakeAnthropic, FakeOpenAi, Reply, anthropic_sse, fake_input_tokens, openai_sse,
};

use super::common::{anthropic, openai, request, user};

#[tokio::test]
async fn anthropic_refuses_a_prompt_over_its_window_without_using_a_reply() {
    let fake = FakeAnthropic::start([Reply::text("small enough"), Reply::text("unused")]).unwrap();
    fake.limit_input_tokens(2_000);
    let provider = anthropic(&fake);
    // `request` asks for 1024 output tokens: a short prompt fits beside them.
    let ok = provider
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap();
    assert_eq!(ok.message.text, "small enough");

    let long = request(vec![user(&"x".repeat(12_000))]);
    let error = provider.respond(&long, &|_: &str| {}).await.unwrap_err();
    let sent = fake.requests();
    let tokens = fake_input_tokens(&sent[1].raw_body);
    assert!(tokens > 2_000, "{tokens}");
    assert_eq!(
        error.to_string(),
        format!(
            "anthropic API returned HTTP 400: prompt is too long: {tokens} tokens > 2000 maximum"
        )
    );
    assert!(matches!(error, Error::Api { status: 400, .. }));
    assert!(
        !error.is_retryable(),
        "a request too large is never retried"
    );
    assert_eq!((sent.len(), fake.remaining()), (2, 1));

    // Input under the window, but not with `max_tokens` beside it.
    let beside = request(vec![user(&"x".repeat(5_000))]);
    let error = provider.respond(&beside, &|_: &str| {}).await.unwrap_err();
    let tokens = fake_input_tokens(&fake.requests()[2].raw_body);
    assert_eq!(
        error.to_string(),
        format!(
            "anthropic API returned HTTP 400: input length and `max_tokens` exceed context limit: \
             {tokens} + 1024 > 2000, decrease input length or `max_tokens` and try again"
        )
    );
}

#[tokio::test]
async fn openai_refuses_with_context_length_exceeded() {
    let fake = FakeOpenAi::start([Reply::text("unused")]).unwrap();
    fake.limit_input_tokens(2_000);
    let long = request(vec![user(&"x".repeat(12_000))]);
    let error = openai(&fake)
        .respond(&long, &|_: &str| {})
        .await
        .unwrap_err();
    let tokens = fake_input_tokens(&fake.requests()[0].raw_body);
    assert_eq!(
        error.to_string(),
        format!(
            "openai API returned HTTP 400: This model's maximum context length is 2000 tokens. \
             However, your messages resulted in {tokens} tokens. Please reduce the length of \
             the messages."
        )
    );
    assert!(!error.is_retryable());
    assert_eq!(fake.remaining(), 1);
}

#[tokio::test]
async fn cache_counts_are_kept_apart_and_within_the_input() {
    let events = [
        json!({"type": "message_start", "message": {"id": "m", "type": "message", "role": "assistant",
            "model": "claude-x", "content": [], "usage": {"input_tokens": 12,
            "cache_creation_input_tokens": 300, "cache_read_input_tokens": 4000, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "text", "text": ""}}),
        json!({"type": "content_block_delta", "index": 0, "delta": {"type": "text_delta", "text": "hi"}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "end_turn"}, "usage": {"output_tokens": 5}}),
        json!({"type": "message_stop"}),
    ];
    let fake = FakeAnthropic::start([Reply::RawSse(anthropic_sse(&events))]).unwrap();
    let response = anthropic(&fake)
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap();
    assert_eq!(
        response.usage,
        Usage {
            cache_read_input_tokens: 4_000,
            cache_creation_input_tokens: 300,
            ..Usage::new(4_312, 5)
        }
    );

    let chunks = [
        json!({"model": "gpt-x", "choices": [{"index": 0, "delta": {"role": "assistant", "content": "hi"}}]}),
        json!({"model": "gpt-x", "choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}),
        json!({"model": "gpt-x", "choices": [], "usage": {"prompt_tokens": 2_000, "completion_tokens": 9,
            "prompt_tokens_details": {"cached_tokens": 1_536}}}),
    ];
    let fake = FakeOpenAi::start([Reply::RawSse(openai_sse(&chunks))]).unwrap();
    let response = openai(&fake)
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap();
    assert_eq!(
        response.usage,
        Usage {
            cache_read_input_tokens: 1_536,
            ..Usage::new(2_000, 9)
        }
    );
}
