//! read_file, write_file and edit_file: semantics and every class of error message.

use pretty_assertions::assert_eq;
use serde_json::json;
use toren_tools::{ToolOutcome, ToolSettings};

use super::common::{Fixture, err, ok};

fn numbered(lines: &[(usize, &str)]) -> String {
    lines
        .iter()
        .map(|(n, l)| format!("{n:>6}\t{l}\n"))
        .collect()
}

fn truncated(output: &str) -> ToolOutcome {
    ToolOutcome {
        truncated: true,
        ..ok(output)
    }
}

#[tokio::test]
async fn read_file_numbers_lines() {
    let f = Fixture::new().await;
    f.write("a.txt", "alpha\nbeta\n");
    f.write("crlf.txt", "one\r\ntwo");
    f.write("empty.txt", "");
    assert_eq!(
        f.call("read_file", json!({"path": "a.txt"})).await,
        ok(&numbered(&[(1, "alpha"), (2, "beta")]))
    );
    let mut want = numbered(&[(1, "one"), (2, "two")]);
    want.push_str(
        "[line endings of `crlf.txt`: CRLF (\\r\\n); lines are shown without the \\r of a \
         CRLF, and edit_file matches CRLF and LF line breaks alike and keeps the file's]\n",
    );
    assert_eq!(
        f.call("read_file", json!({"path": "crlf.txt"})).await,
        ok(&want)
    );
    assert_eq!(
        f.call("read_file", json!({"path": "empty.txt"})).await,
        ok("(`empty.txt` is empty)")
    );
}

#[tokio::test]
async fn read_file_pages_with_offset_and_limit() {
    let f = Fixture::new().await;
    let text: String = (1..=10).map(|n| format!("line {n}\n")).collect();
    f.write("ten.txt", &text);

    let window = f
        .call(
            "read_file",
            json!({"path": "ten.txt", "offset": 3, "limit": 2}),
        )
        .await;
    let mut want = numbered(&[(3, "line 3"), (4, "line 4")]);
    want.push_str("[showing lines 3-4 of 10; call read_file with offset=5 to read on]\n");
    assert_eq!(window, ok(&want));

    let end = f
        .call("read_file", json!({"path": "ten.txt", "offset": 9}))
        .await;
    let mut want = numbered(&[(9, "line 9"), (10, "line 10")]);
    want.push_str("[showing lines 9-10 of 10]\n");
    assert_eq!(end, ok(&want));

    assert_eq!(
        f.call("read_file", json!({"path": "ten.txt", "offset": 11}))
            .await,
        err("`offset` is 11 but `ten.txt` has only 10 lines")
    );
    f.write("one.txt", "just this");
    assert_eq!(
        f.call("read_file", json!({"path": "one.txt", "offset": 2}))
            .await,
        err("`offset` is 2 but `one.txt` has only 1 line")
    );
    assert_eq!(
        f.call("read_file", json!({"path": "ten.txt", "offset": 0}))
            .await,
        err("`offset` is a 1-based line number; the first line is 1")
    );
    assert_eq!(
        f.call("read_file", json!({"path": "ten.txt", "limit": 0}))
            .await,
        err("`limit` must be at least 1 line")
    );
}

#[tokio::test]
async fn read_file_limits_are_truncations_that_say_how_to_go_on() {
    let settings = ToolSettings {
        read_max_lines: 3,
        read_max_bytes: 40,
        ..ToolSettings::default()
    };
    let f = Fixture::with_settings(settings).await;
    f.write("five.txt", "1\n2\n3\n4\n5\n");
    let mut want = numbered(&[(1, "1"), (2, "2"), (3, "3")]);
    want.push_str("[showing lines 1-3 of 5; call read_file with offset=4 to read on]\n");
    assert_eq!(
        f.call("read_file", json!({"path": "five.txt"})).await,
        truncated(&want)
    );

    // Each numbered line of this file takes 17 bytes: two fit in 40.
    f.write("wide.txt", "abcdefghij\nabcdefghij\nabcdefghij\n");
    let out = f
        .call("read_file", json!({"path": "wide.txt", "limit": 3}))
        .await;
    let mut want = numbered(&[(1, "abcdefghij"), (2, "abcdefghij")]);
    want.push_str("[showing lines 1-2 of 3; call read_file with offset=3 to read on]\n");
    assert_eq!(out, truncated(&want));

    f.write("long.txt", format!("{}\nshort\n", "x".repeat(2500)));
    let out = f
        .call("read_file", json!({"path": "long.txt", "limit": 1}))
        .await;
    let mut want = format!("     1\t{} [... 500 more bytes]\n", "x".repeat(2000));
    want.push_str("[showing lines 1-1 of 2; call read_file with offset=2 to read on]\n");
    want.push_str("[lines longer than 2000 bytes were cut; use bash to see them whole]\n");
    assert_eq!(out, truncated(&want));
}

#[tokio::test]
async fn read_file_refuses_binary_large_and_bad_paths() {
    let settings = ToolSettings {
        file_size_limit: 10,
        ..ToolSettings::default()
    };
    let f = Fixture::with_settings(settings).await;
    f.write("nul.bin", b"ab\0cd");
    f.write("latin1.txt", b"caf\xe9");
    f.write("big.txt", "0123456789A");
    f.write("dir/x", "");
    let cases = [
        (
            "nul.bin",
            "`nul.bin` is a binary file (5 bytes); use bash (e.g. `file nul.bin` or `xxd nul.bin | head`) to inspect it",
        ),
        (
            "latin1.txt",
            "`latin1.txt` is a binary file (4 bytes); use bash (e.g. `file latin1.txt` or `xxd latin1.txt | head`) to inspect it",
        ),
        (
            "big.txt",
            "`big.txt` is 11 bytes, more than the limit of 10 bytes; use bash to work with it in parts (e.g. `head`, `tail`, `grep -n`, `sed -n '100,200p'`)",
        ),
        (
            "dir",
            "`dir` is a directory, not a file; use bash (e.g. `ls -la`) to list it",
        ),
        (
            "missing.txt",
            "`missing.txt` does not exist in the workspace",
        ),
        (
            "../escape.txt",
            "path `../escape.txt` leads outside the workspace; paths are relative to the workspace root",
        ),
        (
            "/etc/passwd",
            "path `/etc/passwd` leads outside the workspace; paths are relative to the workspace root",
        ),
        (
            "/workspace/dir/x",
            "invalid path `/workspace/dir/x`: paths are relative to the workspace root, which bash sees as `/workspace`; write `dir/x` instead",
        ),
        (
            "",
            "invalid path ``: the path is empty; give a path relative to the workspace root, e.g. `notes.txt`",
        ),
    ];
    for (path, message) in cases {
        assert_eq!(
            f.call("read_file", json!({"path": path})).await,
            err(message),
            "{path}"
        );
    }
}

#[tokio::test]
async fn file_tools_refuse_symlinks_the_agent_made_to_leave() {
    let f = Fixture::new().await;
    let made = f
        .call(
            "bash",
            json!({"command": "ln -s /etc/passwd pw && ln -s .. up && ln -s /tmp/planted out"}),
        )
        .await;
    assert_eq!(made.exit_code, Some(0), "{}", made.output);
    let escape = |p: &str| {
        err(&format!(
            "path `{p}` leads outside the workspace; paths are relative to the workspace root"
        ))
    };
    assert_eq!(
        f.call("read_file", json!({"path": "pw"})).await,
        escape("pw")
    );
    assert_eq!(
        f.call("read_file", json!({"path": "up/sandboxes"})).await,
        escape("up/sandboxes")
    );
    assert_eq!(
        f.call("write_file", json!({"path": "out", "content": "x"}))
            .await,
        escape("out")
    );
    assert_eq!(
        f.call(
            "edit_file",
            json!({"path": "pw", "old_string": "root", "new_string": "toor"})
        )
        .await,
        escape("pw")
    );
    assert!(!std::path::Path::new("/tmp/planted").exists());
}

#[tokio::test]
async fn write_file_creates_parents_and_overwrites() {
    let f = Fixture::new().await;
    assert_eq!(
        f.call(
            "write_file",
            json!({"path": "a/b/c.txt", "content": "hello"})
        )
        .await,
        ok("created `a/b/c.txt` (5 bytes)")
    );
    assert_eq!(f.read("a/b/c.txt"), "hello");
    assert_eq!(
        f.call("write_file", json!({"path": "a/b/c.txt", "content": "bye"}))
            .await,
        ok("overwrote `a/b/c.txt` (3 bytes)")
    );
    assert_eq!(f.read("a/b/c.txt"), "bye");
    assert_eq!(
        f.call("write_file", json!({"path": "a", "content": "x"}))
            .await,
        err("`a` is a directory, not a file")
    );
    assert_eq!(
        f.call("write_file", json!({"path": "a/b/c.txt/d", "content": "x"}))
            .await,
        err("invalid path `a/b/c.txt/d`: a component of the path is a file, not a directory")
    );
    assert_eq!(
        f.call("write_file", json!({"path": "x.txt"})).await,
        err(
            r#"invalid arguments for `write_file`: missing field `content`; expected {"path": string, "content": string}"#
        )
    );
}

#[tokio::test]
async fn edit_file_replaces_exactly_one_match() {
    let f = Fixture::new().await;
    f.write("main.rs", "fn main() {\n    println!(\"hi\");\n}\n");
    let out = f
        .call(
            "edit_file",
            json!({"path": "main.rs", "old_string": "\"hi\"", "new_string": "\"hello\""}),
        )
        .await;
    assert_eq!(out, ok("edited `main.rs`: replaced 1 occurrence at line 2"));
    assert_eq!(
        f.read("main.rs"),
        "fn main() {\n    println!(\"hello\");\n}\n"
    );
}

#[tokio::test]
async fn edit_file_needs_replace_all_for_several_matches() {
    let f = Fixture::new().await;
    f.write("x.txt", "a1\nb\na2\na3\n");
    let args = json!({"path": "x.txt", "old_string": "a", "new_string": "z"});
    assert_eq!(
        f.call("edit_file", args).await,
        err(
            "`old_string` occurs 3 times in `x.txt`; include more of the surrounding lines to \
             make it unique, or set `replace_all` to true to replace every occurrence"
        )
    );
    assert_eq!(
        f.read("x.txt"),
        "a1\nb\na2\na3\n",
        "a refused edit changes nothing"
    );
    let args = json!({"path": "x.txt", "old_string": "a", "new_string": "z", "replace_all": true});
    assert_eq!(
        f.call("edit_file", args).await,
        ok("edited `x.txt`: replaced 3 occurrences (the first at line 1)")
    );
    assert_eq!(f.read("x.txt"), "z1\nb\nz2\nz3\n");
}

#[tokio::test]
async fn edit_file_errors_say_what_to_do() {
    let f = Fixture::new().await;
    f.write("x.txt", "let a = 1;\nlet b = 2;\n");
    f.write("bin.dat", b"\0\x01");
    let not_found = "`old_string` was not found in `x.txt`; it must match the file exactly, \
                     including whitespace, indentation and line breaks. Use read_file to see the \
                     current text.";
    let cases = [
        (json!({"path": "x.txt", "old_string": "let c", "new_string": "x"}), not_found.to_owned()),
        (
            json!({"path": "x.txt", "old_string": "     2\tlet b = 2;", "new_string": "x"}),
            format!(
                "{not_found} Leave out the line numbers read_file shows at the start of each \
                 line; they are not part of the file."
            ),
        ),
        (
            json!({"path": "x.txt", "old_string": "let a", "new_string": "let a"}),
            "`old_string` and `new_string` are the same; there is nothing to change".to_owned(),
        ),
        (
            json!({"path": "x.txt", "old_string": "", "new_string": "x"}),
            "`old_string` is empty; give the exact text to replace (to create a file or replace \
             all of it, use write_file)"
                .to_owned(),
        ),
        (
            json!({"path": "new.txt", "old_string": "a", "new_string": "b"}),
            "`new.txt` does not exist in the workspace; to create a file, use write_file"
                .to_owned(),
        ),
        (
            json!({"path": "bin.dat", "old_string": "a", "new_string": "b"}),
            "`bin.dat` is a binary file (2 bytes); use bash (e.g. `file bin.dat` or `xxd bin.dat \
             | head`) to inspect it"
                .to_owned(),
        ),
        (
            json!({"path": "x.txt", "old_string": "a", "new_string": "b", "replace_all": "yes"}),
            r#"invalid arguments for `edit_file`: invalid type: string "yes", expected a boolean; expected {"path": string, "old_string": string, "new_string": string, "replace_all"?: boolean}"#.to_owned(),
        ),
    ];
    for (args, message) in cases {
        assert_eq!(
            f.call("edit_file", args.clone()).await,
            err(&message),
            "{args}"
        );
    }
    assert_eq!(f.read("x.txt"), "let a = 1;\nlet b = 2;\n");
}
