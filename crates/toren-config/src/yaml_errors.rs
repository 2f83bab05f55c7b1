//! Turns a serde-saphyr error into a [`Diagnostic`] worded for someone editing an agent file.
//!
//! serde-saphyr knows where a problem is; its wording is written for Rust developers
//! ("missing field", "use `Option<String>`"). This module keeps the parser's position and
//! rewrites the message for the error classes an agent file can hit, falling back to the
//! crate's user-facing wording for the rest (YAML syntax errors among them).

use std::path::Path;

use serde::de::IgnoredAny;
use serde_saphyr::{Error as YamlError, Location, MessageFormatter, Spanned, UserMessageFormatter};

use crate::diagnostic::Diagnostic;

/// The message and help for `error`, found while parsing `source` read from `path`.
pub(crate) fn diagnostic(path: &Path, source: &str, error: &YamlError) -> Diagnostic {
    let inner = original(error);
    let location = match inner {
        // serde reports a missing key where the mapping ended; point at the mapping instead.
        // Only the top-level mapping has required keys.
        YamlError::SerdeMissingField { .. } => top_level_mapping(source),
        _ => None,
    }
    .or_else(|| inner.location())
    .or_else(|| error.location());
    let (message, help) = describe(source, inner);
    let diagnostic = Diagnostic::at(path, source, location, message);
    match help {
        Some(help) => diagnostic.with_help(help),
        None => diagnostic,
    }
}

/// Whether `error` is an unknown key.
pub(crate) fn is_unknown_key(error: &YamlError) -> bool {
    matches!(original(error), YamlError::SerdeUnknownField { .. })
}

/// `source` without the entry of the unknown key `error` names: the key's line and the
/// more indented lines of its block value, each blanked (emptied, so every other line and
/// column stays where it was). `None` unless the error is an unknown key written as a
/// block mapping entry (`key: ...` on a line of its own), the only form blanked safely.
pub(crate) fn without_unknown_key(source: &str, error: &YamlError) -> Option<String> {
    let YamlError::SerdeUnknownField { field, .. } = original(error) else {
        return None;
    };
    let location = original(error).location().or_else(|| error.location())?;
    let index = usize::try_from(location.line().checked_sub(1)?).ok()?;
    let lines: Vec<&str> = source.split('\n').collect();
    let line = lines.get(index)?;
    let indent = line.len() - line.trim_start_matches(' ').len();
    let entry = line.get(indent..)?;
    let after = entry.strip_prefix(field.as_str())?;
    if !after.trim_start().starts_with(':') {
        return None;
    }
    let mut end = index + 1;
    while let Some(next) = lines.get(end) {
        let content = next.trim_start_matches(' ');
        let deeper = next.len() - content.len() > indent;
        if !(deeper || content.trim().is_empty() || content.starts_with('#')) {
            break;
        }
        end += 1;
    }
    let kept: Vec<&str> = lines
        .iter()
        .enumerate()
        .map(|(i, line)| if (index..end).contains(&i) { "" } else { line })
        .collect();
    Some(kept.join("\n"))
}

/// Where the document's top-level value starts (its first key, for a mapping).
fn top_level_mapping(source: &str) -> Option<Location> {
    serde_saphyr::from_str::<Spanned<IgnoredAny>>(source)
        .ok()
        .map(|document| document.referenced)
}

/// The error itself, without the snippet and alias wrappers serde-saphyr may put around it.
fn original(error: &YamlError) -> &YamlError {
    match error {
        YamlError::WithSnippet { error, .. } | YamlError::AliasError { error, .. } => {
            original(error)
        }
        other => other,
    }
}

fn describe(source: &str, error: &YamlError) -> (String, Option<String>) {
    match error {
        YamlError::Eof { .. } if is_blank(source) => (
            "the agent file is empty; expected a mapping with at least `name` and `model`"
                .to_owned(),
            Some("start with `name: my-agent` and `model: anthropic/claude-sonnet-5`".to_owned()),
        ),
        YamlError::SerdeUnknownField {
            field, expected, ..
        } => (
            format!(
                "unknown key `{field}`; expected one of: {}",
                expected.join(", ")
            ),
            None,
        ),
        YamlError::SerdeMissingField { field, .. } => (
            format!("missing required key `{field}`"),
            missing_help(field),
        ),
        YamlError::DuplicateMappingKey { key, .. } => (
            match key {
                Some(key) => format!("duplicate key `{key}`; each key may appear only once"),
                None => "duplicate key; each key may appear only once".to_owned(),
            },
            None,
        ),
        YamlError::Unexpected { expected, .. } => (unexpected(expected), None),
        YamlError::NullIntoString { .. } => (
            "expected a string, found no value (null)".to_owned(),
            Some("write a value after the colon, or remove the key".to_owned()),
        ),
        YamlError::InvalidBooleanStrict { .. } => ("expected `true` or `false`".to_owned(), None),
        YamlError::SerdeInvalidType {
            unexpected,
            expected,
            ..
        } => (format!("expected {expected}, found {unexpected}"), None),
        YamlError::MultipleDocuments { .. } => (
            "expected a single YAML document, found a second one (`---`)".to_owned(),
            Some("put each agent in its own file".to_owned()),
        ),
        other => (
            format!("YAML error: {}", UserMessageFormatter.format_message(other)),
            None,
        ),
    }
}

fn unexpected(expected: &str) -> String {
    match expected {
        "mapping start" => "expected a mapping of keys (`name: ...`, `model: ...`)".to_owned(),
        "sequence start" => "expected a list (e.g. `[A, B]` or `- A` lines)".to_owned(),
        "string scalar" => "expected a string".to_owned(),
        other => format!("expected {other}"),
    }
}

fn missing_help(field: &str) -> Option<String> {
    match field {
        "name" => Some("add `name: my-agent` (letters, digits, `-` and `_`)".to_owned()),
        "model" => Some(format!(
            "add `model: provider/model-id`, e.g. `model: anthropic/claude-sonnet-5` \
             (providers: {})",
            crate::agent_file::PROVIDERS.join(", ")
        )),
        _ => None,
    }
}

/// Whether `source` holds no YAML content: only blank lines, comments and document markers.
fn is_blank(source: &str) -> bool {
    source.lines().all(|line| {
        let line = line.trim_start_matches('\u{feff}').trim();
        line.is_empty() || line.starts_with('#') || line == "---" || line == "..."
    })
}
