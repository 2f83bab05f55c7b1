//! A bounded output buffer: keeps the first and the last bytes of a stream of any length,
//! counts what fell in between, and renders the result as text with one line stating how
//! much was cut. Memory stays bounded by the limit however much a command prints. The
//! `local` backend of `toren-sandbox` uses it too, so both backends cap output alike.

use std::collections::VecDeque;

/// Collects output chunks, keeping at most `limit` bytes (half head, half tail).
#[derive(Debug)]
pub struct Capture {
    head: Vec<u8>,
    head_cap: usize,
    tail: VecDeque<u8>,
    tail_cap: usize,
    total: u64,
}

impl Capture {
    pub fn new(limit: usize) -> Self {
        let head_cap = limit / 2;
        let tail_cap = limit - head_cap;
        Self {
            head: Vec::with_capacity(head_cap.min(64 * 1024)),
            head_cap,
            tail: VecDeque::new(),
            tail_cap,
            total: 0,
        }
    }

    pub fn push(&mut self, mut chunk: &[u8]) {
        self.total = self
            .total
            .saturating_add(u64::try_from(chunk.len()).unwrap_or(u64::MAX));
        let room = self.head_cap - self.head.len();
        if room > 0 {
            let take = room.min(chunk.len());
            self.head.extend_from_slice(&chunk[..take]);
            chunk = &chunk[take..];
        }
        if chunk.len() >= self.tail_cap {
            self.tail.clear();
            self.tail.extend(&chunk[chunk.len() - self.tail_cap..]);
        } else {
            let excess = (self.tail.len() + chunk.len()).saturating_sub(self.tail_cap);
            self.tail.drain(..excess);
            self.tail.extend(chunk);
        }
    }

    /// The text and whether anything was cut.
    pub fn finish(self) -> (String, bool) {
        let kept = u64::try_from(self.head.len() + self.tail.len()).unwrap_or(u64::MAX);
        let mut tail = Vec::from(self.tail);
        if kept == self.total {
            let mut all = self.head;
            all.append(&mut tail);
            return (String::from_utf8_lossy(&all).into_owned(), false);
        }
        // Cut at character boundaries so the seams do not show replacement characters.
        let head = &self.head[..self.head.len() - incomplete_suffix(&self.head)];
        let tail = &tail[leading_continuations(&tail)..];
        let shown = u64::try_from(head.len() + tail.len()).unwrap_or(u64::MAX);
        let cut = self.total - shown;
        let text = format!(
            "{}\n[... {cut} bytes of output cut; showing the first {} and last {} bytes ...]\n{}",
            String::from_utf8_lossy(head),
            head.len(),
            tail.len(),
            String::from_utf8_lossy(tail),
        );
        (text, true)
    }
}

/// How many bytes at the end of `bytes` form an unfinished UTF-8 sequence.
fn incomplete_suffix(bytes: &[u8]) -> usize {
    for back in 1..=bytes.len().min(3) {
        let b = bytes[bytes.len() - back];
        if b & 0b1100_0000 == 0b1000_0000 {
            continue; // a continuation byte: keep looking for the lead byte
        }
        let needed = match b {
            0xC0..=0xDF => 2,
            0xE0..=0xEF => 3,
            0xF0..=0xF7 => 4,
            _ => 1,
        };
        return if needed > back { back } else { 0 };
    }
    0
}

/// How many continuation bytes `bytes` starts with (at most 3).
fn leading_continuations(bytes: &[u8]) -> usize {
    bytes
        .iter()
        .take(3)
        .take_while(|b| *b & 0b1100_0000 == 0b1000_0000)
        .count()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn run(limit: usize, chunks: &[&[u8]]) -> (String, bool) {
        let mut c = Capture::new(limit);
        for chunk in chunks {
            c.push(chunk);
        }
        c.finish()
    }

    #[test]
    fn short_output_is_kept_whole() {
        assert_eq!(run(10, &[b"abc", b"def"]), ("abcdef".to_owned(), false));
        assert_eq!(run(10, &[b"0123456789"]), ("0123456789".to_owned(), false));
    }

    #[test]
    fn long_output_keeps_head_and_tail_and_counts_the_cut() {
        let (text, truncated) = run(6, &[b"abcd", b"efgh", b"ijkl"]);
        assert!(truncated);
        assert_eq!(
            text,
            "abc\n[... 6 bytes of output cut; showing the first 3 and last 3 bytes ...]\njkl"
        );
    }

    #[test]
    fn tail_survives_many_small_chunks() {
        let mut c = Capture::new(4);
        for b in b"0123456789" {
            c.push(&[*b]);
        }
        let (text, truncated) = c.finish();
        assert!(truncated);
        assert!(text.starts_with("01\n[... 6 bytes"), "{text}");
        assert!(text.ends_with("\n89"), "{text}");
    }

    #[test]
    fn cuts_fall_on_character_boundaries() {
        // Five two-byte characters; a limit of 6 splits the second and the fourth.
        let (text, truncated) = run(6, &["ééééé".as_bytes()]);
        assert!(truncated);
        assert_eq!(
            text,
            "é\n[... 6 bytes of output cut; showing the first 2 and last 2 bytes ...]\né"
        );
    }

    #[test]
    fn invalid_utf8_is_replaced_not_dropped() {
        assert_eq!(run(10, &[b"a\xffb"]), ("a\u{fffd}b".to_owned(), false));
    }
}
