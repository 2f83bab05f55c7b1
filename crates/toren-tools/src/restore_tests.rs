use pretty_assertions::assert_eq;
use serde_json::json;
use toren_protocol::{
    AssistantMessage, EventKind, ModelResponded, NotRestored, ToolCall, ToolCompleted, ToolStarted,
};
use toren_sandbox::RestorePlan;

use super::plan_restore;

/// A call and its start and result, as the journal holds them.
fn call(id: &str, name: &str, arguments: serde_json::Value, ok: bool) -> Vec<EventKind> {
    vec![
        EventKind::ModelResponded(ModelResponded {
            message: AssistantMessage {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: id.into(),
                    name: name.into(),
                    arguments,
                    wire_id: None,
                }],
            },
            stop_reason: "tool_use".into(),
            usage: Default::default(),
            model: String::new(),
        }),
        EventKind::ToolStarted(ToolStarted {
            call_id: id.into(),
            tool: name.into(),
            attempt: 1,
            checkpoint: None,
        }),
        EventKind::ToolCompleted(ToolCompleted {
            call_id: id.into(),
            output: String::new(),
            is_error: !ok,
            exit_code: None,
            truncated: false,
        }),
    ]
}

fn log(kinds: Vec<Vec<EventKind>>) -> Vec<EventKind> {
    kinds.into_iter().flatten().collect()
}

fn lost(path: &str, why: &str) -> NotRestored {
    NotRestored {
        path: path.into(),
        why: why.into(),
    }
}

#[test]
fn writes_and_later_edits_are_restored_and_bash_touched_files_are_not() {
    let events = log(vec![
        call(
            "1",
            "write_file",
            json!({"path": "a.txt", "content": "one\ntwo\n"}),
            true,
        ),
        call(
            "2",
            "write_file",
            json!({"path": "b.txt", "content": "before bash"}),
            true,
        ),
        call("3", "bash", json!({"command": "rm b.txt"}), true),
        call(
            "4",
            "edit_file",
            json!({"path": "a.txt", "old_string": "two", "new_string": "2"}),
            true,
        ),
        // A failed edit changes nothing.
        call(
            "5",
            "edit_file",
            json!({"path": "a.txt", "old_string": "one", "new_string": "x"}),
            false,
        ),
        call(
            "6",
            "write_file",
            json!({"path": "c/d.txt", "content": "after bash"}),
            true,
        ),
        call(
            "6b",
            "edit_file",
            json!({"path": "c/d.txt", "old_string": "bash", "new_string": "BASH"}),
            true,
        ),
        call(
            "7",
            "edit_file",
            json!({"path": "made-by-bash.txt", "old_string": "a", "new_string": "b"}),
            true,
        ),
        call(
            "8",
            "write_file",
            json!({"path": "key.env", "content": "K=[redacted:API_KEY]"}),
            true,
        ),
        // A failed write does not count.
        call(
            "9",
            "write_file",
            json!({"path": "never.txt", "content": "no"}),
            false,
        ),
    ]);
    assert_eq!(
        plan_restore(&events),
        RestorePlan {
            files: vec![("c/d.txt".into(), "after BASH".into()),],
            not_restored: vec![
                // Edited after bash ran: the edit applies to a file bash may have changed.
                lost("a.txt", "a bash command ran after its last write"),
                lost("b.txt", "a bash command ran after its last write"),
                lost("key.env", "it holds a redacted secret"),
                lost(
                    "made-by-bash.txt",
                    "edited, but its content before the edit is not in the log"
                ),
            ],
        }
    );
}

#[test]
fn a_write_after_bash_makes_the_file_known_again() {
    let events = log(vec![
        call(
            "1",
            "write_file",
            json!({"path": "a", "content": "old"}),
            true,
        ),
        call("2", "bash", json!({"command": "true"}), true),
        call(
            "3",
            "edit_file",
            json!({"path": "a", "old_string": "old", "new_string": "x"}),
            true,
        ),
        call(
            "4",
            "write_file",
            json!({"path": "b", "content": "new"}),
            true,
        ),
        call("5", "bash", json!({"command": "true"}), true),
        call(
            "6",
            "write_file",
            json!({"path": "b", "content": "newer"}),
            true,
        ),
    ]);
    assert_eq!(
        plan_restore(&events),
        RestorePlan {
            files: vec![("b".into(), "newer".into())],
            not_restored: vec![lost("a", "a bash command ran after its last write")],
        }
    );
}

#[test]
fn a_command_started_and_not_ended_does_not_count() {
    // The bash call that met the lost sandbox: started, its result not yet journaled.
    let mut bash = call("2", "bash", json!({"command": "cat a"}), true);
    bash.pop();
    let events = log(vec![
        call(
            "1",
            "write_file",
            json!({"path": "a", "content": "kept"}),
            true,
        ),
        bash,
    ]);
    assert_eq!(
        plan_restore(&events),
        RestorePlan {
            files: vec![("a".into(), "kept".into())],
            not_restored: vec![],
        }
    );
}

#[test]
fn a_run_without_file_tools_restores_nothing() {
    let events = log(vec![call("1", "bash", json!({"command": "ls"}), true)]);
    assert_eq!(plan_restore(&events), RestorePlan::default());
}
