//! `toren runs show` sums the token usage the provider reported for each model answer,
//! cache counts included, in the human form and in `--json`.

use pretty_assertions::assert_eq;
use serde_json::json;
use toren_test_support::{FakeAnthropic, Reply, anthropic_sse};

use super::common::{Toren, text};

/// A tool call answer whose usage says `input` tokens, `read` of them read from the cache
/// and `written` written to it, and `output` tokens out.
fn answer(input: u64, read: u64, written: u64, output: u64) -> Reply {
    Reply::RawSse(anthropic_sse(&[
        json!({"type": "message_start", "message": {"id": "m", "type": "message",
            "role": "assistant", "model": "claude-x", "content": [], "usage": {
            "input_tokens": input - read - written, "cache_read_input_tokens": read,
            "cache_creation_input_tokens": written, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use",
            "id": format!("toolu_{input}"), "name": "read_file", "input": {"path": "none.txt"}}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": output}}),
        json!({"type": "message_stop"}),
    ]))
}

#[test]
fn runs_show_sums_the_usage_of_every_answer() {
    let fake = FakeAnthropic::start([
        answer(1_200, 0, 1_000, 30),
        answer(1_500, 1_000, 0, 20),
        Reply::text("nothing there"),
    ])
    .unwrap();
    let toren = Toren::new()
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", &fake.base_url());
    toren.agent(
        "reader",
        "name: reader\nmodel: anthropic/claude-haiku-4-5\nsandbox:\n  approval: never\n",
    );
    let out = toren.run(&["run", "reader", "--input", "look"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run = toren.newest_run().unwrap();

    // The last answer is the fake's plain text turn: 42 in, 7 out.
    let shown = toren.show(&run);
    assert_eq!(
        shown["usage"],
        json!({"input_tokens": 2_742, "output_tokens": 57,
            "cache_read_input_tokens": 1_000, "cache_creation_input_tokens": 1_000})
    );
    assert_eq!(shown["turns"], 3);
    assert_eq!(
        shown["context"],
        json!({"window_tokens": 200_000, "compactions": 0, "stubbed_outputs": 0,
            "dropped_messages": 0})
    );
    let human = toren.run(&["runs", "show", &run]);
    let human = text(&human.stdout);
    assert!(
        human.contains(
            "\nusage      2,742 input tokens (1,000 read from the cache, 1,000 written to it), \
             57 output tokens in 3 model calls\n"
        ),
        "{human}"
    );
    assert!(
        !human.contains("\ncontext "),
        "no compaction, no line: {human}"
    );
}
