//! Redaction by value: the values of a run's granted `env` variables
//! and of its injected secrets are replaced by `[redacted:NAME]` in what Toren keeps or
//! shows — tool outputs before they are journaled and sent to the model, streamed text,
//! log lines.
//!
//! A [`Redactor`] holds the values (one Aho-Corasick automaton, leftmost-longest, so of
//! two values where one contains the other the longer is replaced whole). Text that comes
//! in pieces goes through a [`Stream`], which holds back the last `longest value − 1`
//! bytes of what it has seen, so a value split across chunks is still found; [`finish`]
//! releases the rest. A command's output that was cut to its head and tail
//! ([`Redactor::redact_output`]) is also checked at the seam: a head ending in the start
//! of a value, or a tail beginning with the end of one, has that fragment replaced.
//!
//! Values shorter than [`MIN_LEN`] bytes are not redacted: a variable holding `1` or
//! `yes` would otherwise turn every such word of every output into a marker while
//! protecting nothing (such a value is guessed as easily as read). The same floor applies
//! to the fragments at a cut seam. A value that two names hold is shown under the first.
//!
//! Neighbours: the worker builds one per run from its granted and injected values; the
//! binary's log writer uses one of every value this process handed out. No I/O.
//!
//! [`finish`]: Stream::finish

use std::borrow::Cow;
use std::sync::Arc;

use aho_corasick::{AhoCorasick, AhoCorasickBuilder, MatchKind};

/// Values shorter than this many bytes are left as they are.
pub const MIN_LEN: usize = 4;

/// Replaces known values by `[redacted:NAME]`.
#[derive(Clone, Debug, Default)]
pub struct Redactor {
    inner: Option<Arc<Inner>>,
}

#[derive(Debug)]
struct Inner {
    automaton: AhoCorasick,
    /// `[redacted:NAME]` for each pattern, by pattern index.
    labels: Vec<String>,
    /// The values themselves, by pattern index (for the seam check).
    values: Vec<String>,
    /// The longest value's length in bytes.
    longest: usize,
}

impl Redactor {
    /// A redactor of `values` (`(name, value)` pairs); values under [`MIN_LEN`] bytes and
    /// repeats of an earlier value are left out.
    pub fn new<I, N, V>(values: I) -> Self
    where
        I: IntoIterator<Item = (N, V)>,
        N: Into<String>,
        V: Into<String>,
    {
        let mut labels = Vec::new();
        let mut kept: Vec<String> = Vec::new();
        for (name, value) in values {
            let value = value.into();
            if value.len() < MIN_LEN || kept.contains(&value) {
                continue;
            }
            labels.push(format!("[redacted:{}]", name.into()));
            kept.push(value);
        }
        if kept.is_empty() {
            return Self::default();
        }
        let longest = kept.iter().map(String::len).max().unwrap_or(0);
        let built = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostLongest)
            .build(&kept);
        match built {
            Ok(automaton) => Self {
                inner: Some(Arc::new(Inner {
                    automaton,
                    labels,
                    values: kept,
                    longest,
                })),
            },
            // Only a pattern set too large for the automaton fails; redact by plain search
            // instead of not at all.
            Err(_) => Self::fallback(labels, kept, longest),
        }
    }

    fn fallback(labels: Vec<String>, values: Vec<String>, longest: usize) -> Self {
        // A non-contiguous NFA has no size limit worth speaking of; if even that fails,
        // there is nothing left to build with.
        let built = AhoCorasickBuilder::new()
            .match_kind(MatchKind::LeftmostLongest)
            .kind(Some(aho_corasick::AhoCorasickKind::NoncontiguousNFA))
            .build(&values);
        match built {
            Ok(automaton) => Self {
                inner: Some(Arc::new(Inner {
                    automaton,
                    labels,
                    values,
                    longest,
                })),
            },
            Err(_) => Self::default(),
        }
    }

    /// Whether there is nothing to redact.
    pub fn is_empty(&self) -> bool {
        self.inner.is_none()
    }

    /// `text` with every value replaced.
    pub fn redact<'a>(&self, text: &'a str) -> Cow<'a, str> {
        let Some(inner) = &self.inner else {
            return Cow::Borrowed(text);
        };
        if inner.automaton.find(text).is_none() {
            return Cow::Borrowed(text);
        }
        Cow::Owned(inner.automaton.replace_all(text, &inner.labels))
    }

    /// A command's output as the backends render it: when `truncated`, the text is the
    /// head, one line `[... N bytes of output cut; …]`, and the tail (`toren_exec::Capture`),
    /// and a value the cut split in two is replaced on both sides of the line as well.
    pub fn redact_output(&self, text: &str, truncated: bool) -> String {
        let Some(inner) = &self.inner else {
            return text.to_owned();
        };
        let Some((head, marker, tail)) = truncated.then(|| split_at_cut(text)).flatten() else {
            return self.redact(text).into_owned();
        };
        let mut head = self.redact(head).into_owned();
        let mut tail = self.redact(tail).into_owned();
        if let Some((keep, label)) = inner.fragment_at_end(&head) {
            head.truncate(keep);
            head.push_str(label);
        }
        if let Some((skip, label)) = inner.fragment_at_start(&tail) {
            tail.replace_range(..skip, label);
        }
        format!("{head}{marker}{tail}")
    }

    /// A redactor of text that arrives in pieces.
    pub fn stream(&self) -> Stream {
        Stream {
            redactor: self.clone(),
            pending: String::new(),
        }
    }
}

impl Inner {
    /// The longest fragment of at least [`MIN_LEN`] bytes that ends `text` and starts a
    /// value (a proper prefix: a whole value was replaced already): where it begins and
    /// the value's label.
    fn fragment_at_end(&self, text: &str) -> Option<(usize, &str)> {
        let mut best: Option<(usize, &str)> = None;
        for (value, label) in self.values.iter().zip(&self.labels) {
            for len in (MIN_LEN..value.len()).rev() {
                if !value.is_char_boundary(len) {
                    continue;
                }
                if text.ends_with(&value[..len]) {
                    let start = text.len() - len;
                    if best.is_none_or(|(at, _)| start < at) {
                        best = Some((start, label));
                    }
                    break;
                }
            }
        }
        best
    }

    /// The longest fragment of at least [`MIN_LEN`] bytes that begins `text` and ends a
    /// value (a proper suffix): its length and the value's label.
    fn fragment_at_start(&self, text: &str) -> Option<(usize, &str)> {
        let mut best: Option<(usize, &str)> = None;
        for (value, label) in self.values.iter().zip(&self.labels) {
            for len in (MIN_LEN..value.len()).rev() {
                let from = value.len() - len;
                if !value.is_char_boundary(from) {
                    continue;
                }
                if text.starts_with(&value[from..]) {
                    if best.is_none_or(|(longest, _)| len > longest) {
                        best = Some((len, label));
                    }
                    break;
                }
            }
        }
        best
    }
}

/// The head, the cut line (with its newlines) and the tail of a capped output.
fn split_at_cut(text: &str) -> Option<(&str, &str, &str)> {
    const OPEN: &str = "\n[... ";
    const CLOSE: &str = " ...]\n";
    let mut from = 0;
    while let Some(found) = text[from..].find(OPEN) {
        let start = from + found;
        let rest = &text[start + OPEN.len()..];
        if let Some(line_end) = rest.find('\n') {
            let line = &rest[..=line_end];
            if line.contains(" bytes of output cut;") && line.ends_with(CLOSE) {
                let end = start + OPEN.len() + line_end + 1;
                return Some((&text[..start], &text[start..end], &text[end..]));
            }
        }
        from = start + 1;
    }
    None
}

/// Redacts text that arrives in chunks; see the crate doc.
#[derive(Debug)]
pub struct Stream {
    redactor: Redactor,
    pending: String,
}

impl Stream {
    /// Takes the next chunk; returns what can be shown now (possibly nothing).
    pub fn push(&mut self, chunk: &str) -> String {
        let Some(inner) = self.redactor.inner.clone() else {
            return chunk.to_owned();
        };
        self.pending.push_str(chunk);
        // A match starting before `limit` lies wholly within what is here (no value is
        // longer than `longest`), and so does the longest one starting there; text before
        // it (moved back to a character boundary) can start no match still to come.
        let limit = self.pending.len().saturating_sub(inner.longest - 1);
        let mut cut = limit;
        while !self.pending.is_char_boundary(cut) {
            cut -= 1;
        }
        let mut out = String::new();
        let mut last = 0;
        for found in inner.automaton.find_iter(&self.pending) {
            if found.start() >= limit {
                break;
            }
            out.push_str(&self.pending[last..found.start()]);
            out.push_str(&inner.labels[found.pattern().as_usize()]);
            last = found.end();
        }
        let upto = last.max(cut);
        out.push_str(&self.pending[last..upto]);
        self.pending.drain(..upto);
        out
    }

    /// What is still held back, redacted: the end of the stream.
    pub fn finish(self) -> String {
        self.redactor.redact(&self.pending).into_owned()
    }
}

/// The values this process handed to a sandbox or a proxy, for what it writes outside
/// any run (log lines): every [`remember`]ed value, as one [`Redactor`].
static KNOWN: std::sync::RwLock<Known> = std::sync::RwLock::new(Known {
    values: Vec::new(),
    redactor: Redactor { inner: None },
});

struct Known {
    values: Vec<(String, String)>,
    redactor: Redactor,
}

/// Adds `values` (`(name, value)` pairs) to this process's known values ([`known`]); a
/// value already known is not added again. They are kept for the life of the process, as
/// its environment keeps them anyway.
pub fn remember<'a, I>(values: I)
where
    I: IntoIterator<Item = (&'a str, &'a str)>,
{
    let mut fresh: Vec<(String, String)> = Vec::new();
    {
        let known = KNOWN
            .read()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        for (name, value) in values {
            if value.len() >= MIN_LEN
                && !known.values.iter().any(|(_, v)| v == value)
                && !fresh.iter().any(|(_, v)| v == value)
            {
                fresh.push((name.to_owned(), value.to_owned()));
            }
        }
    }
    if fresh.is_empty() {
        return;
    }
    let mut known = KNOWN
        .write()
        .unwrap_or_else(std::sync::PoisonError::into_inner);
    for (name, value) in fresh {
        if !known.values.iter().any(|(_, v)| *v == value) {
            known.values.push((name, value));
        }
    }
    known.redactor = Redactor::new(known.values.iter().cloned());
}

/// A redactor of every value this process [`remember`]ed so far.
pub fn known() -> Redactor {
    KNOWN
        .read()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .redactor
        .clone()
}

#[cfg(test)]
mod tests;
