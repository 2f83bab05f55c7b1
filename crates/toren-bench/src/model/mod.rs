//! `model`: what Toren adds between a model's last byte and the tool
//! call starting. For each provider — Anthropic Messages and OpenAI Chat Completions, the
//! real clients of `toren-model` streaming from `toren-test-support`'s fake servers on
//! loopback (the real wire formats, cut in awkward chunks), and the scripted provider for
//! reference — one run driven by a `Worker` over SQLite and the `local` backend asks for
//! `bash: true` turn after turn. Per call: the fake's last byte handed to the connection
//! (timestamped in the fake) → the provider's answer complete → `model_responded`
//! committed → `tool_started` committed. The scripted provider has no bytes: its span
//! starts at its answer. Exit 1 when a run did not complete.

mod args;
mod drive;

use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use jiff::Timestamp;
use serde::Serialize;
use serde_json::json;
use toren_model::{ModelProvider, ProviderSettings, build_provider};
use toren_protocol::{AssistantMessage, ToolCall};
use toren_test_support::{FakeAnthropic, FakeOpenAi, Reply};

use crate::concurrency::say;
use crate::report::{Machine, Table};
use crate::stats::Spread;
pub(crate) use args::{Model, ModelArgs};
use drive::Turn;

/// Calls before the measured ones (the sandbox is opened on the first).
const WARM_UP: usize = 10;

/// What one provider measured.
#[derive(Debug, Serialize)]
struct Provider {
    provider: &'static str,
    calls: usize,
    /// The fake's last byte → `tool_started` committed (`None` for scripted).
    last_byte_to_tool_started_ms: Option<Spread>,
    /// The fake's last byte → the provider's answer complete: parsing and the stream's end.
    last_byte_to_answer_ms: Option<Spread>,
    /// The answer → `model_responded` committed (the state machine's admit and one append).
    answer_to_responded_ms: Option<Spread>,
    /// `model_responded` committed → `tool_started` committed (decide, one append).
    responded_to_started_ms: Option<Spread>,
    /// The answer → `tool_started` committed: Toren's own part, for every provider alike.
    answer_to_tool_started_ms: Option<Spread>,
}

#[derive(Debug, Serialize)]
struct Outcome {
    benchmark: &'static str,
    measured_at: Timestamp,
    machine: Machine,
    quick: bool,
    warm_up: usize,
    providers: Vec<Provider>,
}

pub(crate) async fn run(args: Model) -> anyhow::Result<bool> {
    let turns = WARM_UP + args.calls + 1;
    say(&format!(
        "model: {} tool calls per provider (after {WARM_UP} not counted)",
        args.calls
    ));
    let mut providers = Vec::new();
    let calls = || (0..turns - 1).map(|n| format!("{n:04}"));

    let fake = FakeAnthropic::start(replies(calls().map(|n| format!("toolu_{n}"))))
        .context("the fake Anthropic")?;
    let settings = ProviderSettings {
        anthropic_api_key: Some("sk-ant-bench".into()),
        anthropic_base_url: fake.base_url(),
        ..ProviderSettings::default()
    };
    let anthropic = build_provider("anthropic/claude-sonnet-5", None, &settings)?;
    let times = drive::drive(anthropic, turns).await?;
    providers.push(summarise("anthropic", &times, Some(&fake.last_bytes()))?);
    drop(fake);

    let fake = FakeOpenAi::start(replies(calls().map(|n| format!("call_{n}"))))
        .context("the fake OpenAI")?;
    let settings = ProviderSettings {
        openai_api_key: Some("sk-bench".into()),
        openai_base_url: fake.base_url(),
        ..ProviderSettings::default()
    };
    let openai = build_provider("openai/gpt-5", None, &settings)?;
    let times = drive::drive(openai, turns).await?;
    providers.push(summarise("openai", &times, Some(&fake.last_bytes()))?);
    drop(fake);

    let dir = tempfile::tempdir()?;
    let script = dir.path().join("bench.script.yaml");
    let mut text = String::from("turns:\n");
    for _ in 0..turns - 1 {
        text.push_str("  - tool_calls:\n      - bash: {command: \"true\"}\n");
    }
    text.push_str("  - text: \"done\"\n");
    std::fs::write(&script, text)?;
    let scripted: Arc<dyn ModelProvider> = build_provider(
        &format!("scripted/{}", script.display()),
        None,
        &ProviderSettings::default(),
    )?;
    let times = drive::drive(scripted, turns).await?;
    providers.push(summarise("scripted", &times, None)?);

    let mut table = Table::default();
    let spread = |s: &Option<Spread>| {
        s.map_or_else(
            || "–".to_owned(),
            |s| format!("{:.2} / {:.2} / {:.2} ms", s.p50_ms, s.p99_ms, s.max_ms),
        )
    };
    for p in &providers {
        table.row(
            &format!("{}: last byte → tool_started p50/p99/max", p.provider),
            spread(&p.last_byte_to_tool_started_ms),
        );
        table.row(
            &format!("{}:   last byte → answer parsed", p.provider),
            spread(&p.last_byte_to_answer_ms),
        );
        table.row(
            &format!("{}:   answer → model_responded committed", p.provider),
            spread(&p.answer_to_responded_ms),
        );
        table.row(
            &format!("{}:   model_responded → tool_started committed", p.provider),
            spread(&p.responded_to_started_ms),
        );
        table.row(
            &format!("{}: answer → tool_started", p.provider),
            spread(&p.answer_to_tool_started_ms),
        );
    }
    table.row(
        "calls per provider",
        format!("{} (after {WARM_UP} not counted)", args.calls),
    );
    table.print("toren-bench model");
    let outcome = Outcome {
        benchmark: "model",
        measured_at: Timestamp::now(),
        machine: Machine::this(),
        quick: args.quick,
        warm_up: WARM_UP,
        providers,
    };
    let path = args.json.clone().unwrap_or_else(|| {
        crate::toren_bin::default_output(if args.quick {
            "model-quick.json"
        } else {
            "model.json"
        })
    });
    crate::report::write_json(&path, &outcome)?;
    say(&format!("model: figures written to {}", path.display()));
    Ok(true)
}

/// The fakes' answers: a `bash: true` call per id, then a text.
fn replies(ids: impl Iterator<Item = String>) -> Vec<Reply> {
    let mut replies: Vec<Reply> = ids
        .map(|id| {
            Reply::Turn(AssistantMessage {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id,
                    name: "bash".into(),
                    arguments: json!({"command": "true"}),
                    wire_id: None,
                }],
            })
        })
        .collect();
    replies.push(Reply::text("done"));
    replies
}

/// The spans of each measured call; `last_bytes` (one per answer, in order) for a fake.
fn summarise(
    provider: &'static str,
    turns: &[Turn],
    last_bytes: Option<&[Instant]>,
) -> anyhow::Result<Provider> {
    if let Some(bytes) = last_bytes
        && bytes.len() != turns.len() + 1
    {
        bail!(
            "{provider}: the fake streamed {} answers, {} expected",
            bytes.len(),
            turns.len() + 1
        );
    }
    let measured = turns.iter().enumerate().skip(WARM_UP);
    let span = |f: &dyn Fn(usize, &Turn) -> Option<Duration>| {
        let samples: Vec<Duration> = measured.clone().filter_map(|(n, t)| f(n, t)).collect();
        Spread::of(&samples)
    };
    let byte = |n: usize| last_bytes.and_then(|b| b.get(n).copied());
    Ok(Provider {
        provider,
        calls: turns.len().saturating_sub(WARM_UP),
        last_byte_to_tool_started_ms: span(&|n, t| {
            Some(t.started.saturating_duration_since(byte(n)?))
        }),
        last_byte_to_answer_ms: span(&|n, t| Some(t.answered.saturating_duration_since(byte(n)?))),
        answer_to_responded_ms: span(&|_, t| Some(t.responded - t.answered)),
        responded_to_started_ms: span(&|_, t| Some(t.started - t.responded)),
        answer_to_tool_started_ms: span(&|_, t| Some(t.started - t.answered)),
    })
}
