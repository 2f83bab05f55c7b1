//! Tool-call arguments as they arrive from a stream: a JSON text assembled from fragments.
//! Both HTTP clients decode it here, with the same leniency.

use serde_json::Value;

/// Decodes assembled tool arguments: empty means `{}`; text that is not JSON is passed on
/// as a JSON string so the tool can tell the model what is wrong with it.
pub(crate) fn parse_arguments(raw: &str) -> Value {
    if raw.trim().is_empty() {
        return Value::Object(serde_json::Map::new());
    }
    serde_json::from_str(raw).unwrap_or_else(|_| Value::String(raw.to_owned()))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn empty_valid_and_broken_arguments() {
        assert_eq!(parse_arguments(""), json!({}));
        assert_eq!(parse_arguments("  "), json!({}));
        assert_eq!(parse_arguments(r#"{"path":"a"}"#), json!({"path": "a"}));
        assert_eq!(parse_arguments(r#"{"path":"a""#), json!(r#"{"path":"a""#));
    }
}
