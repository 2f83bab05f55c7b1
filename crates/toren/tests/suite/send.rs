//! `send_to_channel` through the real binary: `toren run` binds no channel, so the tool
//! answers the model with a clear error (tell the person the path instead), nothing is
//! delivered anywhere, and the run goes on to its answer.

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::common::{Toren, text};

const SCRIPT: &str = r##"
turns:
  - tool_calls:
      - write_file: {path: out/report.md, content: "# Report\n"}
  - tool_calls:
      - send_to_channel: {path: out/report.md, caption: "the report"}
  - text: "The report is in the workspace at out/report.md."
"##;

#[test]
fn toren_run_has_no_channel_and_the_model_is_told_to_give_the_path() {
    let toren = Toren::new();
    toren.file("send.yaml", SCRIPT);
    toren.agent(
        "sender",
        "name: sender\nmodel: scripted/send.yaml\nsandbox:\n  approval: never\n",
    );
    let out = toren.run(&["run", "sender", "--input", "write and send the report"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "stderr: {stderr}");
    assert_eq!(
        text(&out.stdout),
        "The report is in the workspace at out/report.md.\n"
    );

    let run = toren.newest_run().unwrap();
    let events = toren.events(&run);
    assert!(events[0].get("channel").is_none(), "{}", events[0]);
    let sent: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "tool_completed" && e["call_id"] == "call_2")
        .collect();
    assert_eq!(sent.len(), 1);
    assert_eq!(sent[0]["is_error"], true);
    assert_eq!(
        sent[0]["output"],
        "this run has no chat to send files to; tell the person the file's path in the \
         workspace instead (`out/report.md`)"
    );
    assert!(
        events.iter().all(|e| e["type"] != "message_delivered"),
        "nothing was delivered"
    );
    // Nothing reached a downloads directory, by default or otherwise.
    assert!(!toren.dir.path().join("home/Downloads").exists());
    // The file is still where the agent made it.
    assert_eq!(
        std::fs::read_to_string(toren.workspace(&run).join("out/report.md")).unwrap(),
        "# Report\n"
    );
}
