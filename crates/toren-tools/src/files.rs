//! What the file tools (`read_file`, `write_file`, `edit_file`) share: running cap-std work
//! on the blocking pool, telling text from binary, the size limit of the files they handle,
//! how a text's lines end, and turning workspace errors the model can fix into tool results
//! while host faults stay errors.

use std::sync::Arc;

use toren_sandbox::Files;

use crate::error::{Result, ToolError};
use crate::outcome::ToolOutcome;

/// Runs synchronous file work (on the sandbox's [`Files`]) off the async runtime. `work` returns `Err` only for
/// host faults.
pub(crate) async fn blocking<F>(
    tool: &'static str,
    files: &Arc<dyn Files>,
    work: F,
) -> Result<ToolOutcome>
where
    F: FnOnce(&dyn Files) -> Result<ToolOutcome, toren_sandbox::Error> + Send + 'static,
{
    let files = Arc::clone(files);
    let joined = tokio::task::spawn_blocking(move || work(files.as_ref())).await;
    match joined {
        Ok(result) => Ok(result?),
        Err(source) => Err(ToolError::Crashed { tool, source }),
    }
}

/// A workspace error as a tool result if the model can fix it (with `hint` appended), or
/// the error itself if it is a host fault.
pub(crate) fn model_error(
    err: toren_sandbox::Error,
    hint: impl FnOnce(&toren_sandbox::Error) -> Option<&'static str>,
) -> Result<ToolOutcome, toren_sandbox::Error> {
    if !err.is_model_fixable() {
        return Err(err);
    }
    Ok(ToolOutcome::error(match hint(&err) {
        Some(hint) => format!("{err}; {hint}"),
        None => err.to_string(),
    }))
}

/// The hint for a file too large for the file tools.
pub(crate) fn too_large_hint(err: &toren_sandbox::Error) -> Option<&'static str> {
    match err {
        toren_sandbox::Error::TooLarge { .. } => Some(
            "use bash to work with it in parts (e.g. `head`, `tail`, `grep -n`, \
             `sed -n '100,200p'`)",
        ),
        toren_sandbox::Error::IsDirectory { .. } => Some("use bash (e.g. `ls -la`) to list it"),
        _ => None,
    }
}

/// The file's text, or a tool error saying it is binary.
pub(crate) fn decode_text(path: &str, bytes: Vec<u8>) -> Result<String, ToolOutcome> {
    let binary = |len: usize| {
        ToolOutcome::error(format!(
            "`{path}` is a binary file ({len} bytes); use bash (e.g. `file {path}` or \
             `xxd {path} | head`) to inspect it"
        ))
    };
    if bytes.contains(&0) {
        return Err(binary(bytes.len()));
    }
    String::from_utf8(bytes).map_err(|err| binary(err.as_bytes().len()))
}

/// The refusal of a file the tools would make larger than `limit` bytes (they could not read
/// it back).
pub(crate) fn over_limit(path: &str, what: &str, size: u64, limit: u64) -> ToolOutcome {
    ToolOutcome::error(format!(
        "{what} `{path}` {size} bytes, more than the limit of {limit} bytes of the file tools; \
         nothing was written. Use bash for files that large (e.g. generate them with a script)"
    ))
}

/// How a text's lines end: how many line breaks are CRLF (`\r\n`), LF alone (`\n`) and CR
/// alone (`\r`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct LineEndings {
    pub(crate) crlf: usize,
    pub(crate) lf: usize,
    pub(crate) cr: usize,
}

impl LineEndings {
    pub(crate) fn of(text: &str) -> Self {
        let mut endings = Self::default();
        let mut bytes = text.bytes().peekable();
        while let Some(byte) = bytes.next() {
            match byte {
                b'\r' if bytes.peek() == Some(&b'\n') => {
                    bytes.next();
                    endings.crlf += 1;
                }
                b'\r' => endings.cr += 1,
                b'\n' => endings.lf += 1,
                _ => {}
            }
        }
        endings
    }

    /// `None` for a text whose line breaks are all LF (or that has none); otherwise what
    /// they are, e.g. `CRLF (\r\n)` or `mixed: 3 CRLF (\r\n), 2 LF (\n)`.
    pub(crate) fn describe(&self) -> Option<String> {
        let kinds = [
            (self.crlf, "CRLF (\\r\\n)"),
            (self.lf, "LF (\\n)"),
            (self.cr, "CR (\\r)"),
        ];
        let present: Vec<&(usize, &str)> = kinds.iter().filter(|(count, _)| *count > 0).collect();
        match present.as_slice() {
            [] => None,
            [(_, name)] if self.lf == 0 => Some((*name).to_owned()),
            [_] => None,
            many => {
                let counts: Vec<String> = many
                    .iter()
                    .map(|(count, name)| format!("{count} {name}"))
                    .collect();
                Some(format!("mixed: {}", counts.join(", ")))
            }
        }
    }

    /// Whether new line breaks should be CRLF: most of the text's are.
    pub(crate) fn prefers_crlf(&self) -> bool {
        self.crlf > self.lf
    }
}

#[cfg(test)]
mod tests {
    use super::LineEndings;

    #[test]
    fn line_endings_are_counted_and_described() {
        let describe = |text: &str| LineEndings::of(text).describe();
        assert_eq!(describe("a\nb\n"), None);
        assert_eq!(describe("no breaks"), None);
        assert_eq!(describe("a\r\nb\r\n").as_deref(), Some("CRLF (\\r\\n)"));
        assert_eq!(describe("a\rb\r").as_deref(), Some("CR (\\r)"));
        assert_eq!(
            describe("a\r\nb\nc\r\n").as_deref(),
            Some("mixed: 2 CRLF (\\r\\n), 1 LF (\\n)")
        );
        assert_eq!(
            LineEndings::of("a\r\n\r\r\n\n"),
            LineEndings {
                crlf: 2,
                lf: 1,
                cr: 1
            }
        );
    }
}
