//! Strict HTML escaping: every value that did not come from this crate's own literals goes
//! through [`esc`] before it is put into a page (text and attribute values alike).

/// `s` with `&`, `<`, `>`, `"` and `'` replaced by character references: safe as element
/// text and inside a quoted attribute value.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            c => out.push(c),
        }
    }
    out
}

/// `s` percent-encoded for one path segment or query value of a link (then escaped).
pub(crate) fn url(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    for b in s.bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.' | b'~') {
            out.push(char::from(b));
        } else {
            out.push_str(&format!("%{b:02X}"));
        }
    }
    out
}

/// A path of segments, each percent-encoded, joined by `/`.
pub(crate) fn url_path(path: &str) -> String {
    path.split('/').map(url).collect::<Vec<_>>().join("/")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn markup_and_quotes_become_text() {
        assert_eq!(
            esc(r#"<img src=x onerror="alert(1)">&'"#),
            "&lt;img src=x onerror=&quot;alert(1)&quot;&gt;&amp;&#39;"
        );
        assert_eq!(url("a b/c?"), "a%20b%2Fc%3F");
        assert_eq!(url_path("d i/r.txt"), "d%20i/r.txt");
    }
}
