//! Picks and configures a provider from an agent's `model` string (`provider/model-id`)
//! and the resolved [`ProviderSettings`]. Nothing here reads the environment: the binary
//! resolves `ANTHROPIC_API_KEY`, `OPENAI_BASE_URL` and friends and passes them in.

use std::fmt;
use std::path::Path;
use std::sync::Arc;

use crate::anthropic::{AnthropicConfig, AnthropicProvider};
use crate::error::{Error, Result};
use crate::openai::{MaxTokensField, OpenAiConfig, OpenAiProvider};
use crate::provider::ModelProvider;
use crate::retry::RetryPolicy;
use crate::scripted::ScriptedProvider;

/// Credentials and endpoints for the HTTP providers. `Debug` hides the keys.
#[derive(Clone, PartialEq, Eq)]
pub struct ProviderSettings {
    pub anthropic_api_key: Option<String>,
    /// Without `/v1`. Default `https://api.anthropic.com`.
    pub anthropic_base_url: String,
    pub openai_api_key: Option<String>,
    /// Including `/v1`. Default `https://api.openai.com/v1`.
    pub openai_base_url: String,
    /// Without `/v1` (as `OLLAMA_HOST`). Default `http://localhost:11434`.
    pub ollama_host: String,
}

impl Default for ProviderSettings {
    fn default() -> Self {
        ProviderSettings {
            anthropic_api_key: None,
            anthropic_base_url: "https://api.anthropic.com".to_owned(),
            openai_api_key: None,
            openai_base_url: "https://api.openai.com/v1".to_owned(),
            ollama_host: "http://localhost:11434".to_owned(),
        }
    }
}

impl fmt::Debug for ProviderSettings {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("ProviderSettings")
            .field("anthropic_api_key", &redacted(&self.anthropic_api_key))
            .field("anthropic_base_url", &self.anthropic_base_url)
            .field("openai_api_key", &redacted(&self.openai_api_key))
            .field("openai_base_url", &self.openai_base_url)
            .field("ollama_host", &self.ollama_host)
            .finish()
    }
}

/// How a secret shows in `Debug` output: whether it is there, never its value.
pub(crate) fn redacted(key: &Option<String>) -> &'static str {
    match key {
        Some(_) => "Some(<redacted>)",
        None => "None",
    }
}

/// Builds the provider named by `model`:
///
/// - `anthropic/<id>`: the Messages API; needs `anthropic_api_key`.
/// - `openai/<id>`: Chat Completions at `openai_base_url`; needs `openai_api_key`.
/// - `ollama/<id>`: Chat Completions at `{ollama_host}/v1`, no key.
/// - `scripted/<path>`: a script file, relative to `agent_dir` (the agent file's
///   directory) when given; loaded and validated now, so a bad script fails before a run.
pub fn build_provider(
    model: &str,
    agent_dir: Option<&Path>,
    settings: &ProviderSettings,
) -> Result<Arc<dyn ModelProvider>> {
    let invalid = || Error::InvalidModel {
        model: model.to_owned(),
    };
    let (provider, id) = model.split_once('/').ok_or_else(invalid)?;
    if provider.is_empty() || id.is_empty() {
        return Err(invalid());
    }
    let key = |value: &Option<String>, var: &'static str| {
        value
            .clone()
            .filter(|k| !k.trim().is_empty())
            .ok_or_else(|| Error::MissingKey {
                model: model.to_owned(),
                var,
            })
    };
    Ok(match provider {
        "anthropic" => Arc::new(AnthropicProvider::new(AnthropicConfig {
            base_url: settings.anthropic_base_url.clone(),
            api_key: key(&settings.anthropic_api_key, "ANTHROPIC_API_KEY")?,
            model: id.to_owned(),
            retry: RetryPolicy::default(),
        })?),
        "openai" => Arc::new(OpenAiProvider::new(OpenAiConfig {
            provider: "openai",
            base_url: settings.openai_base_url.clone(),
            api_key: Some(key(&settings.openai_api_key, "OPENAI_API_KEY")?),
            model: id.to_owned(),
            max_tokens_field: MaxTokensField::MaxCompletionTokens,
            retry: RetryPolicy::default(),
        })?),
        "ollama" => Arc::new(OpenAiProvider::new(OpenAiConfig {
            provider: "ollama",
            base_url: format!("{}/v1", settings.ollama_host.trim_end_matches('/')),
            api_key: None,
            model: id.to_owned(),
            max_tokens_field: MaxTokensField::MaxTokens,
            retry: RetryPolicy::default(),
        })?),
        "scripted" => {
            let path = match agent_dir {
                Some(dir) => dir.join(id),
                None => Path::new(id).to_owned(),
            };
            Arc::new(ScriptedProvider::load(&path)?)
        }
        _ => {
            return Err(Error::UnknownProvider {
                model: model.to_owned(),
                provider: provider.to_owned(),
            });
        }
    })
}
