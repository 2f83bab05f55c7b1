//! Property tests (proptest) of `parse_agent` against hostile and random input.
//!
//! Four generators feed one contract: arbitrary text, soups of YAML-significant tokens,
//! valid agent files mutated (wrong types, unknown keys, deep nesting, anchors and aliases,
//! tabs, second documents), and valid specs rendered in every YAML style. Whatever the
//! input, parsing never panics; an error displays as `file:line:col: error: message` with
//! the position inside the text; an accepted file satisfies the agent-file invariants; and
//! a rendered spec parses back to itself. `PROPTEST_CASES` sets the cases per property
//! (256 by default); `docs/fuzzing.md` describes the long run.

mod hostile;
mod valid;

use std::path::Path;

use proptest::prelude::*;
use proptest::test_runner::{Config, FileFailurePersistence};
use toren_config::{
    MAX_CPU_SECS, MAX_NAME_LEN, MAX_PIDS, MIN_MEMORY, MIN_PIDS, PROVIDERS, env_vars, parse_agent,
};
use toren_protocol::AgentSpec;

use self::hostile::{mutated_file, token_soup};
use self::valid::{Dice, render, valid_spec};

const FILE: &str = "agents/fuzz.yaml";

fn config() -> Config {
    Config {
        // Relative to the package root, where cargo and nextest run tests.
        failure_persistence: Some(Box::new(FileFailurePersistence::Direct(
            "tests/suite/proptest-regressions/fuzz_agent_file.txt",
        ))),
        ..Config::default()
    }
}

proptest! {
    #![proptest_config(config())]

    #[test]
    fn arbitrary_text_is_refused_with_a_position_or_accepted(text in any::<String>()) {
        check(&text)?;
    }

    #[test]
    fn yaml_token_soup_is_refused_with_a_position_or_accepted(text in token_soup()) {
        check(&text)?;
    }

    #[test]
    fn mutated_agent_files_are_refused_with_a_position_or_accepted(text in mutated_file()) {
        check(&text)?;
    }

    #[test]
    fn a_valid_spec_in_any_yaml_style_parses_back_to_itself(
        spec in valid_spec(),
        dice in prop::collection::vec(any::<u8>(), 32),
    ) {
        let text = render(&spec, &mut Dice::new(dice));
        let parsed = parse_agent(Path::new(FILE), &text).map_err(|e| e.to_string());
        prop_assert_eq!(parsed, Ok(spec), "the file was:\n{}", text);
    }
}

/// Nesting far beyond what proptest generates must end in an error, not a stack overflow
/// (which would abort the whole test binary).
#[test]
fn very_deep_nesting_is_refused_without_overflowing_the_stack() {
    for (open, close) in [("[", "]"), ("{a: ", "}"), ("- ", "")] {
        let value = format!("{}x{}", open.repeat(100_000), close.repeat(100_000));
        let text = format!("name: a\nmodel: openai/gpt-5\ninstructions: {value}\n");
        assert!(parse_agent(Path::new(FILE), &text).is_err(), "{open}");
        check(&text).unwrap();
    }
}

/// An alias bomb (each anchor repeats the previous one nine times: 9^9 values once
/// expanded) in a value the parser drains is cut off by serde-saphyr's node budget
/// (250,000 values) instead of running out of time or memory. Reaching the budget takes a
/// few seconds in a debug build and about 0.2 s in release.
#[test]
fn alias_bombs_are_cut_off() {
    let mut anchors = vec!["&a0 [x, x, x, x, x, x, x, x, x]".to_owned()];
    for level in 1..=8 {
        let items = vec![format!("*a{}", level - 1); 9].join(", ");
        anchors.push(format!("&a{level} [{items}]"));
    }
    let text = format!(
        "name: a\nmodel: openai/gpt-5\nmax_turns: [{}]\n",
        anchors.join(", ")
    );
    let started = std::time::Instant::now();
    let error = parse_agent(Path::new(FILE), &text).unwrap_err();
    assert!(started.elapsed() < std::time::Duration::from_secs(60));
    assert!(
        error.to_string().starts_with(&format!("{FILE}:3:")),
        "{error}"
    );
    check_error(&text, &error.to_string()).unwrap();
}

/// Parses `text` and checks the outcome, whichever it is, against the documented contract.
fn check(text: &str) -> Result<(), TestCaseError> {
    match parse_agent(Path::new(FILE), text) {
        Ok(spec) => check_spec(&spec),
        Err(error) => {
            prop_assert!(error.diagnostic().is_some(), "no diagnostic: {error:?}");
            check_error(text, &error.to_string())
        }
    }
}

/// `shown` starts with `FILE:line:col: error: ` and a message; line and column are in `text`.
fn check_error(text: &str, shown: &str) -> Result<(), TestCaseError> {
    let position = shown
        .strip_prefix(FILE)
        .and_then(|rest| rest.strip_prefix(':'))
        .and_then(|rest| {
            let (line, rest) = rest.split_once(':')?;
            let (column, rest) = rest.split_once(": error: ")?;
            Some((
                line.parse::<usize>().ok()?,
                column.parse::<usize>().ok()?,
                rest,
            ))
        });
    let Some((line, column, message)) = position else {
        return Err(TestCaseError::fail(format!(
            "not `{FILE}:line:col: error: message`: {shown:?}"
        )));
    };
    prop_assert!(!message.trim().is_empty(), "empty message: {shown:?}");
    let lines = yaml_lines(text);
    prop_assert!(
        (1..=lines.len()).contains(&line),
        "line {line} is outside the {} lines of the text: {shown:?}",
        lines.len()
    );
    let width = lines[line - 1].chars().count();
    prop_assert!(
        (1..=width + 1).contains(&column),
        "column {column} is outside line {line} ({width} characters): {shown:?}"
    );
    Ok(())
}

/// The text's lines as YAML counts them (`\n`, `\r\n` and `\r` end a line); text that
/// ends with a line break has a last, empty line where the end of input is.
fn yaml_lines(text: &str) -> Vec<&str> {
    let mut lines = Vec::new();
    let mut rest = text;
    while let Some(end) = rest.find(['\n', '\r']) {
        lines.push(&rest[..end]);
        let skip = if rest[end..].starts_with("\r\n") {
            2
        } else {
            1
        };
        rest = &rest[end + skip..];
    }
    lines.push(rest);
    lines
}

/// The invariants of an accepted agent, as the agent-file documentation states them.
fn check_spec(spec: &AgentSpec) -> Result<(), TestCaseError> {
    let name = spec.name.as_str();
    prop_assert!(
        (1..=MAX_NAME_LEN).contains(&name.len())
            && name.starts_with(|c: char| c.is_ascii_alphanumeric())
            && name
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '_'),
        "invalid name accepted: {name:?}"
    );
    let (provider, id) = spec.model_parts();
    prop_assert!(
        spec.model.contains('/') && PROVIDERS.contains(&provider),
        "model without a known provider accepted: {:?}",
        spec.model
    );
    prop_assert!(
        !id.trim().is_empty()
            && !spec.model.contains(char::is_whitespace)
            && !spec.model.contains(char::is_control),
        "bad model id accepted: {:?}",
        spec.model
    );
    prop_assert!(spec.max_turns >= 1);
    if let Some(text) = &spec.instructions {
        prop_assert!(!text.trim().is_empty(), "blank instructions accepted");
    }
    if let Some(sandbox) = &spec.sandbox {
        if let Some(image) = &sandbox.image {
            prop_assert!(!image.trim().is_empty(), "blank image accepted");
            prop_assert!(
                !image.contains(char::is_control),
                "image with control characters accepted: {image:?}"
            );
        }
        for (index, var) in sandbox.env.iter().enumerate() {
            prop_assert!(is_env_name(var), "invalid env name accepted: {var:?}");
            prop_assert!(!env_vars::is_secret(var), "credential granted: {var}");
            prop_assert!(!sandbox.env[..index].contains(var), "{var} listed twice");
        }
        let limits = sandbox.limits;
        prop_assert!(limits.memory >= MIN_MEMORY, "{limits:?}");
        prop_assert!((MIN_PIDS..=MAX_PIDS).contains(&limits.pids), "{limits:?}");
        prop_assert!((1..=MAX_CPU_SECS).contains(&limits.cpu_secs), "{limits:?}");
    }
    prop_assert_eq!(&spec.source, &None);
    Ok(())
}

fn is_env_name(name: &str) -> bool {
    name.starts_with(|c: char| c.is_ascii_alphabetic() || c == '_')
        && name.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
}
