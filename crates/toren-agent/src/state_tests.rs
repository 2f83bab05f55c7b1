use jiff::Timestamp;
use pretty_assertions::assert_eq;
use serde_json::json;
use toren_protocol::{
    AgentSpec, ApprovalDecided, ApprovalPolicy, ApprovalRequested, AssistantMessage, Event,
    EventKind, Message, ModelResponded, ResolvedPolicy, RunCreated, RunId, RunStatus, SandboxSpec,
    ToolCall, ToolCompleted, ToolResult, ToolStarted, Usage,
};

use super::*;
use crate::{Action, INTERRUPTED_NOTE};

pub(crate) fn created(approval: ApprovalPolicy) -> EventKind {
    EventKind::RunCreated(RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "t".into(),
            model: "scripted/s.yaml".into(),
            instructions: None,
            sandbox: Some(SandboxSpec::default()),
            max_turns: 3,
            context_tokens: None,
            source: None,
        },
        policy: Some(ResolvedPolicy {
            checkpoints: Default::default(),
            backend: "local".into(),
            image: None,
            network: false,
            egress: None,
            approval,
            env: vec![],
            limits: Default::default(),
            workspace: None,
            on_interrupt: Default::default(),
            sandbox_key: None,
            volume: None,
        }),
        input: "do it".into(),
        session: None,
        channel: None,
        start: None,
    })
}

pub(crate) fn call(id: &str, name: &str) -> ToolCall {
    ToolCall {
        id: id.into(),
        name: name.into(),
        arguments: if name == "bash" {
            json!({"command": "echo hi"})
        } else {
            json!({"path": "a.txt"})
        },
        wire_id: None,
    }
}

pub(crate) fn responded(text: &str, calls: Vec<ToolCall>) -> EventKind {
    EventKind::ModelResponded(ModelResponded {
        message: AssistantMessage {
            text: text.into(),
            tool_calls: calls,
        },
        stop_reason: "tool_use".into(),
        usage: Usage::default(),
        model: "m".into(),
    })
}

pub(crate) fn completed(id: &str, output: &str) -> EventKind {
    EventKind::ToolCompleted(ToolCompleted {
        call_id: id.into(),
        output: output.into(),
        is_error: false,
        exit_code: Some(0),
        truncated: false,
    })
}

pub(crate) fn started(id: &str, attempt: u32) -> EventKind {
    EventKind::ToolStarted(ToolStarted {
        call_id: id.into(),
        tool: "bash".into(),
        attempt,
        checkpoint: None,
    })
}

pub(crate) fn log(kinds: Vec<EventKind>) -> Vec<Event> {
    let run_id = RunId::new();
    kinds
        .into_iter()
        .enumerate()
        .map(|(i, kind)| Event {
            run_id: run_id.clone(),
            seq: i as u64 + 1,
            at: Timestamp::UNIX_EPOCH,
            v: 1,
            kind,
        })
        .collect()
}

/// The action that runs `call` as `attempt`.
pub(crate) fn run_tool(call: ToolCall, attempt: u32) -> Action {
    Action::RunTool {
        started: ToolStarted {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            attempt,
            checkpoint: None,
        },
        call,
        attempt,
        note: (attempt > 1).then_some(INTERRUPTED_NOTE),
    }
}

/// The approval request of `call` for `attempt`, showing `command`.
pub(crate) fn request(call: &ToolCall, command: &str, attempt: u32) -> ApprovalRequested {
    ApprovalRequested {
        call_id: call.id.clone(),
        tool: call.name.clone(),
        command: command.into(),
        attempt,
    }
}

pub(crate) fn state(kinds: Vec<EventKind>) -> RunState {
    RunState::from_events(&log(kinds)).unwrap()
}

#[test]
fn a_new_run_calls_the_model() {
    let s = state(vec![created(ApprovalPolicy::Never)]);
    assert!(matches!(
        s.next_action(),
        Action::CallModel {
            offer_tools: true,
            ..
        }
    ));
    assert_eq!(
        s.messages,
        vec![Message::User {
            text: "do it".into()
        }]
    );
}

#[test]
fn tool_calls_run_in_order_and_results_go_back_to_the_model() {
    let a = call("call_1", "write_file");
    let b = call("call_2", "read_file");
    let mut kinds = vec![
        created(ApprovalPolicy::Never),
        responded("working", vec![a.clone(), b.clone()]),
    ];
    assert_eq!(state(kinds.clone()).next_action(), run_tool(a, 1));
    kinds.push(started("call_1", 1));
    kinds.push(completed("call_1", "wrote"));
    assert_eq!(state(kinds.clone()).next_action(), run_tool(b, 1));
    kinds.push(started("call_2", 1));
    kinds.push(completed("call_2", "read"));
    let s = state(kinds);
    assert!(matches!(
        s.next_action(),
        Action::CallModel {
            offer_tools: true,
            ..
        }
    ));
    assert_eq!(
        s.messages.last(),
        Some(&Message::ToolResults {
            results: vec![
                ToolResult {
                    call_id: "call_1".into(),
                    content: "wrote".into(),
                    is_error: false
                },
                ToolResult {
                    call_id: "call_2".into(),
                    content: "read".into(),
                    is_error: false
                },
            ]
        })
    );
}

#[test]
fn a_started_call_without_completion_is_run_again_as_a_new_attempt() {
    let c = call("call_1", "bash");
    let s = state(vec![
        created(ApprovalPolicy::Never),
        responded("", vec![c.clone()]),
        started("call_1", 1),
    ]);
    assert_eq!(s.next_action(), run_tool(c, 2));
}

#[test]
fn bash_waits_for_approval_and_file_tools_do_not() {
    let bash = call("call_1", "bash");
    let write = call("call_2", "write_file");
    let mut kinds = vec![
        created(ApprovalPolicy::Always),
        responded("", vec![bash.clone(), write.clone()]),
    ];
    assert_eq!(
        state(kinds.clone()).next_action(),
        Action::RequestApproval {
            request: request(&bash, "echo hi", 1),
            call: bash.clone(),
        }
    );
    kinds.push(EventKind::ApprovalRequested(ApprovalRequested {
        call_id: "call_1".into(),
        tool: "bash".into(),
        command: "echo hi".into(),
        attempt: 1,
    }));
    let waiting = state(kinds.clone());
    assert_eq!(waiting.status, RunStatus::AwaitingApproval);
    assert_eq!(
        waiting.next_action(),
        Action::AwaitApproval {
            request: request(&bash, "echo hi", 1),
            call: bash.clone(),
        }
    );
    kinds.push(EventKind::ApprovalDecided(ApprovalDecided {
        call_id: "call_1".into(),
        approved: true,
        by: "me".into(),
        via: "cli".into(),
        reason: None,
    }));
    assert_eq!(state(kinds.clone()).next_action(), run_tool(bash, 1));
    kinds.push(started("call_1", 1));
    kinds.push(completed("call_1", "hi"));
    assert_eq!(state(kinds).next_action(), run_tool(write, 1));
}

#[test]
fn a_denial_is_recorded_as_the_result_without_running() {
    let bash = call("call_1", "bash");
    let s = state(vec![
        created(ApprovalPolicy::Always),
        responded("", vec![bash.clone()]),
        EventKind::ApprovalRequested(ApprovalRequested {
            call_id: "call_1".into(),
            tool: "bash".into(),
            command: "echo hi".into(),
            attempt: 1,
        }),
        EventKind::ApprovalDecided(ApprovalDecided {
            call_id: "call_1".into(),
            approved: false,
            by: "me".into(),
            via: "cli".into(),
            reason: Some("not now".into()),
        }),
    ]);
    assert_eq!(
        s.next_action(),
        Action::RecordDenial {
            call: bash,
            result: ToolCompleted {
                call_id: "call_1".into(),
                output: "The human denied this command; it did not run. Their reason: not now.\nAdjust your approach.".into(),
                is_error: true,
                exit_code: None,
                truncated: false,
            }
        }
    );
}

#[test]
fn a_text_only_answer_completes_and_max_turns_fails() {
    let s = state(vec![
        created(ApprovalPolicy::Never),
        responded("all done", vec![]),
    ]);
    assert_eq!(
        s.next_action(),
        Action::Complete {
            event: toren_protocol::RunCompleted {
                output: "all done".into()
            }
        }
    );
    let mut kinds = vec![created(ApprovalPolicy::Never)];
    for i in 1..=3 {
        let id = format!("call_{i}");
        kinds.push(responded("", vec![call(&id, "read_file")]));
        kinds.push(started(&id, 1));
        kinds.push(completed(&id, "x"));
    }
    assert!(
        matches!(state(kinds).next_action(), Action::Fail { event } if event.error.contains("max_turns (3)"))
    );
}

#[test]
fn inconsistent_logs_are_errors() {
    let result = RunState::from_events(&log(vec![
        created(ApprovalPolicy::Never),
        completed("call_9", "x"),
    ]));
    assert!(matches!(result, Err(Error::Inconsistent { seq: 2, .. })));
    let mut events = log(vec![created(ApprovalPolicy::Never), responded("x", vec![])]);
    events[1].seq = 5;
    assert!(RunState::from_events(&events).is_err());
    assert!(matches!(
        RunState::from_events(&[]),
        Err(Error::NotCreated(_))
    ));
}

#[test]
fn completed_runs_are_finished() {
    let s = state(vec![
        created(ApprovalPolicy::Never),
        responded("bye", vec![]),
        EventKind::RunCompleted(toren_protocol::RunCompleted {
            output: "bye".into(),
        }),
    ]);
    assert_eq!(
        s.next_action(),
        Action::Finished {
            status: RunStatus::Completed
        }
    );
    assert_eq!(s.output.as_deref(), Some("bye"));
}

#[test]
fn a_turn_answered_out_of_order_closes_with_its_results_in_the_calls_order() {
    // Two calls answered out of order, an approval asked and decided, a re-run attempt,
    // a sandbox, a compaction between turns, then a final answer and the run's end, on
    // top of a session's history; and the same log with a stray result halfway.
    let (a, b) = (call("call_a", "bash"), call("call_b", "read_file"));
    let mut kinds = vec![
        created(ApprovalPolicy::Always),
        responded("two things", vec![a.clone(), b.clone()]),
        EventKind::ApprovalRequested(request(&a, "echo hi", 1)),
        EventKind::ApprovalDecided(ApprovalDecided {
            call_id: a.id.clone(),
            approved: true,
            by: "ana".into(),
            via: "terminal".into(),
            reason: None,
        }),
        EventKind::SandboxProvisioned(toren_protocol::SandboxProvisioned {
            backend: "local".into(),
            instance: "w".into(),
            workspace: "/w".into(),
            envd_version: None,
            origin: None,
        }),
        started("call_b", 1),
        completed("call_b", "the file"),
        started("call_a", 1),
        started("call_a", 2),
        completed("call_a", "hi"),
        EventKind::ContextCompacted(toren_protocol::ContextCompacted {
            stubbed: vec!["call_b".into()],
            ..Default::default()
        }),
        responded("done", vec![]),
        EventKind::RunCompleted(toren_protocol::RunCompleted {
            output: "done".into(),
        }),
    ];
    let history = vec![
        Message::User {
            text: "earlier".into(),
        },
        Message::Assistant(AssistantMessage {
            text: "earlier answer".into(),
            tool_calls: vec![],
        }),
    ];
    let folded = RunState::from_events_with_history(&history, &log(kinds.clone())).unwrap();
    let mut conversation = history.clone();
    conversation.extend([
        Message::User {
            text: "do it".into(),
        },
        Message::Assistant(AssistantMessage {
            text: "two things".into(),
            tool_calls: vec![a, b],
        }),
        // The results in the calls' order, not in the order they came.
        Message::ToolResults {
            results: vec![
                ToolResult {
                    call_id: "call_a".into(),
                    content: "hi".into(),
                    is_error: false,
                },
                ToolResult {
                    call_id: "call_b".into(),
                    content: "the file".into(),
                    is_error: false,
                },
            ],
        },
        Message::Assistant(AssistantMessage {
            text: "done".into(),
            tool_calls: vec![],
        }),
    ]);
    assert_eq!(folded.messages, conversation);
    assert_eq!(
        (folded.status, folded.output.as_deref(), folded.turns),
        (RunStatus::Completed, Some("done"), 2)
    );
    assert_eq!(folded.compaction().stubbed_outputs(), 1);
    assert_eq!(folded.history_len, 2);
    kinds.insert(4, completed("call_z", "no such call"));
    let stray = RunState::from_events_with_history(&history, &log(kinds));
    assert!(
        matches!(
            &stray,
            Err(Error::Inconsistent {
                seq: 5,
                kind: "tool_completed",
                ..
            })
        ),
        "{stray:?}"
    );
}
