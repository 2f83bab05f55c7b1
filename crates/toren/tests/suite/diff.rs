//! `toren diff` through the real binary: a scripted run's bash calls change the workspace
//! in the bubblewrap sandbox, each call's `tool_started` names the checkpoint taken before
//! it, and the diff between two steps is what those calls did.

use serde_json::json;

use super::common::{Toren, text};

#[test]
fn diff_shows_what_the_calls_between_two_steps_changed() {
    let toren = Toren::new();
    let script = json!({"turns": [
        {"tool_calls": [{"bash": {"command": "printf 'one\\ntwo\\n' > a.txt"}}]},
        {"tool_calls": [{"bash": {"command": "printf 'one\\n2\\n' > a.txt && printf '\\000\\001' > b.bin"}}]},
        {"tool_calls": [{"write_file": {"path": "c.txt", "content": "late\n"}}]},
        {"text": "done"},
    ]});
    toren.file("s.yaml", &script.to_string());
    toren.agent(
        "d",
        "name: d\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    let out = toren.run(&["run", "d", "--input", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run = toren.newest_run().unwrap();
    let started: Vec<(u64, String)> = toren
        .events(&run)
        .iter()
        .filter(|e| e["type"] == "tool_started")
        .map(|e| {
            (
                e["seq"].as_u64().unwrap(),
                e["checkpoint"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(started.len(), 3, "each call starts with a checkpoint");

    // From the start to now: everything, as one would expect from `git diff`.
    let all = toren.run(&["diff", &run]);
    assert_eq!(all.status.code(), Some(0), "{}", text(&all.stderr));
    let all = text(&all.stdout);
    assert!(all.contains("--- /dev/null\n+++ b/a.txt\n"), "{all}");
    assert!(
        all.contains("Binary file b.bin differs (0 -> 2 bytes)"),
        "{all}"
    );
    assert!(all.contains("+++ b/c.txt\n@@ -0,0 +1 @@\n+late\n"), "{all}");

    // Only the second call: after the first call's start, up to the third call's start.
    let from = started[1].0 - 1;
    let to = started[2].0 - 1;
    let out = toren.run(&[
        "diff",
        &run,
        "--from",
        &from.to_string(),
        "--to",
        &to.to_string(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let second = text(&out.stdout);
    assert_eq!(
        second,
        "--- a/a.txt\n+++ b/a.txt\n@@ -1,2 +1,2 @@\n one\n-two\n+2\nBinary file b.bin differs (0 -> 2 bytes)\n"
    );
}
