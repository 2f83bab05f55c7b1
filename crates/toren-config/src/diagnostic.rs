//! One problem in an agent file, pinned to a file, line and column, and its rendering.
//!
//! A [`Diagnostic`] renders as `file:line:col: error: message` on its first line (the form
//! editors and scripts parse), then the offending source line with a caret under the value,
//! then an optional `= help:` line. `agent_file` builds diagnostics from validation failures
//! and `yaml_errors` from serde-saphyr's errors; both take positions from the parser, never
//! from guesses.

use std::fmt;
use std::path::{Path, PathBuf};

use serde_saphyr::Location;

/// A 1-based line and column, counted in characters as serde-saphyr counts them.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Position {
    pub line: u64,
    pub column: u64,
}

/// One error in an agent file.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Diagnostic {
    /// The file as the user named it (or as lookup found it), not canonicalised.
    pub path: PathBuf,
    /// `None` only when the parser itself could not say where the problem is.
    pub position: Option<Position>,
    /// What is wrong and what was expected, on one line.
    pub message: String,
    /// A suggestion for the fix, when there is one beyond the message.
    pub help: Option<String>,
    /// The offending source line with a caret marker, already rendered.
    pub snippet: Option<String>,
}

impl Diagnostic {
    /// A diagnostic at `location` in `source` (the file's text), with a snippet under it.
    pub(crate) fn at(
        path: &Path,
        source: &str,
        location: Option<Location>,
        message: impl Into<String>,
    ) -> Self {
        let known = location.filter(|l| l.line() > 0 && l.column() > 0);
        let position = known.map(|l| Position {
            line: l.line(),
            column: l.column(),
        });
        let snippet =
            known.and_then(|l| render_snippet(source, l.line(), l.column(), l.span().len()));
        Self {
            path: path.to_path_buf(),
            position,
            message: sanitize(&message.into()),
            help: None,
            snippet,
        }
    }

    pub(crate) fn with_help(mut self, help: impl Into<String>) -> Self {
        self.help = Some(sanitize(&help.into()));
        self
    }
}

impl fmt::Display for Diagnostic {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.path.display())?;
        if let Some(Position { line, column }) = self.position {
            write!(f, ":{line}:{column}")?;
        }
        write!(f, ": error: {}", self.message)?;
        if let Some(snippet) = &self.snippet {
            write!(f, "\n{snippet}")?;
        }
        if let Some(help) = &self.help {
            let pad = self.gutter_width();
            write!(f, "\n{:pad$} = help: {help}", "")?;
        }
        Ok(())
    }
}

impl Diagnostic {
    fn gutter_width(&self) -> usize {
        self.position.map_or(1, |p| p.line.to_string().len())
    }
}

/// Renders the line `line` of `source` with carets under `len` characters from `column`:
///
/// ```text
///   |
/// 3 | sandbox: yes
///   |          ^^^
/// ```
///
/// Returns `None` when the line is not in `source` (e.g. an error at the end of input).
fn render_snippet(source: &str, line: u64, column: u64, len: u64) -> Option<String> {
    let index = usize::try_from(line.checked_sub(1)?).ok()?;
    let text = source.lines().nth(index)?;
    let text = text.strip_prefix('\u{feff}').unwrap_or(text);
    let text = sanitize(text);
    let start = usize::try_from(column.saturating_sub(1)).ok()?;
    let line_chars = text.chars().count();
    // The marker stays on this line: a multi-line value is marked up to the line's end.
    let width = usize::try_from(len)
        .unwrap_or(usize::MAX)
        .min(line_chars.saturating_sub(start))
        .max(1);
    // Keep tabs in the marker's indent so the caret lines up under tabbed text.
    let indent: String = text
        .chars()
        .take(start)
        .map(|c| if c == '\t' { '\t' } else { ' ' })
        .collect();
    let number = line.to_string();
    let pad = " ".repeat(number.len());
    Some(format!(
        "{pad} |\n{number} | {text}\n{pad} | {indent}{carets}",
        text = text.trim_end(),
        carets = "^".repeat(width),
    ))
}

/// Replaces control characters (other than tab) so that text taken from a file cannot move
/// the cursor or recolour a terminal when the error is printed.
fn sanitize(text: &str) -> String {
    text.chars()
        .map(|c| {
            if c.is_control() && c != '\t' {
                '\u{fffd}'
            } else {
                c
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn snippet_marks_the_value_under_its_column() {
        let source = "name: a\nsandbox: yes\n";
        let rendered = render_snippet(source, 2, 10, 3);
        assert_eq!(
            rendered.as_deref(),
            Some("  |\n2 | sandbox: yes\n  |          ^^^")
        );
    }

    #[test]
    fn snippet_marker_stops_at_the_end_of_the_line() {
        let source = "name: \"x\n  y\"\n";
        let rendered = render_snippet(source, 1, 7, 8);
        assert_eq!(
            rendered.as_deref(),
            Some("  |\n1 | name: \"x\n  |       ^^")
        );
    }

    #[test]
    fn snippet_past_the_last_line_is_absent() {
        assert_eq!(render_snippet("name: a\n", 2, 1, 0), None);
    }
}
