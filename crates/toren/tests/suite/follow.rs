//! `toren events RUN --follow` in another process: the log so far, then every event as it
//! is appended, and the model's text as it streams (on stderr), until the run ends.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::common::{Toren, text};

#[test]
fn follow_prints_every_event_as_it_comes_and_the_streamed_text_until_the_end() {
    let toren = Toren::new();
    let script = json!({"turns": [
        {"text": "writing the notes", "delay_ms": 300,
         "tool_calls": [{"write_file": {"path": "notes.txt", "content": "n"}}]},
        {"text": "all done here", "delay_ms": 300},
    ]});
    toren.file("s.yaml", &script.to_string());
    toren.agent(
        "slow",
        "name: slow\nmodel: scripted/s.yaml\nsandbox: true\n",
    );
    let mut run_child = toren.spawn(&["run", "slow", "--input", "go"]);
    let run = toren.wait_for_status(&mut run_child, "running");
    let follower = toren.spawn(&["events", &run, "--follow", "--json"]);

    let out = follower.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let followed: Vec<Value> = text(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let ran = run_child.wait_with_output().unwrap();
    assert_eq!(ran.status.code(), Some(0), "{}", text(&ran.stderr));
    assert_eq!(followed, toren.events(&run), "every event, in order, once");
    assert_eq!(followed.last().unwrap()["type"], "run_completed");
    // The model's text streamed to the follower's stderr as it came.
    let stderr = text(&out.stderr);
    assert!(stderr.contains("all done here"), "{stderr}");
}

#[test]
fn follow_of_an_ended_run_prints_its_log_and_exits() {
    let toren = Toren::new();
    toren.file("s.yaml", "turns:\n  - text: done\n");
    toren.agent("a", "name: a\nmodel: scripted/s.yaml\n");
    assert_eq!(
        toren.run(&["run", "a", "--input", "go"]).status.code(),
        Some(0)
    );
    let run = toren.newest_run().unwrap();
    let out = toren
        .command(&["events", &run, "--follow"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout).lines().count(), toren.events(&run).len());
}
