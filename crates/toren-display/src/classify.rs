//! Which characters must never reach a screen raw, and the marker each is shown as. The
//! rule is by class, not by example: every control (C0, DEL, C1), every format character
//! (bidirectional controls, zero-width characters, the BOM, soft hyphen, tags, …), line and
//! paragraph separators, unassigned code points (a newer terminal may give them a meaning),
//! and the default-ignorable characters that are letters or marks but render as nothing
//! (Hangul fillers, variation selectors, …). [`crate::render`] applies it to text.

use unicode_properties::{GeneralCategory, UnicodeGeneralCategory};

/// Whether a terminal could obey `c` instead of showing it, or show nothing for it.
/// `'\n'` and `'\t'` are included; multi-line rendering lets those two through.
pub fn is_hidden(c: char) -> bool {
    if c.is_ascii_graphic() || c == ' ' {
        return false;
    }
    matches!(
        c.general_category(),
        GeneralCategory::Control
            | GeneralCategory::Format
            | GeneralCategory::LineSeparator
            | GeneralCategory::ParagraphSeparator
            | GeneralCategory::Surrogate
            | GeneralCategory::Unassigned
    ) || blank_but_not_format(c)
}

/// Default-ignorable or blank characters whose category is a letter, mark or symbol, so
/// that the category test above does not catch them.
fn blank_but_not_format(c: char) -> bool {
    matches!(
        c,
        '\u{034F}'                     // combining grapheme joiner
        | '\u{115F}' | '\u{1160}'      // Hangul choseong and jungseong fillers
        | '\u{17B4}' | '\u{17B5}'      // Khmer inherent vowels
        | '\u{180B}'..='\u{180F}'      // Mongolian free variation selectors
        | '\u{2800}'                   // Braille pattern blank
        | '\u{3164}'                   // Hangul filler
        | '\u{FE00}'..='\u{FE0F}'      // variation selectors
        | '\u{FFA0}'                   // halfwidth Hangul filler
        | '\u{E0000}'..='\u{E0FFF}' // tags and variation selectors supplement
    )
}

/// The visible stand-in for a hidden character: a short name for the common controls
/// (`⟨ESC⟩`, `⟨CR⟩`, `⟨BS⟩`, …), the code point otherwise (`⟨U+202E⟩`).
pub fn marker(c: char) -> String {
    let name = match c {
        '\0' => "NUL",
        '\u{07}' => "BEL",
        '\u{08}' => "BS",
        '\t' => "TAB",
        '\n' => "LF",
        '\u{0B}' => "VT",
        '\u{0C}' => "FF",
        '\r' => "CR",
        '\u{1B}' => "ESC",
        '\u{7F}' => "DEL",
        _ => return format!("⟨U+{:04X}⟩", u32::from(c)),
    };
    format!("⟨{name}⟩")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_class_is_hidden_and_ordinary_text_is_not() {
        let hidden = [
            '\0',
            '\u{07}',
            '\u{08}',
            '\t',
            '\n',
            '\r',
            '\u{1B}',
            '\u{7F}',
            '\u{85}',
            '\u{9B}',
            '\u{9D}',
            '\u{AD}',
            '\u{61C}',
            '\u{115F}',
            '\u{180E}',
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{200E}',
            '\u{200F}',
            '\u{2028}',
            '\u{2029}',
            '\u{202A}',
            '\u{202E}',
            '\u{2060}',
            '\u{2066}',
            '\u{2069}',
            '\u{2800}',
            '\u{3164}',
            '\u{FE0F}',
            '\u{FEFF}',
            '\u{FFF9}',
            '\u{E0001}',
            '\u{E0041}',
            '\u{E0100}',
            '\u{10FFFF}',
        ];
        let shown: Vec<char> = hidden.iter().copied().filter(|c| !is_hidden(*c)).collect();
        assert_eq!(shown, Vec::<char>::new());
        let ordinary = "ls -la ~/src | grep 'é' → ✓ 日本語 עברית 🦀 ⟨ESC⟩";
        let flagged: Vec<char> = ordinary.chars().filter(|c| is_hidden(*c)).collect();
        assert_eq!(flagged, Vec::<char>::new());
    }

    #[test]
    fn markers_name_common_controls_and_number_the_rest() {
        let names: Vec<String> = ['\u{1B}', '\r', '\u{202E}', '\u{9B}', '\u{E0041}']
            .into_iter()
            .map(marker)
            .collect();
        assert_eq!(
            names,
            ["⟨ESC⟩", "⟨CR⟩", "⟨U+202E⟩", "⟨U+009B⟩", "⟨U+E0041⟩"]
        );
    }
}
