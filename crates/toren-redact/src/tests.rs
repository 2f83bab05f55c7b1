//! The redactor's cases: whole text, chunks split anywhere (also inside a UTF-8
//! character), values contained in one another, short values, and the seam of a capped
//! output as `toren_exec::Capture` renders it.

use pretty_assertions::assert_eq;

use super::*;

fn redactor() -> Redactor {
    Redactor::new([
        ("TOKEN", "ghp_s3cr3tvalue"),
        ("SHORT", "abc"),
        ("PREFIX", "ghp_s3cr3t"),
        ("UNICODE", "pässwörd✓"),
        ("AGAIN", "ghp_s3cr3tvalue"),
    ])
}

#[test]
fn whole_values_are_replaced_the_longest_first_and_short_ones_kept() {
    let r = redactor();
    assert_eq!(
        r.redact("a ghp_s3cr3tvalue b ghp_s3cr3t c abc d pässwörd✓"),
        "a [redacted:TOKEN] b [redacted:PREFIX] c abc d [redacted:UNICODE]"
    );
    assert!(matches!(r.redact("nothing here"), Cow::Borrowed(_)));
    assert!(Redactor::new([("A", "1"), ("B", "")]).is_empty());
    assert_eq!(
        Redactor::default().redact("ghp_s3cr3tvalue"),
        "ghp_s3cr3tvalue"
    );
}

/// Every way of cutting `text` into two and three chunks at byte offsets that are char
/// boundaries gives the same result as redacting it whole.
#[test]
fn a_value_split_across_chunks_is_still_replaced() {
    let r = redactor();
    let text = "x pässwörd✓ yghp_s3cr3tvaluezghp_s3cr3t! ghp_s3cr3tvalue";
    let whole = r.redact(text).into_owned();
    let cuts: Vec<usize> = (0..=text.len())
        .filter(|&i| text.is_char_boundary(i))
        .collect();
    for &a in &cuts {
        for &b in cuts.iter().filter(|&&b| b >= a) {
            let mut stream = r.stream();
            let mut out = stream.push(&text[..a]);
            out.push_str(&stream.push(&text[a..b]));
            out.push_str(&stream.push(&text[b..]));
            out.push_str(&stream.finish());
            assert_eq!(out, whole, "cut at {a} and {b}");
        }
    }
}

#[test]
fn a_stream_holds_back_no_more_than_it_must() {
    let r = Redactor::new([("T", "secret-value")]);
    let mut stream = r.stream();
    // 12-byte value: the last 11 bytes wait; a char is never split.
    assert_eq!(
        stream.push("hello world, this is secret-va"),
        "hello world, this i"
    );
    assert_eq!(stream.push("lue and more"), "s [redacted:T]");
    assert_eq!(stream.finish(), " and more");
    let mut stream = Redactor::new([("U", "✓✓✓✓")]).stream();
    // 12 bytes again: the hold-back point falls inside `é` and moves before it.
    assert_eq!(stream.push("aé✓✓✓"), "a");
    assert_eq!(stream.push("✓b"), "é[redacted:U]");
    assert_eq!(stream.finish(), "b");
    assert_eq!(Redactor::default().stream().push("as is"), "as is");
}

/// Capture's real rendering of an output cut in the middle of a value: the halves on
/// either side of the cut line are replaced too.
#[test]
fn a_value_cut_by_the_output_cap_is_replaced_on_both_sides() {
    let value = "0123456789abcdefSECRET";
    let r = Redactor::new([("T", value)]);
    for split in [4, 9, value.len() - 4] {
        let mut capture = toren_exec::Capture::new(40);
        let filler = "f".repeat(20 - split);
        capture.push(format!("{filler}{value}").as_bytes());
        capture.push("z".repeat(200).as_bytes());
        capture.push(format!("{value}{}", "y".repeat(20 - (value.len() - split))).as_bytes());
        let (text, truncated) = capture.finish();
        assert!(truncated);
        let redacted = r.redact_output(&text, truncated);
        assert!(
            !redacted.contains(&value[..split]) && !redacted.contains(&value[split..]),
            "split {split}: {redacted}"
        );
        assert!(redacted.contains("[redacted:T]\n[... "), "{redacted}");
        assert!(redacted.contains("...]\n[redacted:T]"), "{redacted}");
    }
    // Fragments under MIN_LEN stay (they protect nothing), and an untruncated output with
    // a line that looks like the cut line is treated as plain text.
    let text = "ab012\n[... 9 bytes of output cut; showing the first 5 and last 3 bytes ...]\nET!";
    assert_eq!(r.redact_output(text, true), text);
    let text = "0123\n[... 9 bytes of output cut; x ...]\nCRET";
    assert_eq!(r.redact_output(text, false), text);
    assert_eq!(
        r.redact_output("0123\n[... 9 bytes of output cut; x ...]\nCRET", true),
        "[redacted:T]\n[... 9 bytes of output cut; x ...]\n[redacted:T]"
    );
}

#[test]
fn overlapping_values_of_different_names_keep_apart() {
    // `abcdXYZ` and `XYZabcd` overlap in `xyzabcdxyz`-like text: leftmost wins, the rest
    // is searched after it.
    let r = Redactor::new([("ONE", "abcdXYZ"), ("TWO", "XYZ_abcd")]);
    assert_eq!(r.redact("abcdXYZ_abcd"), "[redacted:ONE]_abcd");
    assert_eq!(r.redact("XYZ_abcdXYZ"), "[redacted:TWO]XYZ");
    let mut stream = r.stream();
    let mut out = stream.push("abcdXY");
    out.push_str(&stream.push("Z_abcd"));
    out.push_str(&stream.finish());
    assert_eq!(out, "[redacted:ONE]_abcd");
}

#[test]
fn remembered_values_are_known_to_the_process_once_each() {
    remember([("A_TOKEN", "remembered-9c1d"), ("SHORT", "ab")]);
    remember([("B_TOKEN", "remembered-9c1d"), ("C_TOKEN", "another-77e0")]);
    let known = known();
    assert_eq!(
        known.redact("x remembered-9c1d y another-77e0 ab"),
        "x [redacted:A_TOKEN] y [redacted:C_TOKEN] ab"
    );
}
