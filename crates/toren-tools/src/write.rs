//! The writing file tools: `write_file` (create or replace a whole file) and `edit_file`
//! (exact string replacement, refusing ambiguous or missing matches with a message that
//! says what to do instead). Neither makes a file larger than the file tools' size limit,
//! and an edit's result size is computed from its matches before anything is allocated, so
//! no edit can exhaust the host's memory. Line breaks match whether CRLF or LF (read_file
//! shows lines without their `\r`), and the file keeps its own line endings; `matching`
//! finds the matches.

use serde::Deserialize;
use std::sync::Arc;

use toren_sandbox::{EntryKind, Files};

use crate::ToolSettings;
use crate::error::Result;
use crate::files::{blocking, decode_text, model_error, over_limit, too_large_hint};
use crate::matching::{Edit, Found};
use crate::outcome::{ToolOutcome, parse_args};

pub(crate) const WRITE: &str = "write_file";
const WRITE_USAGE: &str = r#"{"path": string, "content": string}"#;

pub(crate) const EDIT: &str = "edit_file";
const EDIT_USAGE: &str =
    r#"{"path": string, "old_string": string, "new_string": string, "replace_all"?: boolean}"#;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct WriteArgs {
    path: String,
    content: String,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct EditArgs {
    path: String,
    old_string: String,
    new_string: String,
    #[serde(default)]
    replace_all: bool,
}

pub(crate) async fn write_file(
    settings: &ToolSettings,
    files: &Arc<dyn Files>,
    args: &serde_json::Value,
) -> Result<ToolOutcome> {
    let args: WriteArgs = match parse_args(WRITE, WRITE_USAGE, args) {
        Ok(args) => args,
        Err(message) => return Ok(ToolOutcome::error(message)),
    };
    let size = u64::try_from(args.content.len()).unwrap_or(u64::MAX);
    if size > settings.file_size_limit {
        return Ok(over_limit(
            &args.path,
            "`content` would make",
            size,
            settings.file_size_limit,
        ));
    }
    blocking(WRITE, files, move |ws| {
        let existed = matches!(ws.metadata(&args.path), Ok(info) if info.kind == EntryKind::File);
        if let Err(err) = ws.write(&args.path, args.content.as_bytes()) {
            return model_error(err, |_| None);
        }
        let verb = if existed { "overwrote" } else { "created" };
        Ok(ToolOutcome::success(format!(
            "{verb} `{}` ({} bytes)",
            args.path,
            args.content.len()
        )))
    })
    .await
}

pub(crate) async fn edit_file(
    settings: &ToolSettings,
    files: &Arc<dyn Files>,
    args: &serde_json::Value,
) -> Result<ToolOutcome> {
    let args: EditArgs = match parse_args(EDIT, EDIT_USAGE, args) {
        Ok(args) => args,
        Err(message) => return Ok(ToolOutcome::error(message)),
    };
    if args.old_string.is_empty() {
        return Ok(ToolOutcome::error(
            "`old_string` is empty; give the exact text to replace (to create a file or \
             replace all of it, use write_file)",
        ));
    }
    if args.old_string == args.new_string {
        return Ok(ToolOutcome::error(
            "`old_string` and `new_string` are the same; there is nothing to change",
        ));
    }
    let limit = settings.file_size_limit;
    blocking(EDIT, files, move |ws| edit(ws, limit, &args)).await
}

fn edit(ws: &dyn Files, limit: u64, args: &EditArgs) -> Result<ToolOutcome, toren_sandbox::Error> {
    let path = args.path.as_str();
    let bytes = match ws.read(path, limit) {
        Ok(bytes) => bytes,
        Err(err) => {
            return model_error(err, |err| match err {
                toren_sandbox::Error::NotFound { .. } => Some("to create a file, use write_file"),
                other => too_large_hint(other),
            });
        }
    };
    let text = match decode_text(path, bytes) {
        Ok(text) => text,
        Err(outcome) => return Ok(outcome),
    };
    let old = args.old_string.as_str();
    let edit = match Edit::find(&text, old, &args.new_string) {
        Found::Matches(edit) => edit,
        Found::OnlyIgnoringLineEndings { file } => {
            return Ok(ToolOutcome::error(format!(
                "`old_string` was not found in `{path}`, but it would match if line endings \
                 were ignored: the file uses {file} line endings, and edit_file matches \
                 CRLF (\\r\\n) and LF (\\n) alike but not a lone CR (\\r). Use bash (e.g. \
                 `sed`) for this edit, or rewrite the file with write_file."
            )));
        }
        Found::Nothing => {
            let mut message = format!(
                "`old_string` was not found in `{path}`; it must match the file exactly, \
                 including whitespace, indentation and line breaks. Use read_file to see the \
                 current text."
            );
            if has_line_number_prefix(old) {
                message.push_str(
                    " Leave out the line numbers read_file shows at the start of each line; \
                     they are not part of the file.",
                );
            }
            return Ok(ToolOutcome::error(message));
        }
    };
    let matches = edit.count();
    if matches > 1 && !args.replace_all {
        return Ok(ToolOutcome::error(format!(
            "`old_string` occurs {matches} times in `{path}`; include more of the surrounding \
             lines to make it unique, or set `replace_all` to true to replace every occurrence"
        )));
    }
    // The size of the result, from the matches alone, before it is built.
    let size = edit.result_len();
    if size > limit {
        return Ok(over_limit(
            path,
            &format!(
                "replacing {matches} {} would make",
                if matches == 1 {
                    "occurrence"
                } else {
                    "occurrences"
                }
            ),
            size,
            limit,
        ));
    }
    let first_line = edit.first_line();
    let note = edit
        .line_endings_note()
        .map(|note| format!(" ({note})"))
        .unwrap_or_default();
    let edited = edit.apply();
    if let Err(err) = ws.write(path, edited.as_bytes()) {
        return model_error(err, |_| None);
    }
    Ok(ToolOutcome::success(if matches == 1 {
        format!("edited `{path}`: replaced 1 occurrence at line {first_line}{note}")
    } else {
        format!(
            "edited `{path}`: replaced {matches} occurrences (the first at line {first_line}){note}"
        )
    }))
}

/// Whether some line of `s` starts like a line of read_file's output (`    12\t`).
fn has_line_number_prefix(s: &str) -> bool {
    s.lines().any(|line| {
        let rest = line.trim_start_matches(' ');
        let digits = rest.len() - rest.trim_start_matches(|c: char| c.is_ascii_digit()).len();
        digits > 0 && rest[digits..].starts_with('\t')
    })
}

#[cfg(test)]
mod tests {
    use super::has_line_number_prefix;

    #[test]
    fn spots_read_file_line_numbers() {
        assert!(has_line_number_prefix("    12\tfn main() {"));
        assert!(has_line_number_prefix("let a = 1;\n     3\tlet b = 2;"));
        assert!(!has_line_number_prefix("fn main() {\n\tlet x = 1;"));
        assert!(!has_line_number_prefix("12 apples"));
    }
}
