//! Decoding a tool call's arguments: the one parser that both the tool that runs a call and
//! the approval prompt that shows it use, so that what a human approves is exactly what will
//! run (I-11). A string is accepted if it holds a JSON object: some providers pass the raw
//! text on when it did not parse for them, and the tool then runs what is inside it, so the
//! prompt must show what is inside it too.

use serde::Deserialize;
use serde::de::DeserializeOwned;
use serde_json::Value;

/// The name of the tool that runs shell commands.
pub const BASH: &str = "bash";

/// The shape of `bash`'s arguments, as told to the model when they do not decode.
pub const BASH_USAGE: &str = r#"{"command": string, "timeout_secs"?: integer}"#;

/// The arguments of a `bash` call.
#[derive(Clone, Debug, PartialEq, Eq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct BashArgs {
    /// The command line given to `bash -c`, exactly.
    pub command: String,
    #[serde(default)]
    pub timeout_secs: Option<u64>,
}

impl BashArgs {
    /// Decodes a `bash` call's arguments, or says what is wrong in a message for the model.
    pub fn decode(args: &Value) -> Result<Self, String> {
        decode_args(BASH, BASH_USAGE, args)
    }
}

/// Decodes a tool's arguments, or says in one message what is wrong and what was expected
/// (`usage`).
pub fn decode_args<T: DeserializeOwned>(
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
    use pretty_assertions::assert_eq;
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
        let want = || Args {
            path: "a".to_owned(),
        };
        assert_eq!(
            decode_args::<Args>("t", USAGE, &json!({"path": "a"})),
            Ok(want())
        );
        assert_eq!(
            decode_args::<Args>("t", USAGE, &json!(r#"{"path": "a"}"#)),
            Ok(want())
        );
    }

    #[test]
    fn a_command_encoded_twice_decodes_to_what_runs() {
        // The model sent the arguments as a JSON string with escaped characters: the
        // command is what the string holds, not the string.
        let args = json!(r#"{"command": "\u0065\u0063\u0068\u006f PWNED > pwned"}"#);
        assert_eq!(
            BashArgs::decode(&args),
            Ok(BashArgs {
                command: "echo PWNED > pwned".to_owned(),
                timeout_secs: None,
            })
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
                decode_args::<Args>("t", USAGE, &args),
                Err(message.to_owned())
            );
        }
    }
}
