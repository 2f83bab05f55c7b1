//! The file tools' size limit binds what they write, not only what they read: write_file
//! refuses content over it, and edit_file computes the size of its result from the matches
//! before building it — one huge replacement or millions of small ones — so no edit can
//! exhaust the host's memory. A refused edit changes nothing.

use pretty_assertions::assert_eq;
use serde_json::json;
use toren_tools::ToolSettings;

use super::common::{Fixture, err, ok};

const LIMIT: u64 = 1000;

async fn fixture() -> Fixture {
    Fixture::with_settings(ToolSettings {
        file_size_limit: LIMIT,
        ..ToolSettings::default()
    })
    .await
}

#[tokio::test]
async fn write_file_refuses_content_over_the_limit() {
    let f = fixture().await;
    let out = f
        .call(
            "write_file",
            json!({"path": "big.txt", "content": "x".repeat(1001)}),
        )
        .await;
    assert_eq!(
        out,
        err(
            "`content` would make `big.txt` 1001 bytes, more than the limit of 1000 bytes of \
             the file tools; nothing was written. Use bash for files that large (e.g. generate \
             them with a script)"
        )
    );
    assert!(!f.path("big.txt").exists());
    let out = f
        .call(
            "write_file",
            json!({"path": "big.txt", "content": "x".repeat(1000)}),
        )
        .await;
    assert_eq!(out, ok("created `big.txt` (1000 bytes)"));
}

fn over(what: &str) -> String {
    format!(
        "{what}, more than the limit of 1000 bytes of the file tools; nothing was written. Use \
         bash for files that large (e.g. generate them with a script)"
    )
}

#[tokio::test]
async fn edits_whose_result_would_exceed_the_limit_are_refused() {
    let f = fixture().await;
    // Many small replacements: 1000 × 2 bytes.
    f.write("many.txt", "a".repeat(1000));
    let out = f
        .call(
            "edit_file",
            json!({"path": "many.txt", "old_string": "a", "new_string": "bb", "replace_all": true}),
        )
        .await;
    assert_eq!(
        out,
        err(&over(
            "replacing 1000 occurrences would make `many.txt` 2000 bytes"
        ))
    );
    assert_eq!(f.read("many.txt"), "a".repeat(1000), "unchanged");

    // One large replacement: up to the limit it works, past it it is refused.
    f.write("one.txt", "marker\n");
    let fits = json!({"path": "one.txt", "old_string": "marker", "new_string": "y".repeat(999)});
    let out = f.call("edit_file", fits).await;
    assert_eq!(out, ok("edited `one.txt`: replaced 1 occurrence at line 1"));
    assert_eq!(f.read("one.txt").len(), 1000);
    let out = f
        .call(
            "edit_file",
            json!({"path": "one.txt", "old_string": "\n", "new_string": "\n\n"}),
        )
        .await;
    assert_eq!(
        out,
        err(&over(
            "replacing 1 occurrence would make `one.txt` 1001 bytes"
        ))
    );
}
