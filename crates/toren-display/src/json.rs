//! JSON text made safe to print: every hidden character left raw in serialized JSON
//! (serde_json escapes C0 controls but not DEL, C1 controls, bidirectional or invisible
//! characters) becomes a `\uXXXX` escape, a surrogate pair above U+FFFF. The result parses
//! to exactly the same data, so `--json` output stays the data scripts rely on and is also
//! safe to `cat` on a terminal.

use std::borrow::Cow;
use std::fmt::Write;

use crate::classify::is_hidden;

/// `json` (serialized by serde_json or any conforming writer) with every hidden character
/// escaped; JSON's own whitespace (`\n`, `\t`, `\r` between tokens) is left as it is.
pub fn escape_json(json: &str) -> Cow<'_, str> {
    if !json.chars().any(escaped) {
        return Cow::Borrowed(json);
    }
    let mut out = String::with_capacity(json.len() + 32);
    for c in json.chars() {
        if escaped(c) {
            let mut units = [0u16; 2];
            for unit in c.encode_utf16(&mut units) {
                let _ = write!(out, "\\u{unit:04x}");
            }
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Raw hidden characters can only stand inside JSON strings (outside them a conforming
/// writer puts nothing but ASCII), where an escape means the same character.
fn escaped(c: char) -> bool {
    !matches!(c, '\n' | '\t' | '\r') && is_hidden(c)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn escapes_what_serde_json_leaves_raw() {
        let json = "{\"a\":\"x\u{7f}\u{9b}\u{202e}\u{e0041}\\\\\u{200b}\\u001b\"}";
        assert_eq!(
            escape_json(json),
            "{\"a\":\"x\\u007f\\u009b\\u202e\\udb40\\udc41\\\\\\u200b\\u001b\"}"
        );
        assert!(matches!(escape_json("{\n  \"a\": 1\n}"), Cow::Borrowed(_)));
    }
}
