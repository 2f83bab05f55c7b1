//! Realistic events for the conformance checks, and the one helper that turns a store
//! error into a test failure with a message.

use std::time::Duration;

use toren_protocol::{
    AgentSpec, ApprovalDecided, ApprovalPolicy, ApprovalRequested, AssistantMessage, Event,
    EventKind, ModelResponded, ResolvedPolicy, RunCancelled, RunCompleted, RunCreated, RunFailed,
    RunId, SandboxSpec, ToolCall, ToolCompleted, ToolStarted, Usage,
};

use crate::{EventLog, Lease, Result};

/// The agent name every conformance run is created with.
pub(super) const AGENT: &str = "conformance-agent";

/// The holder that creates every conformance run (and so holds its first lease).
pub(super) const HOLDER: &str = "conformance-host:1001";

/// The lease ttl of the checks: far longer than any check takes, so a lease expires only
/// when a check moves the [`TestClock`](crate::TestClock) past it.
pub(super) const TTL: Duration = Duration::from_secs(60);

/// A step of the test clock that takes it past any lease granted before it for [`TTL`].
pub(super) const PAST_TTL: Duration = Duration::from_secs(61);

/// The value of `result`, or a failure that says which step failed and why.
#[track_caller]
pub(super) fn ok<T>(result: Result<T>, step: &str) -> T {
    match result {
        Ok(value) => value,
        Err(e) => panic!("{step}: unexpected error: {e}"),
    }
}

pub(super) fn run_created(input: &str) -> RunCreated {
    RunCreated {
        agent: AgentSpec {
            budget: None,
            name: AGENT.to_owned(),
            model: "scripted/conformance".to_owned(),
            instructions: Some("You are a careful assistant with a computer.".to_owned()),
            sandbox: Some(SandboxSpec {
                checkpoints: Default::default(),
                image: None,
                network: false,
                egress: None,
                approval: ApprovalPolicy::Always,
                env: vec!["GITHUB_TOKEN".to_owned()],
                limits: Default::default(),
                on_interrupt: Default::default(),
            }),
            max_turns: AgentSpec::DEFAULT_MAX_TURNS,
            context_tokens: None,
            source: Some("/srv/agents/conformance-agent.yaml".to_owned()),
        },
        policy: Some(ResolvedPolicy {
            checkpoints: Default::default(),
            backend: "local".to_owned(),
            image: None,
            network: false,
            egress: None,
            approval: ApprovalPolicy::Always,
            env: vec!["GITHUB_TOKEN".to_owned()],
            limits: Default::default(),
            workspace: None,
            on_interrupt: Default::default(),
            sandbox_key: None,
            volume: None,
        }),
        input: input.to_owned(),
        session: None,
        channel: None,
        start: None,
    }
}

/// A model turn asking to run `command` as call `call_id`.
pub(super) fn model_wants_bash(call_id: &str, command: &str) -> EventKind {
    EventKind::ModelResponded(ModelResponded {
        message: AssistantMessage {
            text: "Let me look at the workspace.".to_owned(),
            tool_calls: vec![ToolCall {
                id: call_id.to_owned(),
                name: "bash".to_owned(),
                arguments: serde_json::json!({ "command": command, "timeout_secs": 30 }),
                wire_id: None,
            }],
        },
        stop_reason: "tool_use".to_owned(),
        usage: Usage::new(1_204, 57),
        model: "conformance-model-1".to_owned(),
    })
}

pub(super) fn approval_requested(call_id: &str) -> EventKind {
    EventKind::ApprovalRequested(ApprovalRequested {
        call_id: call_id.to_owned(),
        tool: "bash".to_owned(),
        command: "ls -la".to_owned(),
        attempt: 1,
    })
}

pub(super) fn decision(call_id: &str, approved: bool, by: &str) -> ApprovalDecided {
    ApprovalDecided {
        call_id: call_id.to_owned(),
        approved,
        by: by.to_owned(),
        via: "cli".to_owned(),
        reason: (!approved).then(|| "not in this directory".to_owned()),
    }
}

pub(super) fn tool_started(call_id: &str) -> EventKind {
    EventKind::ToolStarted(ToolStarted {
        call_id: call_id.to_owned(),
        tool: "bash".to_owned(),
        attempt: 1,
        checkpoint: None,
    })
}

pub(super) fn tool_completed(call_id: &str) -> EventKind {
    EventKind::ToolCompleted(ToolCompleted {
        call_id: call_id.to_owned(),
        output: "total 0\ndrwxr-xr-x 2 agent agent 40 .\n".to_owned(),
        is_error: false,
        exit_code: Some(0),
        truncated: false,
    })
}

pub(super) fn run_completed() -> EventKind {
    EventKind::RunCompleted(RunCompleted {
        output: "The workspace is empty.".to_owned(),
    })
}

pub(super) fn run_failed() -> EventKind {
    EventKind::RunFailed(RunFailed {
        error: "the model provider refused the request".to_owned(),
    })
}

pub(super) fn run_cancelled() -> EventKind {
    EventKind::RunCancelled(RunCancelled {
        reason: "cancelled from the CLI".to_owned(),
        by: None,
        via: None,
    })
}

/// A new run with a fresh id, its `run_created` event and [`HOLDER`]'s lease on it.
pub(super) async fn new_run(store: &dyn EventLog, input: &str) -> (RunId, Event, Lease) {
    let run_id = RunId::new();
    let (created, lease) = ok(
        store
            .create_run(&run_id, run_created(input), HOLDER, TTL)
            .await,
        "create_run",
    );
    (run_id, created, lease)
}

/// A new run of `agent` (not [`AGENT`]): checks that query by agent make their own, so
/// runs of other checks sharing the store do not count.
pub(super) async fn new_run_of(store: &dyn EventLog, agent: &str, input: &str) -> (RunId, Lease) {
    let mut created = run_created(input);
    created.agent.name = agent.to_owned();
    let run_id = RunId::new();
    let (_, lease) = ok(
        store.create_run(&run_id, created, HOLDER, TTL).await,
        "create_run",
    );
    (run_id, lease)
}

/// The call id of an event that names one, for checks that follow a tool call.
pub(super) fn call_id(kind: &EventKind) -> Option<&str> {
    match kind {
        EventKind::ApprovalRequested(e) => Some(&e.call_id),
        EventKind::ApprovalDecided(e) => Some(&e.call_id),
        EventKind::ToolStarted(e) => Some(&e.call_id),
        EventKind::ToolCompleted(e) => Some(&e.call_id),
        EventKind::MessageDelivered(e) => Some(&e.call_id),
        EventKind::RunCreated(_)
        | EventKind::ModelResponded(_)
        | EventKind::SandboxProvisioned(_)
        | EventKind::RunCompleted(_)
        | EventKind::RunFailed(_)
        | EventKind::RunCancelled(_)
        | EventKind::ContextCompacted(_)
        | EventKind::Rewound(_)
        | EventKind::BudgetReached(_)
        | EventKind::BudgetRaised(_)
        | EventKind::HostApprovalRequested(_)
        | EventKind::EgressConnections(_) => None,
    }
}
