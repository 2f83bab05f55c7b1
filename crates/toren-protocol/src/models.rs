//! What Toren knows of the models it talks to: the size of each one's context window, in
//! tokens, by `provider/model-id`. The state machine (`toren-agent`) compacts a conversation
//! to fit it, so the table lives here, beside the pinned [`crate::AgentSpec`] it reads,
//! rather than in the HTTP crate. An agent file's `context_tokens` overrides it.
//!
//! Matching is by the longest prefix of the model id (lower-cased; for Ollama the part after
//! the last `/` of a namespaced name such as `hf.co/org/qwen2.5-coder:7b`), then the
//! provider's own default, then [`DEFAULT_CONTEXT_TOKENS`].
//!
//! Beside it, what each model's tokens cost ([`known_pricing`]), which prices a run's
//! spending against its `budget`; an agent file's `pricing` overrides it.

use crate::{Pricing, Usd};

/// The window assumed for a model nothing is known of.
pub const DEFAULT_CONTEXT_TOKENS: u32 = 32_768;

/// `(provider, model-id prefix, tokens)`; an empty prefix is the provider's default.
const KNOWN: &[(&str, &str, u32)] = &[
    // Every current Claude model has a 200k window (the 1M beta needs a header Toren does
    // not send).
    ("anthropic", "", 200_000),
    // GPT-5 models: 400k in all, of which at most 272k input (the rest is output).
    ("openai", "", 128_000),
    ("openai", "gpt-5", 272_000),
    ("openai", "gpt-4.1", 1_047_576),
    ("openai", "gpt-4o", 128_000),
    ("openai", "gpt-4-turbo", 128_000),
    ("openai", "gpt-4", 8_192),
    ("openai", "gpt-3.5-turbo", 16_385),
    ("openai", "o1", 200_000),
    ("openai", "o3", 200_000),
    ("openai", "o4-mini", 200_000),
    ("openai", "gpt-oss", 131_072),
    // Ollama: the models' own windows. The server truncates silently at its own `num_ctx`
    // (`OLLAMA_CONTEXT_LENGTH`); set `context_tokens` to that when it is smaller.
    ("ollama", "", 8_192),
    ("ollama", "llama3", 8_192),
    ("ollama", "llama3.1", 131_072),
    ("ollama", "llama3.2", 131_072),
    ("ollama", "llama3.3", 131_072),
    ("ollama", "qwen2.5", 32_768),
    ("ollama", "qwen3", 40_960),
    ("ollama", "qwen3-coder", 262_144),
    ("ollama", "mistral", 32_768),
    ("ollama", "mistral-nemo", 131_072),
    ("ollama", "devstral", 131_072),
    ("ollama", "gemma2", 8_192),
    ("ollama", "gemma3", 131_072),
    ("ollama", "phi4", 16_384),
    ("ollama", "deepseek-r1", 131_072),
    ("ollama", "deepseek-coder-v2", 163_840),
    ("ollama", "codellama", 16_384),
    ("ollama", "gpt-oss", 131_072),
    // A script ignores what it is sent, so its window is the largest an agent file may set
    // (a probe that sends 10 MiB arguments must not fail for context); agents that test
    // compaction set `context_tokens`.
    ("scripted", "", 10_000_000),
];

/// The context window of `model` (`provider/model-id`) as far as Toren knows it: `None` for
/// a model of a provider not in the table.
pub fn known_context_window(model: &str) -> Option<u32> {
    let (provider, id) = model.split_once('/').unwrap_or((model, ""));
    let id = if provider == "ollama" {
        id.rsplit('/').next().unwrap_or(id)
    } else {
        id
    };
    let id = id.to_ascii_lowercase();
    KNOWN
        .iter()
        .filter(|(p, prefix, _)| *p == provider && id.starts_with(prefix))
        .max_by_key(|(_, prefix, _)| prefix.len())
        .map(|(_, _, tokens)| *tokens)
}

/// The context window of `model`: the table's, else [`DEFAULT_CONTEXT_TOKENS`].
pub fn context_window(model: &str) -> u32 {
    known_context_window(model).unwrap_or(DEFAULT_CONTEXT_TOKENS)
}

/// `(provider, model-id prefix, input, output, cache read, cache write)`, in US dollars per
/// million tokens as micro-dollars (`3_000_000` is $3 / MTok). A prefix matches the id
/// itself or the id followed by `-…` (a dated snapshot or a variant such as `-mini`), never
/// a later version (`gpt-5` does not price `gpt-5.2`); the longest match wins; an empty
/// prefix is the provider's default. A model no entry matches has unknown prices: an agent
/// with a `usd` budget must then give its `pricing`.
///
/// Sources, as of 2026-12 (standard tier, prompts within the window Toren uses; Anthropic's
/// cache writes at the 5-minute rate, the one Toren's requests get):
/// - Anthropic: <https://platform.claude.com/docs/en/about-claude/pricing> ("Model pricing").
/// - OpenAI: <https://openai.com/api/pricing> (OpenAI charges no cache writes: input price).
/// - Ollama runs on the operator's machine and the scripted model runs nowhere: $0.
const PRICES: &[(&str, &str, u64, u64, u64, u64)] = &[
    (
        "anthropic",
        "claude-opus-5-5",
        4_000_000,
        20_000_000,
        200_000,
        5_000_000,
    ),
    (
        "anthropic",
        "claude-opus-5",
        5_000_000,
        25_000_000,
        500_000,
        6_250_000,
    ),
    (
        "anthropic",
        "claude-opus-4-8",
        5_000_000,
        25_000_000,
        500_000,
        6_250_000,
    ),
    (
        "anthropic",
        "claude-opus-4-7",
        5_000_000,
        25_000_000,
        500_000,
        6_250_000,
    ),
    (
        "anthropic",
        "claude-opus-4-6",
        5_000_000,
        25_000_000,
        500_000,
        6_250_000,
    ),
    (
        "anthropic",
        "claude-opus-4-5",
        5_000_000,
        25_000_000,
        500_000,
        6_250_000,
    ),
    (
        "anthropic",
        "claude-opus-4-1",
        15_000_000,
        75_000_000,
        1_500_000,
        18_750_000,
    ),
    (
        "anthropic",
        "claude-opus-4",
        15_000_000,
        75_000_000,
        1_500_000,
        18_750_000,
    ),
    (
        "anthropic",
        "claude-sonnet-5-5",
        2_000_000,
        10_000_000,
        100_000,
        2_500_000,
    ),
    (
        "anthropic",
        "claude-sonnet-5",
        2_000_000,
        10_000_000,
        200_000,
        2_500_000,
    ),
    (
        "anthropic",
        "claude-sonnet-4-6",
        3_000_000,
        15_000_000,
        300_000,
        3_750_000,
    ),
    (
        "anthropic",
        "claude-sonnet-4-5",
        3_000_000,
        15_000_000,
        300_000,
        3_750_000,
    ),
    (
        "anthropic",
        "claude-sonnet-4",
        3_000_000,
        15_000_000,
        300_000,
        3_750_000,
    ),
    (
        "anthropic",
        "claude-3-7-sonnet",
        3_000_000,
        15_000_000,
        300_000,
        3_750_000,
    ),
    (
        "anthropic",
        "claude-3-5-sonnet",
        3_000_000,
        15_000_000,
        300_000,
        3_750_000,
    ),
    (
        "anthropic",
        "claude-haiku-4-5",
        1_000_000,
        5_000_000,
        100_000,
        1_250_000,
    ),
    (
        "anthropic",
        "claude-3-5-haiku",
        800_000,
        4_000_000,
        80_000,
        1_000_000,
    ),
    (
        "anthropic",
        "claude-3-opus",
        15_000_000,
        75_000_000,
        1_500_000,
        18_750_000,
    ),
    (
        "anthropic",
        "claude-3-haiku",
        250_000,
        1_250_000,
        30_000,
        300_000,
    ),
    (
        "openai", "gpt-5.1", 1_250_000, 10_000_000, 125_000, 1_250_000,
    ),
    ("openai", "gpt-5", 1_250_000, 10_000_000, 125_000, 1_250_000),
    ("openai", "gpt-5-mini", 250_000, 2_000_000, 25_000, 250_000),
    ("openai", "gpt-5-nano", 50_000, 400_000, 5_000, 50_000),
    (
        "openai", "gpt-4.1", 2_000_000, 8_000_000, 500_000, 2_000_000,
    ),
    (
        "openai",
        "gpt-4.1-mini",
        400_000,
        1_600_000,
        100_000,
        400_000,
    ),
    ("openai", "gpt-4.1-nano", 100_000, 400_000, 25_000, 100_000),
    (
        "openai", "gpt-4o", 2_500_000, 10_000_000, 1_250_000, 2_500_000,
    ),
    ("openai", "gpt-4o-mini", 150_000, 600_000, 75_000, 150_000),
    (
        "openai", "o1", 15_000_000, 60_000_000, 7_500_000, 15_000_000,
    ),
    ("openai", "o3", 2_000_000, 8_000_000, 500_000, 2_000_000),
    (
        "openai", "o4-mini", 1_100_000, 4_400_000, 275_000, 1_100_000,
    ),
    ("ollama", "", 0, 0, 0, 0),
    ("scripted", "", 0, 0, 0, 0),
];

/// The prices of `model` (`provider/model-id`) as far as Toren knows them; `None`: unknown
/// (see [`PRICES`]'s matching rule).
pub fn known_pricing(model: &str) -> Option<Pricing> {
    let (provider, id) = model.split_once('/').unwrap_or((model, ""));
    let id = id.to_ascii_lowercase();
    let matches = |prefix: &str| {
        prefix.is_empty()
            || id
                .strip_prefix(prefix)
                .is_some_and(|rest| rest.is_empty() || rest.starts_with('-'))
    };
    PRICES
        .iter()
        .filter(|(p, prefix, ..)| *p == provider && matches(prefix))
        .max_by_key(|(_, prefix, ..)| prefix.len())
        .map(|&(_, _, input, output, cache_read, cache_write)| Pricing {
            input: Usd(input),
            output: Usd(output),
            cache_read: Usd(cache_read),
            cache_write: Usd(cache_write),
        })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_longest_prefix_of_the_providers_entries_wins() {
        let cases = [
            ("anthropic/claude-sonnet-4-5", Some(200_000)),
            ("anthropic/claude-opus-4-1-20250805", Some(200_000)),
            ("openai/gpt-5", Some(272_000)),
            ("openai/gpt-5-mini", Some(272_000)),
            ("openai/gpt-4.1-mini", Some(1_047_576)),
            ("openai/gpt-4o-mini", Some(128_000)),
            ("openai/gpt-4", Some(8_192)),
            ("openai/some-new-model", Some(128_000)),
            ("ollama/llama3.2", Some(131_072)),
            ("ollama/llama3.2:3b", Some(131_072)),
            ("ollama/llama3:8b", Some(8_192)),
            ("ollama/Qwen2.5-Coder:7b", Some(32_768)),
            ("ollama/hf.co/org/qwen3-coder:30b", Some(262_144)),
            ("ollama/unheard-of", Some(8_192)),
            ("scripted/turns.yaml", Some(10_000_000)),
            ("elsewhere/model", None),
            ("no-slash", None),
        ];
        for (model, want) in cases {
            assert_eq!(known_context_window(model), want, "{model}");
        }
        assert_eq!(context_window("elsewhere/model"), DEFAULT_CONTEXT_TOKENS);
    }
    #[test]
    fn prices_match_the_model_or_its_snapshots_never_a_later_version() {
        let input = |model: &str| known_pricing(model).map(|p| p.input.0);
        assert_eq!(
            input("anthropic/claude-sonnet-4-5-20250929"),
            Some(3_000_000)
        );
        assert_eq!(
            input("anthropic/claude-opus-4-1-20250805"),
            Some(15_000_000)
        );
        assert_eq!(input("anthropic/claude-opus-4-20250514"), Some(15_000_000));
        assert_eq!(input("anthropic/claude-opus-4-5"), Some(5_000_000));
        assert_eq!(input("anthropic/claude-haiku-5-5"), None);
        assert_eq!(input("openai/gpt-5"), Some(1_250_000));
        assert_eq!(input("openai/gpt-5-mini-2025-08-07"), Some(250_000));
        assert_eq!(input("openai/gpt-5.2"), None);
        assert_eq!(input("openai/gpt-4o-mini"), Some(150_000));
        assert_eq!(input("ollama/llama3.2:3b"), Some(0));
        assert_eq!(input("scripted/turns.yaml"), Some(0));
        assert_eq!(input("elsewhere/model"), None);
        let sonnet = known_pricing("anthropic/claude-sonnet-4-5").unwrap();
        assert_eq!(
            (sonnet.output.0, sonnet.cache_read.0, sonnet.cache_write.0),
            (15_000_000, 300_000, 3_750_000)
        );
    }
}
