//! The `read_file` tool: a window of a text file's lines, numbered like `cat -n`, bounded
//! in lines and bytes, with a footer saying how to read on when the window is not the whole
//! file. Lines are shown without the `\r` of a CRLF line ending; a file with CRLF (or other
//! non-LF) line endings gets a footer line saying which, so what the model reads is never
//! silently different from the file (edit_file matches either kind of line break).

use std::fmt::Write as _;

use serde::Deserialize;
use std::sync::Arc;

use toren_sandbox::Files;

use crate::ToolSettings;
use crate::error::Result;
use crate::files::{LineEndings, blocking, decode_text, model_error, too_large_hint};
use crate::outcome::{ToolOutcome, parse_args};

pub(crate) const NAME: &str = "read_file";
const USAGE: &str = r#"{"path": string, "offset"?: integer, "limit"?: integer}"#;

/// Lines longer than this many bytes are cut.
pub(crate) const MAX_LINE_BYTES: usize = 2000;

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ReadArgs {
    path: String,
    #[serde(default)]
    offset: Option<usize>,
    #[serde(default)]
    limit: Option<usize>,
}

pub(crate) async fn run(
    settings: &ToolSettings,
    files: &Arc<dyn Files>,
    args: &serde_json::Value,
) -> Result<ToolOutcome> {
    let args: ReadArgs = match parse_args(NAME, USAGE, args) {
        Ok(args) => args,
        Err(message) => return Ok(ToolOutcome::error(message)),
    };
    if args.offset == Some(0) {
        return Ok(ToolOutcome::error(
            "`offset` is a 1-based line number; the first line is 1",
        ));
    }
    if args.limit == Some(0) {
        return Ok(ToolOutcome::error("`limit` must be at least 1 line"));
    }
    let settings = settings.clone();
    blocking(NAME, files, move |ws| read(&settings, ws, &args)).await
}

fn read(
    settings: &ToolSettings,
    ws: &dyn Files,
    args: &ReadArgs,
) -> Result<ToolOutcome, toren_sandbox::Error> {
    let path = args.path.as_str();
    let bytes = match ws.read(path, settings.file_size_limit) {
        Ok(bytes) => bytes,
        Err(err) => return model_error(err, too_large_hint),
    };
    let text = match decode_text(path, bytes) {
        Ok(text) => text,
        Err(outcome) => return Ok(outcome),
    };
    if text.is_empty() {
        return Ok(ToolOutcome::success(format!("(`{path}` is empty)")));
    }
    let lines: Vec<&str> = text
        .strip_suffix('\n')
        .unwrap_or(&text)
        .split('\n')
        .collect();
    let total = lines.len();
    let first = args.offset.unwrap_or(1);
    if first > total {
        let lines = if total == 1 { "line" } else { "lines" };
        return Ok(ToolOutcome::error(format!(
            "`offset` is {first} but `{path}` has only {total} {lines}"
        )));
    }
    let limit = args.limit.unwrap_or(settings.read_max_lines);

    let mut out = String::new();
    let mut last = first - 1;
    let mut cut_lines = false;
    let mut over_budget = false;
    for (index, line) in lines.iter().enumerate().skip(first - 1).take(limit) {
        let number = index + 1;
        let mut rendered = format!("{number:>6}\t");
        let line = line.strip_suffix('\r').unwrap_or(line);
        if line.len() > MAX_LINE_BYTES {
            let cut = floor_char_boundary(line, MAX_LINE_BYTES);
            let _ = write!(
                rendered,
                "{} [... {} more bytes]",
                &line[..cut],
                line.len() - cut
            );
            cut_lines = true;
        } else {
            rendered.push_str(line);
        }
        rendered.push('\n');
        if out.len() + rendered.len() > settings.read_max_bytes && number > first {
            over_budget = true;
            break;
        }
        out.push_str(&rendered);
        last = number;
    }

    let partial = first > 1 || last < total;
    if last < total {
        let _ = writeln!(
            out,
            "[showing lines {first}-{last} of {total}; call read_file with offset={} to read on]",
            last + 1
        );
    } else if partial {
        let _ = writeln!(out, "[showing lines {first}-{last} of {total}]");
    }
    if cut_lines {
        let _ = writeln!(
            out,
            "[lines longer than {MAX_LINE_BYTES} bytes were cut; use bash to see them whole]"
        );
    }
    if let Some(endings) = LineEndings::of(&text).describe() {
        let _ = writeln!(
            out,
            "[line endings of `{path}`: {endings}; lines are shown without the \\r of a \
             CRLF, and edit_file matches CRLF and LF line breaks alike and keeps the file's]"
        );
    }
    // A window the model asked for is not a truncation; a limit it did not choose is.
    let truncated = over_budget || cut_lines || (args.limit.is_none() && last < total);
    Ok(ToolOutcome {
        truncated,
        ..ToolOutcome::success(out)
    })
}

/// The largest index `<= at` that is a character boundary of `s`.
fn floor_char_boundary(s: &str, at: usize) -> usize {
    (0..=at.min(s.len()))
        .rev()
        .find(|i| s.is_char_boundary(*i))
        .unwrap_or(0)
}
