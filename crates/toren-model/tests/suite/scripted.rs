//! The scripted provider: turn selection from the conversation, stable ids, load errors.

use std::path::Path;

use pretty_assertions::assert_eq;
use serde_json::json;
use toren_model::scripted::{Script, ScriptedProvider};
use toren_model::{Error, ModelProvider, ModelResponse};
use toren_protocol::{Message, ToolResult, Usage};

use super::common::{Collected, call, request, turn, user};

const SCRIPT: &str = r#"
turns:
  - text: "Looking around."            # optional
    tool_calls:
      - bash: {command: "ls -la"}
      - write_file: {path: notes.txt, content: "hi\n"}
  - tool_calls:
      - bash:
  - text: "Done."
"#;

fn write_script(dir: &Path, source: &str) -> std::path::PathBuf {
    let path = dir.join("script.yaml");
    std::fs::write(&path, source).unwrap();
    path
}

fn answered(n: usize) -> Vec<Message> {
    let mut messages = vec![user("start")];
    for i in 0..n {
        messages.push(Message::Assistant(turn(&format!("turn {i}"), vec![])));
        messages.push(Message::ToolResults {
            results: vec![ToolResult {
                call_id: format!("x{i}"),
                content: "out".into(),
                is_error: false,
            }],
        });
    }
    messages
}

#[tokio::test]
async fn each_turn_follows_the_number_of_assistant_messages() {
    let dir = tempfile::tempdir().unwrap();
    let provider = ScriptedProvider::load(&write_script(dir.path(), SCRIPT)).unwrap();
    let seen = Collected::default();

    let mut responses = Vec::new();
    for n in 0..4 {
        responses.push(
            provider
                .respond(&request(answered(n)), &seen.sink())
                .await
                .unwrap(),
        );
    }

    let response = |message, stop_reason: &str| ModelResponse {
        message,
        stop_reason: stop_reason.into(),
        usage: Usage::default(),
        model: "scripted".into(),
    };
    assert_eq!(
        responses,
        vec![
            response(
                turn(
                    "Looking around.",
                    vec![
                        call("call_1", "bash", json!({"command": "ls -la"})),
                        call(
                            "call_2",
                            "write_file",
                            json!({"path": "notes.txt", "content": "hi\n"})
                        ),
                    ]
                ),
                "tool_use",
            ),
            response(
                turn("", vec![call("call_3", "bash", json!({}))]),
                "tool_use"
            ),
            response(turn("Done.", vec![]), "end_turn"),
            response(turn("(end of script)", vec![]), "end_turn"),
        ]
    );
    // The text streams word by word, as a real model's does.
    assert_eq!(
        seen.pieces(),
        vec!["Looking ", "around.", "Done.", "(end ", "of ", "script)"]
    );
}

#[tokio::test]
async fn a_fresh_provider_answers_a_resumed_conversation_the_same_way() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_script(dir.path(), SCRIPT);
    let first = ScriptedProvider::load(&path).unwrap();
    first
        .respond(&request(answered(0)), &|_: &str| {})
        .await
        .unwrap();

    let resumed = ScriptedProvider::load(&path).unwrap();
    let again = resumed
        .respond(&request(answered(1)), &|_: &str| {})
        .await
        .unwrap();
    let original = first
        .respond(&request(answered(1)), &|_: &str| {})
        .await
        .unwrap();

    assert_eq!(again, original);
    assert_eq!(again.message.tool_calls[0].id, "call_3");
}

#[test]
fn unknown_keys_are_errors_with_file_line_and_column() {
    let dir = tempfile::tempdir().unwrap();
    let path = write_script(
        dir.path(),
        "turns:\n  - text: hi\n    tool_call:\n      - bash: {}\n",
    );

    let error = Script::load(&path).unwrap_err();

    let message = error.to_string();
    assert!(matches!(error, Error::Script { .. }));
    assert!(message.contains("tool_call"), "{message}");
    assert!(
        message.contains(&format!("{}:3:5", path.display())),
        "{message}"
    );
}

#[test]
fn a_tool_call_has_exactly_one_key() {
    let source =
        "turns:\n  - tool_calls:\n      - bash: {command: ls}\n        write_file: {path: a}\n";

    let message = Script::parse(source, Path::new("agents/s.yaml"))
        .unwrap_err()
        .to_string();

    assert!(message.contains("exactly one key"), "{message}");
    assert!(message.contains("agents/s.yaml:"), "{message}");
}

#[test]
fn a_missing_file_is_a_clear_error() {
    let error = Script::load(Path::new("/nonexistent/script.yaml")).unwrap_err();

    assert_eq!(
        error.to_string(),
        "scripted model file /nonexistent/script.yaml: cannot read it: No such file or directory (os error 2)"
    );
}

#[test]
fn a_bare_tool_name_and_an_empty_file_are_explained() {
    let bare = Script::parse(
        "turns:\n  - tool_calls:\n      - bash\n",
        Path::new("s.yaml"),
    )
    .unwrap_err();
    let empty = Script::parse("\n", Path::new("s.yaml")).unwrap_err();

    assert!(
        bare.to_string()
            .contains("tool call `bash` has no arguments; write it as `- bash: {...}`"),
        "{bare}"
    );
    assert!(bare.to_string().contains("s.yaml:3:9"), "{bare}");
    assert_eq!(
        empty.to_string(),
        "scripted model file s.yaml: the file is empty; a script is a mapping with a `turns:` list"
    );
}
