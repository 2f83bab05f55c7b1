//! Every class of agent-file error names the file, the line and column of the offending key
//! or value, and what was expected. Positions are asserted exactly; the rendered messages
//! (first line `file:line:col: error: ...`, then the source line with a caret) are snapshots.

use std::path::Path;

use insta::assert_snapshot;
use pretty_assertions::assert_eq;
use toren_config::{Position, load_agent};

use super::common::{Home, diagnostic};

/// (snapshot name, file text, line, column of the reported position).
type Case<'a> = (&'a str, &'a str, u64, u64);

fn check(cases: &[Case<'_>]) {
    for &(name, yaml, line, column) in cases {
        let diagnostic = diagnostic(yaml);
        assert_eq!(
            (name, diagnostic.position),
            (name, Some(Position { line, column })),
            "{diagnostic}"
        );
        let rendered = diagnostic.to_string();
        assert!(
            rendered.starts_with(&format!("agents/x.yaml:{line}:{column}: error: ")),
            "{rendered}"
        );
        assert_snapshot!(name, rendered);
    }
}

#[test]
fn unknown_keys_list_the_valid_ones() {
    check(&[
        (
            "unknown_key",
            "name: a\nmodel: anthropic/m\ntools: [bash]\n",
            3,
            1,
        ),
        (
            "unknown_sandbox_key",
            "name: a\nmodel: anthropic/m\nsandbox:\n  image: x\n  netwrok: true\n",
            5,
            3,
        ),
    ]);
}

#[test]
fn a_sandbox_of_the_wrong_type_points_at_the_value() {
    check(&[
        (
            "sandbox_quoted_yes",
            "name: a\nmodel: anthropic/m\nsandbox: \"yes\"\n",
            3,
            10,
        ),
        // YAML 1.1's `yes` is a string here: it must not silently turn the sandbox on.
        (
            "sandbox_plain_yes",
            "name: a\nmodel: anthropic/m\nsandbox: yes\n",
            3,
            10,
        ),
        (
            "sandbox_number",
            "name: a\nmodel: anthropic/m\nsandbox: 1\n",
            3,
            10,
        ),
        (
            "sandbox_list",
            "name: a\nmodel: anthropic/m\nsandbox: [bash]\n",
            3,
            10,
        ),
    ]);
}

#[test]
fn other_wrong_types_name_what_was_expected() {
    check(&[
        (
            "network_not_bool",
            "name: a\nmodel: anthropic/m\nsandbox:\n  network: yes\n",
            4,
            12,
        ),
        (
            "env_not_a_list",
            "name: a\nmodel: anthropic/m\nsandbox:\n  env: HOME\n",
            4,
            8,
        ),
        (
            "model_not_a_string",
            "name: a\nmodel: [anthropic/m]\n",
            2,
            8,
        ),
        ("model_null", "name: a\nmodel:\n", 2, 6),
        ("not_a_mapping", "- name: a\n- model: anthropic/m\n", 1, 1),
    ]);
}

#[test]
fn bad_model_strings_say_provider_slash_model_id() {
    check(&[
        (
            "model_without_provider",
            "name: a\nmodel: claude-sonnet-5\n",
            2,
            8,
        ),
        (
            "model_unknown_provider",
            "name: a\nmodel: gemini/gemini-3\n",
            2,
            8,
        ),
        (
            "model_empty_id",
            "name: a\n\nmodel:   'anthropic/'\n",
            3,
            10,
        ),
        ("model_with_space", "name: a\nmodel: openai/gpt 5\n", 2, 8),
        (
            "model_with_escape",
            "name: a\nmodel: \"anthropic/\\e[31mred\"\n",
            2,
            8,
        ),
        (
            "image_with_escape",
            "name: a\nmodel: anthropic/m\nsandbox:\n  image: \"x\\e]0;pwned\\a\"\n",
            4,
            10,
        ),
    ]);
}

#[test]
fn sandbox_env_names_are_checked_one_by_one() {
    check(&[
        (
            "env_invalid_name",
            "name: a\nmodel: anthropic/m\nsandbox:\n  env:\n    - GOOD\n    - 1BAD\n",
            6,
            7,
        ),
        (
            "env_value_instead_of_name",
            "name: a\nmodel: anthropic/m\nsandbox:\n  env: [DB_URL=postgres://x]\n",
            4,
            9,
        ),
        (
            "env_duplicate",
            "name: a\nmodel: anthropic/m\nsandbox:\n  env: [A, B, A]\n",
            4,
            15,
        ),
        (
            "env_toren_credential",
            "name: a\nmodel: anthropic/m\nsandbox:\n  env: [ANTHROPIC_API_KEY]\n",
            4,
            9,
        ),
        (
            "env_planned_credential",
            "name: a\nmodel: anthropic/m\nsandbox:\n  env: [HOME, E2B_API_KEY]\n",
            4,
            15,
        ),
        (
            "env_api_token",
            "name: a\nmodel: anthropic/m\nsandbox:\n  env:\n    - TOREN_API_TOKEN\n",
            5,
            7,
        ),
        (
            "env_toren_setting",
            "name: a\nmodel: anthropic/m\nsandbox:\n  env: [TOREN_SANDBOX_ROOT]\n",
            4,
            9,
        ),
    ]);
}

#[test]
fn missing_required_keys_are_named() {
    check(&[
        ("missing_model", "name: a\ninstructions: hi\n", 1, 1),
        ("missing_name", "# my agent\nmodel: anthropic/m\n", 2, 1),
    ]);
}

#[test]
fn names_turn_limits_and_approvals_are_validated() {
    check(&[
        (
            "name_with_space",
            "name: my agent\nmodel: anthropic/m\n",
            1,
            7,
        ),
        ("name_empty", "name: ''\nmodel: anthropic/m\n", 1, 7),
        (
            "name_starts_with_dash",
            "name: -x\nmodel: anthropic/m\n",
            1,
            7,
        ),
        (
            "max_turns_zero",
            "name: a\nmodel: anthropic/m\nmax_turns: 0\n",
            3,
            12,
        ),
        (
            "max_turns_negative",
            "name: a\nmodel: anthropic/m\nmax_turns: -5\n",
            3,
            12,
        ),
        (
            "max_turns_word",
            "name: a\nmodel: anthropic/m\nmax_turns: lots\n",
            3,
            12,
        ),
        (
            "max_turns_fraction",
            "name: a\nmodel: anthropic/m\nmax_turns: 2.5\n",
            3,
            12,
        ),
        (
            "max_turns_too_large",
            "name: a\nmodel: anthropic/m\nmax_turns: 5000000000\n",
            3,
            12,
        ),
        (
            "approval_unknown",
            "name: a\nmodel: anthropic/m\nsandbox:\n  approval: sometimes\n",
            4,
            13,
        ),
        (
            "on_interrupt_unknown",
            "name: a\nmodel: anthropic/m\nsandbox:\n  on_interrupt: retry\n",
            4,
            17,
        ),
        (
            "instructions_empty",
            "name: a\nmodel: anthropic/m\ninstructions: ''\n",
            3,
            15,
        ),
    ]);
}

#[test]
fn context_tokens_is_a_window_size_in_range() {
    check(&[
        (
            "context_tokens_zero",
            "name: a\nmodel: ollama/m\ncontext_tokens: 0\n",
            3,
            17,
        ),
        (
            "context_tokens_too_small",
            "name: a\nmodel: ollama/m\ncontext_tokens: 512\n",
            3,
            17,
        ),
        (
            "context_tokens_too_large",
            "name: a\nmodel: ollama/m\ncontext_tokens: 20000000\n",
            3,
            17,
        ),
        (
            "context_tokens_with_unit",
            "name: a\nmodel: ollama/m\ncontext_tokens: 8k\n",
            3,
            17,
        ),
        (
            "context_tokens_fraction",
            "name: a\nmodel: ollama/m\ncontext_tokens: 8000.5\n",
            3,
            17,
        ),
    ]);
}

#[test]
fn resource_limits_are_validated_where_they_are_written() {
    const HEAD: &str = "name: a\nmodel: anthropic/m\nsandbox:\n";
    let cases: Vec<(&str, String, u64, u64)> = vec![
        (
            "limits_not_a_mapping",
            format!("{HEAD}  limits: 512\n"),
            4,
            11,
        ),
        (
            "limits_unknown_key",
            format!("{HEAD}  limits:\n    memroy: 1GiB\n"),
            5,
            5,
        ),
        (
            "limits_memory_ambiguous_unit",
            format!("{HEAD}  limits: {{memory: 2G}}\n"),
            4,
            20,
        ),
        (
            "limits_memory_unknown_unit",
            format!("{HEAD}  limits:\n    memory: 2 gallons\n"),
            5,
            13,
        ),
        (
            "limits_memory_fraction",
            format!("{HEAD}  limits:\n    memory: 1.5GiB\n"),
            5,
            13,
        ),
        (
            "limits_memory_too_small",
            format!("{HEAD}  limits:\n    memory: 1MiB\n"),
            5,
            13,
        ),
        (
            "limits_memory_negative",
            format!("{HEAD}  limits:\n    memory: -1\n"),
            5,
            13,
        ),
        (
            "limits_memory_list",
            format!("{HEAD}  limits:\n    memory: [1]\n"),
            5,
            13,
        ),
        (
            "limits_pids_too_few",
            format!("{HEAD}  limits:\n    pids: 2\n"),
            5,
            11,
        ),
        (
            "limits_pids_word",
            format!("{HEAD}  limits:\n    pids: many\n"),
            5,
            11,
        ),
        (
            "limits_cpu_secs_zero",
            format!("{HEAD}  limits:\n    cpu_secs: 0\n"),
            5,
            15,
        ),
        (
            "limits_cpu_secs_too_many",
            format!("{HEAD}  limits:\n    cpu_secs: 999999\n"),
            5,
            15,
        ),
    ];
    let cases: Vec<Case<'_>> = cases
        .iter()
        .map(|(name, yaml, line, column)| (*name, yaml.as_str(), *line, *column))
        .collect();
    check(&cases);
}

#[test]
fn checkpoints_are_validated_where_they_are_written() {
    const HEAD: &str = "name: a\nmodel: anthropic/m\nsandbox:\n";
    let cases: Vec<(&str, String, u64, u64)> = vec![
        (
            "checkpoints_wrong_type",
            format!("{HEAD}  checkpoints: sometimes\n"),
            4,
            16,
        ),
        (
            "checkpoints_unknown_key",
            format!("{HEAD}  checkpoints:\n    excludes: [a]\n"),
            5,
            5,
        ),
        (
            "checkpoints_bad_pattern",
            format!("{HEAD}  checkpoints:\n    exclude: [ok/, ../up]\n"),
            5,
            20,
        ),
        (
            "checkpoints_pattern_twice",
            format!("{HEAD}  checkpoints:\n    exclude: [\"*.log\", \"*.log\"]\n"),
            5,
            24,
        ),
        (
            "checkpoints_keep_zero",
            format!("{HEAD}  checkpoints: {{keep: 0}}\n"),
            4,
            23,
        ),
    ];
    let cases: Vec<Case<'_>> = cases
        .iter()
        .map(|(name, yaml, line, column)| (*name, yaml.as_str(), *line, *column))
        .collect();
    check(&cases);
}

#[test]
fn yaml_structure_errors_keep_the_parser_position() {
    check(&[
        ("empty_file", "", 1, 1),
        ("comments_only", "# nothing here yet\n", 2, 1),
        ("syntax_error", "name: a\nmodel: anthropic/m: x\n", 2, 19),
        (
            "duplicate_key",
            "name: a\nmodel: anthropic/m\nname: b\n",
            3,
            1,
        ),
        (
            "duplicate_sandbox_key",
            "name: a\nmodel: anthropic/m\nsandbox:\n  network: true\n  network: false\n",
            5,
            3,
        ),
        (
            "two_documents",
            "name: a\nmodel: anthropic/m\n---\nname: b\n",
            4,
            1,
        ),
    ]);
}

#[test]
fn a_file_that_is_not_utf8_points_at_the_first_bad_byte() {
    let home = Home::new();
    let path = home.write("agents/x.yaml", b"name: a\nmodel: caf\xe9/x\n");
    let error = load_agent(&path).expect_err("not UTF-8");
    let position = error.diagnostic().and_then(|d| d.position);
    assert_eq!(
        position,
        Some(Position {
            line: 2,
            column: 11
        })
    );
    assert_snapshot!(home.render(&error));
}

#[test]
fn a_missing_file_names_the_path() {
    let error = load_agent(Path::new("agents/absent.yaml")).expect_err("no such file");
    assert_eq!(error.diagnostic(), None);
    assert!(
        error
            .to_string()
            .starts_with("agents/absent.yaml: error: cannot read the agent file: "),
        "{error}"
    );
}
