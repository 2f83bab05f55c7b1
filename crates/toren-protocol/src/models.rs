//! What Toren knows of the models it talks to: the size of each one's context window, in
//! tokens, by `provider/model-id`. The state machine (`toren-agent`) compacts a conversation
//! to fit it, so the table lives here, beside the pinned [`crate::AgentSpec`] it reads,
//! rather than in the HTTP crate. An agent file's `context_tokens` overrides it.
//!
//! Matching is by the longest prefix of the model id (lower-cased; for Ollama the part after
//! the last `/` of a namespaced name such as `hf.co/org/qwen2.5-coder:7b`), then the
//! provider's own default, then [`DEFAULT_CONTEXT_TOKENS`].

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
}
