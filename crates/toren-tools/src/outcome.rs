//! What a tool call produced, as the model will see it, and the argument parsing every tool
//! shares (which turns malformed arguments into a message the model can act on).

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

/// Decodes a tool's arguments, or says in one message what is wrong and what was expected
/// (`usage`). A string is accepted if it holds a JSON object: some providers pass the raw
/// text on when it did not parse for them.
pub(crate) fn parse_args<T: DeserializeOwned>(
    tool: &str,
    usage: &str,
    args: &Value,
) -> Result<T, String> {
    let value = match args {
        Value::String(raw) => match serde_json::from_str::<Value>(raw) {
            Ok(value @ Value::Object(_)) => value,
            Ok(_) => {
                return Err(format!(
                    "the arguments for `{tool}` must be a JSON object; expected {usage}"
                ));
            }
            Err(err) => {
                return Err(format!(
                    "the arguments for `{tool}` are not valid JSON ({err}); expected {usage}"
                ));
            }
        },
        Value::Null => Value::Object(serde_json::Map::new()),
        other => other.clone(),
    };
    if !value.is_object() {
        return Err(format!(
            "the arguments for `{tool}` must be a JSON object; expected {usage}"
        ));
    }
    serde_json::from_value(value)
        .map_err(|err| format!("invalid arguments for `{tool}`: {err}; expected {usage}"))
}

#[cfg(test)]
mod tests {
    use serde::Deserialize;
    use serde_json::json;

    use super::*;

    #[derive(Debug, Deserialize, PartialEq)]
    #[serde(deny_unknown_fields)]
    struct Args {
        path: String,
    }

    const USAGE: &str = r#"{"path": string}"#;

    #[test]
    fn accepts_objects_and_strings_holding_objects() {
        let want = Args {
            path: "a".to_owned(),
        };
        assert_eq!(
            parse_args::<Args>("t", USAGE, &json!({"path": "a"})),
            Ok(want)
        );
        let want = Args {
            path: "a".to_owned(),
        };
        assert_eq!(
            parse_args::<Args>("t", USAGE, &json!(r#"{"path": "a"}"#)),
            Ok(want)
        );
    }

    #[test]
    fn explains_what_is_wrong() {
        let cases = [
            (
                json!(r#"{"path": "a""#),
                "the arguments for `t` are not valid JSON (EOF while parsing an object at line 1 column 12); expected {\"path\": string}",
            ),
            (
                json!([1]),
                "the arguments for `t` must be a JSON object; expected {\"path\": string}",
            ),
            (
                json!("[1]"),
                "the arguments for `t` must be a JSON object; expected {\"path\": string}",
            ),
            (
                json!(null),
                "invalid arguments for `t`: missing field `path`; expected {\"path\": string}",
            ),
            (
                json!({"path": 5}),
                "invalid arguments for `t`: invalid type: integer `5`, expected a string; expected {\"path\": string}",
            ),
            (
                json!({"path": "a", "mode": 1}),
                "invalid arguments for `t`: unknown field `mode`, expected `path`; expected {\"path\": string}",
            ),
        ];
        for (args, message) in cases {
            assert_eq!(
                parse_args::<Args>("t", USAGE, &args),
                Err(message.to_owned())
            );
        }
    }
}
