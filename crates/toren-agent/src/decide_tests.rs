//! Decisions beyond the basic loop: `on_interrupt: ask`, agents without tools, the model
//! input, and when a sandbox instance is recorded.

use pretty_assertions::assert_eq;
use toren_protocol::{
    ApprovalDecided, ApprovalPolicy, EventKind, OnInterrupt, RunCreated, ToolCompleted,
};

use crate::Action;
use crate::state::tests::{call, created, log, request, responded, run_tool, started, state};

/// `created` with `on_interrupt: ask` (and `approval` as given).
fn asking(approval: ApprovalPolicy) -> EventKind {
    let EventKind::RunCreated(mut c) = created(approval) else {
        unreachable!()
    };
    if let Some(policy) = c.policy.as_mut() {
        policy.on_interrupt = OnInterrupt::Ask;
    }
    EventKind::RunCreated(c)
}

fn decided(id: &str, approved: bool, reason: Option<&str>) -> EventKind {
    EventKind::ApprovalDecided(ApprovalDecided {
        call_id: id.into(),
        approved,
        by: "me".into(),
        via: "cli".into(),
        reason: reason.map(Into::into),
    })
}

#[test]
fn an_interrupted_command_asks_before_it_runs_again() {
    for approval in [ApprovalPolicy::Never, ApprovalPolicy::Always] {
        let c = call("call_1", "bash");
        let mut kinds = vec![asking(approval), responded("", vec![c.clone()])];
        if approval == ApprovalPolicy::Always {
            kinds.push(EventKind::ApprovalRequested(request(&c, "echo hi", 1)));
            kinds.push(decided("call_1", true, None));
        }
        kinds.push(started("call_1", 1));
        // Interrupted: the re-run needs its own approval, for attempt 2.
        assert_eq!(
            state(kinds.clone()).next_action(),
            Action::RequestApproval {
                call: c.clone(),
                request: request(&c, "echo hi", 2),
            },
            "{approval}"
        );
        kinds.push(EventKind::ApprovalRequested(request(&c, "echo hi", 2)));
        assert_eq!(
            state(kinds.clone()).next_action(),
            Action::AwaitApproval {
                call: c.clone(),
                request: request(&c, "echo hi", 2),
            }
        );
        let mut approved = kinds.clone();
        approved.push(decided("call_1", true, None));
        assert_eq!(state(approved).next_action(), run_tool(c.clone(), 2));

        kinds.push(decided("call_1", false, Some("it already pushed")));
        let Action::RecordDenial { result, .. } = state(kinds).next_action() else {
            panic!("a denial is recorded");
        };
        assert!(
            result.output.contains("interrupted mid-execution"),
            "{result:?}"
        );
        assert!(result.output.contains("it already pushed"), "{result:?}");
        assert!(result.is_error);
    }
}

#[test]
fn rerun_is_the_default_and_file_tools_never_ask() {
    let bash = call("call_1", "bash");
    let s = state(vec![
        created(ApprovalPolicy::Never),
        responded("", vec![bash.clone()]),
        started("call_1", 1),
    ]);
    assert_eq!(s.next_action(), run_tool(bash, 2));

    let write = call("call_1", "write_file");
    let s = state(vec![
        asking(ApprovalPolicy::Always),
        responded("", vec![write.clone()]),
        started("call_1", 1),
    ]);
    assert_eq!(s.next_action(), run_tool(write, 2));
}

#[test]
fn an_agent_without_a_sandbox_is_told_it_has_no_tools() {
    let EventKind::RunCreated(c) = created(ApprovalPolicy::Never) else {
        unreachable!()
    };
    let mut agent = c.agent.clone();
    agent.sandbox = None;
    let no_tools = EventKind::RunCreated(RunCreated {
        agent,
        policy: None,
        input: c.input,
        session: None,
        channel: None,
        start: None,
    });
    let s = state(vec![no_tools.clone()]);
    assert!(matches!(
        s.next_action(),
        Action::CallModel {
            offer_tools: false,
            ..
        }
    ));
    let s = state(vec![no_tools, responded("", vec![call("call_1", "bash")])]);
    assert_eq!(
        s.next_action(),
        Action::Refuse {
            call: call("call_1", "bash"),
            result: ToolCompleted {
                call_id: "call_1".into(),
                output: "Tool `bash` is not available: this agent has no tools.".into(),
                is_error: true,
                exit_code: None,
                truncated: false,
            },
        }
    );
}

#[test]
fn the_model_gets_the_system_prompt_and_the_conversation() {
    let s = state(vec![created(ApprovalPolicy::Never)]);
    let Action::CallModel {
        system, messages, ..
    } = s.next_action()
    else {
        panic!("a model call");
    };
    assert_eq!(system, crate::system_prompt(&s.agent));
    assert_eq!(messages, s.messages);
}

#[test]
fn a_sandbox_instance_is_recorded_once_and_again_when_it_changes() {
    let mut events = log(vec![created(ApprovalPolicy::Never)]);
    let s = crate::RunState::from_events(&events).unwrap();
    let first = s
        .provisioned("docker", "c1".into(), "/w".into())
        .expect("the first instance is recorded");
    events.push(toren_protocol::Event {
        run_id: events[0].run_id.clone(),
        seq: 2,
        at: events[0].at,
        v: 1,
        kind: EventKind::SandboxProvisioned(first),
    });
    let s = crate::RunState::from_events(&events).unwrap();
    assert_eq!(s.provisioned("docker", "c1".into(), "/w".into()), None);
    assert!(s.provisioned("docker", "c2".into(), "/w".into()).is_some());
}

#[test]
fn a_denial_reason_reaches_the_model_as_a_sentence() {
    let told = |reason: Option<&str>| super::denial(reason, false);
    assert_eq!(
        told(Some("do not delete files")),
        "The human denied this command; it did not run. Their reason: do not delete \
         files.\nAdjust your approach."
    );
    // Already a sentence: left as written.
    for reason in ["Stop.", "why?", "no!", "\"not that.\"", "wait…"] {
        assert_eq!(
            told(Some(reason)),
            format!(
                "The human denied this command; it did not run. Their reason: \
                 {reason}\nAdjust your approach."
            )
        );
    }
    // Blank is no reason at all.
    assert_eq!(told(Some("  ")), told(None));
}
