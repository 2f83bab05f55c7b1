//! CRLF and mixed line endings: read_file says what a file's line endings are, edit_file
//! matches the line breaks of an `old_string` copied from read_file's output in CRLF and
//! mixed files, and the edited file keeps its line endings byte for byte; a match that
//! fails only because of a lone CR says so.

use pretty_assertions::assert_eq;
use serde_json::json;

use super::common::{Fixture, err, ok};

const CRLF_NOTE: &str = "; lines are shown without the \\r of a CRLF, and edit_file matches \
                         CRLF and LF line breaks alike and keeps the file's]";

#[tokio::test]
async fn a_multi_line_edit_copied_from_read_file_succeeds_on_a_crlf_file() {
    let f = Fixture::new().await;
    f.write("win.txt", "[core]\r\n\tname = old\r\n\tmode = 1\r\n");
    let read = f.call("read_file", json!({"path": "win.txt"})).await;
    assert_eq!(
        read,
        ok(&format!(
            "     1\t[core]\n     2\t\tname = old\n     3\t\tmode = 1\n\
             [line endings of `win.txt`: CRLF (\\r\\n){CRLF_NOTE}\n"
        ))
    );
    // What a model copies from that output: LF line breaks.
    let out = f
        .call(
            "edit_file",
            json!({
                "path": "win.txt",
                "old_string": "\tname = old\n\tmode = 1\n",
                "new_string": "\tname = new\n\tmode = 2\n\textra = yes\n",
            }),
        )
        .await;
    assert_eq!(
        out,
        ok(
            "edited `win.txt`: replaced 1 occurrence at line 2 (line breaks matched as CRLF or \
             LF; the file's CRLF (\\r\\n) line endings were kept)"
        )
    );
    assert_eq!(
        f.read("win.txt"),
        "[core]\r\n\tname = new\r\n\tmode = 2\r\n\textra = yes\r\n"
    );
    // A single-line edit matches exactly, and a line it adds gets CRLF too.
    let out = f
        .call(
            "edit_file",
            json!({"path": "win.txt", "old_string": "[core]", "new_string": "[core]\n# edited"}),
        )
        .await;
    assert_eq!(out, ok("edited `win.txt`: replaced 1 occurrence at line 1"));
    assert_eq!(
        f.read("win.txt"),
        "[core]\r\n# edited\r\n\tname = new\r\n\tmode = 2\r\n\textra = yes\r\n"
    );
}

#[tokio::test]
async fn mixed_line_endings_are_shown_and_kept_where_they_are() {
    let f = Fixture::new().await;
    f.write("mixed.txt", "a\r\nb\r\nc\nd\n");
    let read = f.call("read_file", json!({"path": "mixed.txt"})).await;
    assert!(
        read.output.ends_with(&format!(
            "[line endings of `mixed.txt`: mixed: 2 CRLF (\\r\\n), 2 LF (\\n){CRLF_NOTE}\n"
        )),
        "{}",
        read.output
    );
    let edit = |old: &str, new: &str| json!({"path": "mixed.txt", "old_string": old, "new_string": new, "replace_all": true});
    let out = f.call("edit_file", edit("a\nb\n", "A\nB\n")).await;
    assert!(!out.is_error, "{}", out.output);
    let out = f.call("edit_file", edit("c\nd", "C\nD")).await;
    assert!(!out.is_error, "{}", out.output);
    assert_eq!(f.read("mixed.txt"), "A\r\nB\r\nC\nD\n");
    // CRLF typed into old_string matches LF lines too.
    let out = f.call("edit_file", edit("C\r\nD", "cd")).await;
    assert!(!out.is_error, "{}", out.output);
    assert_eq!(f.read("mixed.txt"), "A\r\nB\r\ncd\n");
}

#[tokio::test]
async fn a_match_that_fails_only_because_of_line_endings_says_so() {
    let f = Fixture::new().await;
    // Classic Mac line endings: lone CRs, which edit_file does not take for line breaks.
    f.write("mac.txt", "one\rtwo\rthree\r");
    let out = f
        .call(
            "edit_file",
            json!({"path": "mac.txt", "old_string": "one\ntwo", "new_string": "1\n2"}),
        )
        .await;
    assert_eq!(
        out,
        err(
            "`old_string` was not found in `mac.txt`, but it would match if line endings were \
             ignored: the file uses CR (\\r) line endings, and edit_file matches CRLF (\\r\\n) \
             and LF (\\n) alike but not a lone CR (\\r). Use bash (e.g. `sed`) for this edit, \
             or rewrite the file with write_file."
        )
    );
    assert_eq!(f.read("mac.txt"), "one\rtwo\rthree\r");
    // A text that is not there at all gets the ordinary message.
    let out = f
        .call(
            "edit_file",
            json!({"path": "mac.txt", "old_string": "four\nfive", "new_string": "x"}),
        )
        .await;
    assert!(
        out.output
            .starts_with("`old_string` was not found in `mac.txt`; it must match")
    );
}
