//! Valid agent files become the expected `AgentSpec`, defaults included.

use std::path::Path;

use pretty_assertions::assert_eq;
use toren_config::{load_agent, parse_agent};
use toren_protocol::{AgentSpec, ApprovalPolicy, OnInterrupt, ResourceLimits, SandboxSpec};

fn parse(yaml: &str) -> AgentSpec {
    match parse_agent(Path::new("agents/x.yaml"), yaml) {
        Ok(spec) => spec,
        Err(error) => panic!("expected a valid agent, got:\n{error}"),
    }
}

#[test]
fn a_minimal_file_has_no_sandbox_and_the_default_turn_limit() {
    let spec = parse("name: builder\nmodel: anthropic/claude-sonnet-5\n");
    assert_eq!(
        spec,
        AgentSpec {
            budget: None,
            name: "builder".to_owned(),
            model: "anthropic/claude-sonnet-5".to_owned(),
            instructions: None,
            sandbox: None,
            max_turns: 50,
            context_tokens: None,
            source: None,
        }
    );
}

#[test]
fn context_tokens_is_pinned_in_the_spec_and_overrides_the_known_window() {
    let yaml = "name: local\nmodel: ollama/llama3.2\ncontext_tokens: 8000\n";
    let spec = parse(yaml);
    assert_eq!(spec.context_tokens, Some(8000));
    assert_eq!(spec.context_window(), 8000);
    let known = parse("name: local\nmodel: ollama/llama3.2\n");
    assert_eq!(
        (known.context_tokens, known.context_window()),
        (None, 131_072)
    );
    for bound in ["1024", "10000000"] {
        let spec = parse(&format!(
            "name: a\nmodel: anthropic/m\ncontext_tokens: {bound}\n"
        ));
        assert_eq!(
            spec.context_tokens.map(|t| t.to_string()),
            Some(bound.to_owned())
        );
    }
}

#[test]
fn sandbox_true_means_every_default() {
    let spec = parse("name: builder\nmodel: anthropic/claude-sonnet-5\nsandbox: true\n");
    assert_eq!(
        spec.sandbox,
        Some(SandboxSpec {
            checkpoints: Default::default(),
            image: None,
            network: false,
            egress: None,
            approval: ApprovalPolicy::Always,
            env: vec![],
            limits: ResourceLimits {
                memory: 2 * 1024 * 1024 * 1024,
                pids: 512,
                cpu_secs: 600,
            },
            on_interrupt: OnInterrupt::Rerun,
        })
    );
}

#[test]
fn sandbox_false_or_empty_means_no_sandbox() {
    for yaml in [
        "name: a\nmodel: ollama/llama3.2\nsandbox: false\n",
        "name: a\nmodel: ollama/llama3.2\nsandbox:\n",
    ] {
        assert_eq!(parse(yaml).sandbox, None, "{yaml}");
    }
}

#[test]
fn an_empty_sandbox_mapping_means_every_default() {
    let spec = parse("name: a\nmodel: openai/gpt-5\nsandbox: {}\n");
    assert_eq!(spec.sandbox, Some(SandboxSpec::default()));
}

#[test]
fn a_full_file_keeps_every_setting() {
    let yaml = "\
# A full agent file.
name: data_cruncher-2
model: openai/gpt-5
instructions: |
  Crunch the numbers.
  Report the totals.
sandbox:
  image: node:22-slim
  network: true
  approval: never
  env:
    - MY_APP_DB_URL
    - _PRIVATE_TOKEN2
  limits: {memory: 512MiB, pids: 64, cpu_secs: 30}
  on_interrupt: ask
max_turns: 7
";
    assert_eq!(
        parse(yaml),
        AgentSpec {
            budget: None,
            name: "data_cruncher-2".to_owned(),
            model: "openai/gpt-5".to_owned(),
            instructions: Some("Crunch the numbers.\nReport the totals.\n".to_owned()),
            sandbox: Some(SandboxSpec {
                checkpoints: Default::default(),
                image: Some("node:22-slim".to_owned()),
                network: true,
                egress: None,
                approval: ApprovalPolicy::Never,
                env: vec!["MY_APP_DB_URL".to_owned(), "_PRIVATE_TOKEN2".to_owned()],
                limits: ResourceLimits {
                    memory: 512 * 1024 * 1024,
                    pids: 64,
                    cpu_secs: 30,
                },
                on_interrupt: OnInterrupt::Ask,
            }),
            max_turns: 7,
            context_tokens: None,
            source: None,
        }
    );
}

#[test]
fn limits_take_sizes_in_any_unambiguous_unit_and_default_what_is_left_out() {
    let limits = |yaml: &str| {
        let file = format!("name: a\nmodel: openai/gpt-5\nsandbox:\n  limits: {yaml}\n");
        parse(&file).sandbox.expect("a sandbox").limits
    };
    let defaults = ResourceLimits::default();
    let cases = [
        ("{}", defaults),
        (
            "{memory: 1GB}",
            ResourceLimits {
                memory: 1_000_000_000,
                ..defaults
            },
        ),
        (
            "{memory: 3 gib, pids: 8}",
            ResourceLimits {
                memory: 3 << 30,
                pids: 8,
                ..defaults
            },
        ),
        (
            "{memory: 16777216, cpu_secs: 86400}",
            ResourceLimits {
                memory: 16 << 20,
                cpu_secs: 86_400,
                ..defaults
            },
        ),
    ];
    for (yaml, want) in cases {
        assert_eq!((yaml, limits(yaml)), (yaml, want));
    }
}

#[test]
fn a_model_id_may_itself_contain_slashes() {
    let spec = parse("name: a\nmodel: openai/meta-llama/Llama-3.3-70B\n");
    assert_eq!(spec.model_parts(), ("openai", "meta-llama/Llama-3.3-70B"));
}

#[test]
fn load_agent_records_the_absolute_path_of_the_file() {
    // Tests run in the crate's directory, so this path is relative and has `..` in it.
    let relative = Path::new("../../examples/coder/agent.yaml");
    let spec = load_agent(relative).expect("valid agent");
    let expected = Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .and_then(Path::parent)
        .expect("workspace root")
        .join("examples/coder/agent.yaml");
    assert_eq!(spec.source, Some(expected.display().to_string()));
}

#[test]
fn the_example_agents_in_the_repository_are_valid() {
    let examples = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../examples");
    for name in ["coder", "hello-sandbox"] {
        let path = examples.join(name).join("agent.yaml");
        match load_agent(&path) {
            Ok(spec) => assert_eq!(spec.name, name),
            Err(error) => panic!("{error}"),
        }
    }
}

#[test]
fn checkpoints_are_on_by_default_off_with_false_and_tuned_by_a_mapping() {
    let sandbox = |yaml: &str| {
        parse(&format!("name: a\nmodel: anthropic/m\nsandbox:\n{yaml}"))
            .sandbox
            .map(|s| s.checkpoints)
    };
    let default = toren_protocol::CheckpointPolicy {
        enabled: true,
        exclude: Vec::new(),
        keep: 100,
    };
    assert_eq!(sandbox("  image: x\n"), Some(default.clone()));
    assert_eq!(sandbox("  checkpoints: true\n"), Some(default.clone()));
    assert_eq!(
        sandbox("  checkpoints: false\n"),
        Some(toren_protocol::CheckpointPolicy {
            enabled: false,
            ..default.clone()
        })
    );
    assert_eq!(
        sandbox(
            "  checkpoints:\n    exclude: [node_modules/, \"*.log\", build/out]\n    keep: 7\n"
        ),
        Some(toren_protocol::CheckpointPolicy {
            enabled: true,
            exclude: vec!["node_modules/".into(), "*.log".into(), "build/out".into()],
            keep: 7,
        })
    );
    assert_eq!(
        sandbox("  checkpoints: {keep: 3}\n"),
        Some(toren_protocol::CheckpointPolicy { keep: 3, ..default })
    );
}
