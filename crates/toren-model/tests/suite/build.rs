//! `build_provider`: choosing a provider from the model string, and its errors.

use pretty_assertions::assert_eq;
use toren_model::anthropic::AnthropicConfig;
use toren_model::openai::{MaxTokensField, OpenAiConfig};
use toren_model::{Error, ProviderSettings, RetryPolicy, build_provider};
use toren_test_support::{FakeAnthropic, Reply};

use super::common::{request, user};

fn build_error(model: &str, settings: &ProviderSettings) -> Error {
    match build_provider(model, None, settings) {
        Ok(_) => panic!("{model} built"),
        Err(error) => error,
    }
}

#[test]
fn defaults_point_at_the_public_apis() {
    let settings = ProviderSettings::default();
    assert_eq!(settings.anthropic_base_url, "https://api.anthropic.com");
    assert_eq!(settings.openai_base_url, "https://api.openai.com/v1");
    assert_eq!(settings.ollama_host, "http://localhost:11434");
    assert_eq!(
        (settings.anthropic_api_key, settings.openai_api_key),
        (None, None)
    );
}

#[test]
fn hosted_providers_need_their_key() {
    let blank = ProviderSettings {
        anthropic_api_key: Some(" ".into()),
        ..ProviderSettings::default()
    };
    for (model, settings, var) in [
        (
            "anthropic/claude-sonnet-4-5",
            ProviderSettings::default(),
            "ANTHROPIC_API_KEY",
        ),
        ("anthropic/claude-sonnet-4-5", blank, "ANTHROPIC_API_KEY"),
        (
            "openai/gpt-4.1",
            ProviderSettings::default(),
            "OPENAI_API_KEY",
        ),
    ] {
        let error = build_error(model, &settings);
        assert!(
            matches!(error, Error::MissingKey { var: v, .. } if v == var),
            "{error:?}"
        );
        assert_eq!(
            error.to_string(),
            format!(
                "model `{model}` needs an API key: set the environment variable {var} \
                 (for example `export {var}=...`) and try again"
            )
        );
        assert!(!error.is_retryable());
    }
}

#[test]
fn ollama_and_keyed_providers_build() {
    let settings = ProviderSettings {
        anthropic_api_key: Some("a".into()),
        openai_api_key: Some("o".into()),
        ..ProviderSettings::default()
    };
    for model in [
        "anthropic/claude-sonnet-4-5",
        "openai/gpt-4.1",
        "ollama/llama3.2",
    ] {
        assert!(build_provider(model, None, &settings).is_ok(), "{model}");
    }
}

#[test]
fn unknown_providers_and_shapeless_models_are_refused() {
    let error = build_error("gemini/pro", &ProviderSettings::default());
    assert_eq!(
        error.to_string(),
        "unknown model provider `gemini` in `gemini/pro`; valid providers are anthropic, openai, ollama, scripted"
    );
    for model in ["claude", "anthropic/", "/x", ""] {
        let error = build_error(model, &ProviderSettings::default());
        assert!(
            matches!(error, Error::InvalidModel { .. }),
            "{model}: {error:?}"
        );
        assert!(error.to_string().contains("provider/model-id"));
    }
}

#[tokio::test]
async fn scripted_paths_are_relative_to_the_agent_dir_and_checked_at_build_time() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir(dir.path().join("scripts")).unwrap();
    std::fs::write(
        dir.path().join("scripts/ok.yaml"),
        "turns:\n  - text: hello\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("scripts/bad.yaml"),
        "turns:\n  - txt: hello\n",
    )
    .unwrap();
    let settings = ProviderSettings::default();

    let provider = build_provider("scripted/scripts/ok.yaml", Some(dir.path()), &settings).unwrap();
    let response = provider
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap();
    assert_eq!(response.message.text, "hello");

    let bad = build_provider("scripted/scripts/bad.yaml", Some(dir.path()), &settings)
        .err()
        .unwrap();
    assert!(bad.to_string().contains("bad.yaml:2:5"), "{bad}");
    let missing = build_provider("scripted/nope.yaml", Some(dir.path()), &settings)
        .err()
        .unwrap();
    assert!(
        missing.to_string().contains("nope.yaml: cannot read it"),
        "{missing}"
    );
}

#[tokio::test]
async fn anthropic_uses_the_configured_base_url_and_key() {
    let fake = FakeAnthropic::start([Reply::text("hi")]).unwrap();
    let settings = ProviderSettings {
        anthropic_api_key: Some("sk-ant-x".into()),
        anthropic_base_url: fake.base_url(),
        ..ProviderSettings::default()
    };
    let provider = build_provider("anthropic/claude-haiku", None, &settings).unwrap();

    let response = provider
        .respond(&request(vec![user("hi")]), &|_: &str| {})
        .await
        .unwrap();

    assert_eq!(
        (response.message.text.as_str(), response.model.as_str()),
        ("hi", "claude-haiku")
    );
    assert_eq!(fake.requests()[0].header("x-api-key"), Some("sk-ant-x"));
}

#[test]
fn debug_output_never_shows_keys() {
    let settings = ProviderSettings {
        anthropic_api_key: Some("sk-ant-secret".into()),
        openai_api_key: Some("sk-secret".into()),
        ..ProviderSettings::default()
    };
    let anthropic = AnthropicConfig {
        base_url: settings.anthropic_base_url.clone(),
        api_key: "sk-ant-secret".into(),
        model: "claude".into(),
        retry: RetryPolicy::default(),
    };
    let openai = OpenAiConfig {
        provider: "openai",
        base_url: settings.openai_base_url.clone(),
        api_key: Some("sk-secret".into()),
        model: "gpt".into(),
        max_tokens_field: MaxTokensField::MaxCompletionTokens,
        retry: RetryPolicy::default(),
    };

    for shown in [
        format!("{settings:?}"),
        format!("{anthropic:?}"),
        format!("{openai:?}"),
    ] {
        assert!(!shown.contains("secret"), "{shown}");
        assert!(shown.contains("<redacted>"), "{shown}");
    }
}
