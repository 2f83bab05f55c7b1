//! Text made safe to show: every character [`is_hidden`] finds is replaced by its
//! [`marker`], one character at a time, so a sequence split across streamed fragments is
//! caught in each fragment. [`visible`] is for single-line fields (a name, a path, a
//! one-line summary: newlines and tabs are marked too); [`visible_lines`] for text that
//! keeps its lines (tool output, the model's words, error reports: newlines and tabs pass,
//! nothing else does). [`hidden_count`] and [`findings`] say what was found, so an approval
//! prompt can flag it.

use std::borrow::Cow;

use crate::classify::{is_hidden, marker};

/// `text` as one line: every control, invisible or reordering character, newlines and
/// tabs included, replaced by a visible marker.
pub fn visible(text: &str) -> Cow<'_, str> {
    render(text, is_hidden)
}

/// `text` with its newlines and tabs kept and every other control, invisible or
/// reordering character (carriage returns included) replaced by a visible marker.
pub fn visible_lines(text: &str) -> Cow<'_, str> {
    render(text, marked_in_lines)
}

/// How many characters [`visible_lines`] marks in `text`.
pub fn hidden_count(text: &str) -> usize {
    text.chars().filter(|c| marked_in_lines(*c)).count()
}

/// The distinct markers [`visible_lines`] puts into `text`, in order of first appearance.
pub fn findings(text: &str) -> Vec<String> {
    let mut found: Vec<String> = Vec::new();
    for c in text.chars().filter(|c| marked_in_lines(*c)) {
        let name = marker(c);
        if !found.contains(&name) {
            found.push(name);
        }
    }
    found
}

fn marked_in_lines(c: char) -> bool {
    c != '\n' && c != '\t' && is_hidden(c)
}

fn render(text: &str, marked: fn(char) -> bool) -> Cow<'_, str> {
    if !text.chars().any(marked) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if marked(c) {
            out.push_str(&marker(c));
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    const SPOOF: &str = "echo PWNED > pwned.txt #\r\u{1b}[2K    $ ls -la";

    #[test]
    fn a_spoofed_command_shows_what_it_hides() {
        assert_eq!(
            visible(SPOOF),
            "echo PWNED > pwned.txt #⟨CR⟩⟨ESC⟩[2K    $ ls -la"
        );
        assert_eq!(hidden_count(SPOOF), 2);
        assert_eq!(findings(SPOOF), ["⟨CR⟩", "⟨ESC⟩"]);
    }

    #[test]
    fn lines_keep_newlines_and_tabs_only() {
        let text = "a\tb\r\nc\u{202E}d\u{2028}e\n";
        assert_eq!(visible_lines(text), "a\tb⟨CR⟩\nc⟨U+202E⟩d⟨U+2028⟩e\n");
        assert_eq!(visible(text), "a⟨TAB⟩b⟨CR⟩⟨LF⟩c⟨U+202E⟩d⟨U+2028⟩e⟨LF⟩");
        assert_eq!(hidden_count(text), 3);
    }

    #[test]
    fn clean_text_is_borrowed_unchanged() {
        let text = "ls -la ~/src → ✓ 日本語 🦀";
        assert!(matches!(visible(text), Cow::Borrowed(t) if t == text));
        assert!(matches!(visible_lines("a\nb\tc"), Cow::Borrowed("a\nb\tc")));
    }

    #[test]
    fn fragments_render_like_the_whole() {
        let text = "x\u{1b}]52;c;cHduZWQ=\u{07}y\u{9d}0;t\u{9c}z";
        let whole = visible_lines(text).into_owned();
        for cut in (0..=text.len()).filter(|i| text.is_char_boundary(*i)) {
            let (a, b) = text.split_at(cut);
            assert_eq!(format!("{}{}", visible_lines(a), visible_lines(b)), whole);
        }
    }
}
