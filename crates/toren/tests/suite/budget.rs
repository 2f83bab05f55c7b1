//! Budgets through the binary: a run that reaches its token budget pauses before its next
//! model call (`awaiting_budget`, shown by `runs show` with what it spent), is raised by
//! `toren budget` from another process, and completes in the process that waited, with no
//! model call made twice.

use pretty_assertions::assert_eq;
use serde_json::json;
use toren_test_support::{FakeAnthropic, Reply, anthropic_sse};

use super::common::{Toren, text};

/// A tool call answer (`read_file`) whose usage is `input` tokens in and `output` out.
pub(super) fn answer(id: &str, input: u64, output: u64) -> Reply {
    Reply::RawSse(anthropic_sse(&[
        json!({"type": "message_start", "message": {"id": "m", "type": "message",
            "role": "assistant", "model": "claude-haiku-4-5", "content": [], "usage": {
            "input_tokens": input, "output_tokens": 1}}}),
        json!({"type": "content_block_start", "index": 0, "content_block": {"type": "tool_use",
            "id": id, "name": "read_file", "input": {"path": "none.txt"}}}),
        json!({"type": "content_block_stop", "index": 0}),
        json!({"type": "message_delta", "delta": {"stop_reason": "tool_use"},
            "usage": {"output_tokens": output}}),
        json!({"type": "message_stop"}),
    ]))
}

#[test]
fn a_run_paused_at_its_token_budget_is_raised_from_another_process_and_completes() {
    let fake = FakeAnthropic::start([
        answer("toolu_a", 1_200, 30),
        answer("toolu_b", 1_300, 20),
        Reply::text("all read"),
    ])
    .unwrap();
    let toren = Toren::new()
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", &fake.base_url())
        .env("TOREN_APPROVAL_POLL", "50ms");
    toren.agent(
        "spender",
        "name: spender\nmodel: anthropic/claude-haiku-4-5\nsandbox:\n  approval: never\n\
         budget: {tokens: 1000, wall: 1h}\n",
    );
    let mut child = toren.spawn(&["run", "spender", "--input", "look"]);
    let run = toren.wait_for_status(&mut child, "awaiting_budget");

    // Paused after the first answer (1,230 tokens, over the 1,000) and its tool call,
    // before the second model call.
    assert_eq!(fake.requests().len(), 1, "no call was made past the budget");
    let shown = toren.show(&run);
    assert_eq!(shown["status"], "awaiting_budget");
    assert_eq!(shown["spending"]["tokens"], 1_230);
    // Haiku 4.5: $1 / MTok in, $5 / MTok out.
    assert_eq!(shown["spending"]["usd"], json!(0.00135));
    assert_eq!(
        shown["budget"],
        json!({"tokens": 1_000, "wall_secs": 3_600})
    );
    assert_eq!(shown["budget_reached"]["reached"], json!(["tokens"]));
    let human = text(&toren.run(&["runs", "show", &run]).stdout);
    assert!(human.contains("\nstatus     awaiting_budget"), "{human}");
    assert!(
        human.contains("\nspent      1,230 tokens, $0.001"),
        "{human}"
    );
    assert!(
        human.contains("\nbudget     tokens 1,230 of 1,000 (reached), wall "),
        "{human}"
    );
    assert!(
        human.contains(&format!("toren budget {run} --add-tokens N")),
        "{human}"
    );

    // A raise of a limit the run does not have, or of nothing, is refused.
    let out = toren.run(&["budget", &run, "--add-usd", "2"]);
    assert_ne!(out.status.code(), Some(0));
    assert!(
        text(&out.stderr).contains("no usd budget"),
        "{}",
        text(&out.stderr)
    );
    let out = toren.run(&["budget", &run]);
    assert_ne!(out.status.code(), Some(0));

    let out = toren.run(&["budget", &run, "--add-tokens", "10000"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("all read"),
        "{}",
        text(&out.stdout)
    );
    assert!(
        text(&out.stderr).contains("budget is reached (tokens)"),
        "the terminal was told: {}",
        text(&out.stderr)
    );

    // Each model call once; the raise is in the log by who and how.
    assert_eq!(fake.requests().len(), 3);
    let types = toren.event_types(&run);
    let reached = types.iter().position(|t| t == "budget_reached").unwrap();
    assert_eq!(types[reached + 1], "budget_raised");
    assert_eq!(types.iter().filter(|t| *t == "model_responded").count(), 3);
    let raised = &toren.events(&run)[reached + 1];
    assert_eq!(raised["tokens"], 10_000);
    assert_eq!(raised["via"], "cli");

    let shown = toren.show(&run);
    assert_eq!(shown["status"], "completed");
    assert_eq!(shown["budget"]["tokens"], 11_000);
    assert!(shown["spending"]["tokens"].as_u64().unwrap() > 2_550);
    // Raised once: a second raise finds nothing paused.
    let out = toren.run(&["budget", &run, "--add-tokens", "5"]);
    assert_ne!(out.status.code(), Some(0));
}

#[test]
fn a_budget_raised_while_nobody_drives_the_run_says_to_resume_it() {
    let fake =
        FakeAnthropic::start([answer("toolu_a", 1_200, 30), Reply::text("all read")]).unwrap();
    let toren = Toren::new()
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", &fake.base_url())
        .env("TOREN_APPROVAL_POLL", "50ms");
    toren.agent(
        "spender",
        "name: spender\nmodel: anthropic/claude-haiku-4-5\nsandbox:\n  approval: never\n\
         budget: {tokens: 1000}\n",
    );
    let mut child = toren.spawn(&["run", "spender", "--input", "look"]);
    let run = toren.wait_for_status(&mut child, "awaiting_budget");
    // The process that waited for the raise is gone: nothing will go on by itself.
    child.kill().unwrap();
    child.wait().unwrap();

    // A CLI user without workers is not told about workspace volumes.
    let human = text(&toren.run(&["runs", "show", &run]).stdout);
    assert!(!human.contains("volume"), "{human}");

    let out = toren.run(&["budget", &run, "--add-tokens", "10000"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("no process drives it") && stderr.contains(&format!("toren resume {run}")),
        "{stderr}"
    );
    assert!(!stderr.contains("goes on from where it paused"), "{stderr}");
    assert_eq!(toren.show(&run)["status"], "running", "raised, not driven");

    let out = toren.run(&["resume", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(
        text(&out.stdout).contains("all read"),
        "{}",
        text(&out.stdout)
    );
    assert_eq!(fake.requests().len(), 2, "each model call once");
}
