//! What a tool call produced, as the model will see it, and the argument parsing every tool
//! shares (which turns malformed arguments into a message the model can act on; the parser
//! itself lives in `toren-protocol`, where the approval prompt uses it too).

use serde::de::DeserializeOwned;
use serde_json::Value;
use toren_protocol::ToolCompleted;

/// The result of one tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ToolOutcome {
    /// The text the model sees.
    pub output: String,
    /// The call failed in a way the model should react to (bad arguments, a refused path,
    /// a non-zero exit code, a timeout).
    pub is_error: bool,
    /// For `bash`: the command's exit code; `None` if it was killed or is not a command.
    pub exit_code: Option<i32>,
    /// Output was cut to fit a limit.
    pub truncated: bool,
}

impl ToolOutcome {
    pub fn success(output: impl Into<String>) -> Self {
        Self {
            output: output.into(),
            is_error: false,
            exit_code: None,
            truncated: false,
        }
    }

    pub fn error(output: impl Into<String>) -> Self {
        Self {
            output: output.into(),
            is_error: true,
            exit_code: None,
            truncated: false,
        }
    }

    /// The `tool_completed` event recording this outcome for `call_id`.
    pub fn into_completed(self, call_id: impl Into<String>) -> ToolCompleted {
        ToolCompleted {
            call_id: call_id.into(),
            output: self.output,
            is_error: self.is_error,
            exit_code: self.exit_code,
            truncated: self.truncated,
        }
    }
}

/// Decodes a tool's arguments with the one parser the approval prompt uses too
/// ([`toren_protocol::decode_args`]).
pub(crate) fn parse_args<T: DeserializeOwned>(
    tool: &str,
    usage: &str,
    args: &Value,
) -> Result<T, String> {
    toren_protocol::decode_args(tool, usage, args)
}
