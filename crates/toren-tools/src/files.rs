//! What the file tools (`read_file`, `write_file`, `edit_file`) share: running cap-std work
//! on the blocking pool, telling text from binary, and turning workspace errors the model
//! can fix into tool results while host faults stay errors.

use toren_sandbox::Workspace;

use crate::error::{Result, ToolError};
use crate::outcome::ToolOutcome;

/// Runs synchronous workspace work off the async runtime. `work` returns `Err` only for
/// host faults.
pub(crate) async fn blocking<F>(
    tool: &'static str,
    workspace: &Workspace,
    work: F,
) -> Result<ToolOutcome>
where
    F: FnOnce(&Workspace) -> Result<ToolOutcome, toren_sandbox::Error> + Send + 'static,
{
    let workspace = workspace.clone();
    let joined = tokio::task::spawn_blocking(move || work(&workspace)).await;
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
