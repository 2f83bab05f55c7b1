//! Where `edit_file`'s `old_string` matches a file's text, and what the edited text is.
//!
//! A match is exact first. When there is none and CRLF line breaks are involved (the file
//! has them, or `old_string` has them), line breaks match whether CRLF or LF: read_file
//! shows lines without their `\r`, so a multi-line `old_string` copied from it has LF
//! breaks where a CRLF file has CRLF ones. Either way the replacement's line breaks take
//! the line endings of the text it replaces (or, where that has none or both, the file's
//! most common ones), so a file keeps its line endings. When `old_string` matches only
//! with every line ending ignored (a lone CR), the caller is told so. The size of the result
//! is computed from the matches, before it is built; neither counting nor measuring
//! allocates per match.

use crate::files::LineEndings;

/// What [`Edit::find`] found.
pub(crate) enum Found<'a> {
    /// At least one match.
    Matches(Edit<'a>),
    /// No match, but there would be one with every line ending (CR too) ignored; `file`
    /// describes the file's line endings.
    OnlyIgnoringLineEndings {
        file: String,
    },
    Nothing,
}

/// The matches of `old_string` in a text, and their replacement.
pub(crate) struct Edit<'a> {
    text: &'a str,
    /// Where `old` is looked for: the text itself, or the text with CRLF as LF.
    haystack: Haystack,
    old: String,
    /// The replacement with LF line breaks, and with CRLF ones.
    new_lf: String,
    new_crlf: String,
    endings: LineEndings,
    count: usize,
}

enum Haystack {
    /// `old` matches the text as it is.
    Text,
    /// `old` matches the text with every CRLF read as LF (this string).
    Normalised(String),
}

impl<'a> Edit<'a> {
    pub(crate) fn find(text: &'a str, old: &str, new: &str) -> Found<'a> {
        let new_lf = new.replace("\r\n", "\n");
        let edit = |haystack: Haystack, old: String, count: usize| Edit {
            text,
            haystack,
            old,
            new_crlf: new_lf.replace('\n', "\r\n"),
            new_lf: new_lf.clone(),
            endings: LineEndings::of(text),
            count,
        };
        let count = text.matches(old).count();
        if count > 0 {
            return Found::Matches(edit(Haystack::Text, old.to_owned(), count));
        }
        if !text.contains('\r') && !old.contains('\r') {
            return Found::Nothing;
        }
        let normal = text.replace("\r\n", "\n");
        let old_lf = old.replace("\r\n", "\n");
        let count = normal.matches(old_lf.as_str()).count();
        if count > 0 {
            return Found::Matches(edit(Haystack::Normalised(normal), old_lf, count));
        }
        let bare = |s: &str| s.replace('\r', "\n");
        if bare(&normal).contains(&bare(&old_lf)) {
            let file = LineEndings::of(text)
                .describe()
                .unwrap_or_else(|| "LF (\\n)".to_owned());
            return Found::OnlyIgnoringLineEndings { file };
        }
        Found::Nothing
    }

    /// How many times `old_string` occurs.
    pub(crate) fn count(&self) -> usize {
        self.count
    }

    /// The 1-based line of the first match.
    pub(crate) fn first_line(&self) -> usize {
        let mut first = None;
        self.each_match(|start, _| {
            first = Some(start);
            false
        });
        let at = first.unwrap_or(0);
        self.text[..at].matches('\n').count() + 1
    }

    /// The size in bytes of the edited text, computed without building it.
    pub(crate) fn result_len(&self) -> u64 {
        let mut len = u128::try_from(self.text.len()).unwrap_or(u128::MAX);
        self.each_match(|start, end| {
            let removed = u128::try_from(end - start).unwrap_or(u128::MAX);
            let added = u128::try_from(self.replacement(start, end).len()).unwrap_or(u128::MAX);
            len = len.saturating_sub(removed).saturating_add(added);
            true
        });
        u64::try_from(len).unwrap_or(u64::MAX)
    }

    /// Says how line endings were matched, when they were not matched exactly.
    pub(crate) fn line_endings_note(&self) -> Option<String> {
        match self.haystack {
            Haystack::Text => None,
            Haystack::Normalised(_) => Some(format!(
                "line breaks matched as CRLF or LF; the file's {} line endings were kept",
                self.endings
                    .describe()
                    .unwrap_or_else(|| "LF (\\n)".to_owned())
            )),
        }
    }

    /// The edited text. Call after checking [`Self::result_len`].
    pub(crate) fn apply(&self) -> String {
        let capacity = usize::try_from(self.result_len()).unwrap_or(0);
        let mut out = String::with_capacity(capacity);
        let mut done = 0;
        self.each_match(|start, end| {
            out.push_str(&self.text[done..start]);
            out.push_str(self.replacement(start, end));
            done = end;
            true
        });
        out.push_str(&self.text[done..]);
        out
    }

    /// The replacement for `text[start..end]`, with its line endings.
    fn replacement(&self, start: usize, end: usize) -> &str {
        let replaced = LineEndings::of(&self.text[start..end]);
        let crlf = match (replaced.crlf > 0, replaced.lf > 0) {
            (true, false) => true,
            (false, true) => false,
            _ => self.endings.prefers_crlf(),
        };
        if crlf { &self.new_crlf } else { &self.new_lf }
    }

    /// Calls `each(start, end)` with the byte range in the text of every match, left to
    /// right, until it returns `false`.
    fn each_match(&self, mut each: impl FnMut(usize, usize) -> bool) {
        match &self.haystack {
            Haystack::Text => {
                for (start, found) in self.text.match_indices(self.old.as_str()) {
                    if !each(start, start + found.len()) {
                        return;
                    }
                }
            }
            Haystack::Normalised(normal) => {
                // Offsets in `normal` map to the text by stepping both along: a CRLF in the
                // text is one LF in `normal`. A match that starts at such an LF starts at
                // its CR; one that ends before it leaves the CR out.
                let bytes = self.text.as_bytes();
                let (mut at_normal, mut at_text) = (0, 0);
                let mut step_to = |target: usize| {
                    while at_normal < target {
                        if bytes[at_text] == b'\r' && bytes.get(at_text + 1) == Some(&b'\n') {
                            at_text += 1;
                        }
                        at_text += 1;
                        at_normal += 1;
                    }
                    at_text
                };
                for (start, found) in normal.match_indices(self.old.as_str()) {
                    let text_start = step_to(start);
                    let text_end = step_to(start + found.len());
                    if !each(text_start, text_end) {
                        return;
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::{Edit, Found};

    fn edited(text: &str, old: &str, new: &str) -> Option<(usize, String, u64)> {
        match Edit::find(text, old, new) {
            Found::Matches(edit) => Some((edit.count(), edit.apply(), edit.result_len())),
            Found::OnlyIgnoringLineEndings { .. } | Found::Nothing => None,
        }
    }

    #[test]
    fn crlf_files_match_lf_line_breaks_and_keep_their_endings() {
        let text = "one\r\ntwo\r\nthree\r\n";
        let want = "one\r\n2\r\n2b\r\nthree\r\n".to_owned();
        assert_eq!(
            edited(text, "one\ntwo\n", "one\n2\n2b\n"),
            Some((1, want.clone(), want.len() as u64))
        );
        // Exact matches keep working, and new lines take the file's endings too.
        let want = "one\r\ntwo\r\nmore\r\nthree\r\n".to_owned();
        assert_eq!(
            edited(text, "two", "two\nmore"),
            Some((1, want.clone(), want.len() as u64))
        );
    }

    #[test]
    fn mixed_files_keep_each_region_s_endings() {
        let text = "a\r\nb\r\nc\nd\ne\r\n";
        let (count, out, len) = edited(text, "a\nb\n", "A\nB\n").unwrap();
        assert_eq!((count, out.as_str()), (1, "A\r\nB\r\nc\nd\ne\r\n"));
        assert_eq!(len, out.len() as u64);
        let (_, out, _) = edited(text, "c\nd\n", "C\nD\n").unwrap();
        assert_eq!(out, "a\r\nb\r\nC\nD\ne\r\n");
        // A region with both takes the file's majority (CRLF here).
        let (_, out, _) = edited(text, "b\nc\n", "B\nC\n").unwrap();
        assert_eq!(out, "a\r\nB\r\nC\r\nd\ne\r\n");
    }

    #[test]
    fn crlf_in_old_string_matches_lf_files() {
        let (_, out, _) = edited("x\ny\n", "x\r\ny", "X\r\nY").unwrap();
        assert_eq!(out, "X\nY\n");
    }

    #[test]
    fn replace_all_counts_and_measures_before_building() {
        let text = "a\r\nb\r\n".repeat(3);
        let (count, out, len) = edited(&text, "a\nb", "c").unwrap();
        assert_eq!((count, out.as_str()), (3, "c\r\nc\r\nc\r\n"));
        assert_eq!(len, 9);
        let many = "a".repeat(1000);
        let Found::Matches(edit) = Edit::find(&many, "a", &"b".repeat(400)) else {
            panic!("no match");
        };
        assert_eq!((edit.count(), edit.result_len()), (1000, 400_000));
    }

    #[test]
    fn lone_cr_is_reported_not_matched() {
        assert!(matches!(
            Edit::find("a\rb\r", "a\nb", "x"),
            Found::OnlyIgnoringLineEndings { file } if file == "CR (\\r)"
        ));
        assert!(matches!(Edit::find("a\r\nb", "zz", "x"), Found::Nothing));
    }

    #[test]
    fn first_line_counts_original_lines() {
        let Found::Matches(edit) = Edit::find("x\r\ny\r\nz\r\n", "y\nz", "q") else {
            panic!("no match");
        };
        assert_eq!(edit.first_line(), 2);
    }
}
