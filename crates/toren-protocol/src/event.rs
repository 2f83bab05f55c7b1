//! The event format: what the event log stores, one [`Event`] per fact, ordered per run.
//!
//! The format is versioned ([`EVENT_FORMAT_VERSION`]) and append-only in code: a kind or a
//! field is never removed or repurposed; a new field gets a serde default so old events
//! still decode (the corpus in `tests/corpus` proves it). Each kind says since which
//! format version it exists.

use jiff::Timestamp;
use serde::{Deserialize, Serialize};

use crate::Rewound;
use crate::{
    AgentSpec, AssistantMessage, BudgetRaised, BudgetReached, ResolvedPolicy, RunId, RunStatus,
    Usage,
};
use crate::{EgressConnections, HostApprovalRequested};

/// The version written into every new event.
pub const EVENT_FORMAT_VERSION: u32 = 1;

fn format_v1() -> u32 {
    1
}

/// One recorded fact about a run.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Event {
    pub run_id: RunId,
    /// 1-based, gap-free position in the run's log.
    pub seq: u64,
    pub at: Timestamp,
    /// The format version the event was written with.
    #[serde(default = "format_v1")]
    pub v: u32,
    #[serde(flatten)]
    pub kind: EventKind,
}

/// What happened. Serialized with a `type` tag in snake_case.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "type", rename_all = "snake_case")]
#[expect(
    clippy::large_enum_variant,
    reason = "run_created, with the pinned spec and policy, is one event per run; boxing it would change every match for no gain"
)]
pub enum EventKind {
    /// Since v1. Always the first event of a run.
    RunCreated(RunCreated),
    /// Since v1. One model call's final answer.
    ModelResponded(ModelResponded),
    /// Since v1. A bash call waits for a human.
    ApprovalRequested(ApprovalRequested),
    /// Since v1. The human's decision; the first decision for a call wins.
    ApprovalDecided(ApprovalDecided),
    /// Since v1. Durable before the tool's side effect starts.
    ToolStarted(ToolStarted),
    /// Since v1. The tool's result, as the model will see it.
    ToolCompleted(ToolCompleted),
    /// Since v1. A sandbox instance was set up for the run.
    SandboxProvisioned(SandboxProvisioned),
    /// Since v1.
    RunCompleted(RunCompleted),
    /// Since v1.
    RunFailed(RunFailed),
    /// Since v1.
    RunCancelled(RunCancelled),
    /// Since v1. Before a model call: from now on the conversation sent to the model
    /// shortens or leaves out what this names, so that it fits the model's context window.
    ContextCompacted(ContextCompacted),
    /// Since v1 (added later; older logs have none). A file the agent sent reached the
    /// person through the run's channel; journaled with the call's `tool_completed`.
    MessageDelivered(MessageDelivered),
    /// Since v1 (added later). A limit of the run's budget was reached before a model
    /// call: the run waits (`awaiting_budget`) until someone raises it.
    BudgetReached(BudgetReached),
    /// Since v1 (added later). Someone raised the budget of a run that waited for it; any
    /// worker may pick it up again.
    BudgetRaised(BudgetRaised),
    /// Since v1 (added later; older logs have none). The sandbox tried to reach a host
    /// outside its list and a person is asked; answered by an `approval_decided` naming
    /// the request's id. Comes while a tool call runs.
    HostApprovalRequested(HostApprovalRequested),
    /// Since v1 (added later; older logs have none). Connections the egress proxy judged
    /// since the previous such event.
    EgressConnections(EgressConnections),
    /// Since v1 (added later; older logs have none). The run goes back to an earlier
    /// step, workspace and conversation together; the events in between stay.
    Rewound(Rewound),
}

impl EventKind {
    /// The `type` tag of this kind, as stored.
    pub fn name(&self) -> &'static str {
        match self {
            Self::RunCreated(_) => "run_created",
            Self::ModelResponded(_) => "model_responded",
            Self::ApprovalRequested(_) => "approval_requested",
            Self::ApprovalDecided(_) => "approval_decided",
            Self::ToolStarted(_) => "tool_started",
            Self::ToolCompleted(_) => "tool_completed",
            Self::SandboxProvisioned(_) => "sandbox_provisioned",
            Self::RunCompleted(_) => "run_completed",
            Self::RunFailed(_) => "run_failed",
            Self::RunCancelled(_) => "run_cancelled",
            Self::ContextCompacted(_) => "context_compacted",
            Self::MessageDelivered(_) => "message_delivered",
            Self::HostApprovalRequested(_) => "host_approval_requested",
            Self::EgressConnections(_) => "egress_connections",
            Self::BudgetReached(_) => "budget_reached",
            Self::BudgetRaised(_) => "budget_raised",
            Self::Rewound(_) => "rewound",
        }
    }

    /// The run status after this event, or `None` if the event leaves it unchanged. A
    /// decision's is the status when it answers the run's only open request; with more
    /// than one open, [`Waiting::status_after`](crate::Waiting::status_after) is the rule
    /// (stores and the fold use it).
    pub fn status_after(&self) -> Option<RunStatus> {
        match self {
            // Created, nothing done yet: it waits for a worker.
            Self::RunCreated(_) => Some(RunStatus::Queued),
            // A host request too: the command that connected is held until a person
            // answers (the driver keeps its lease; the last open request's decision makes
            // the run `running`).
            Self::ApprovalRequested(_) | Self::HostApprovalRequested(_) => {
                Some(RunStatus::AwaitingApproval)
            }
            Self::RunCompleted(_) => Some(RunStatus::Completed),
            Self::RunFailed(_) => Some(RunStatus::Failed),
            Self::RunCancelled(_) => Some(RunStatus::Cancelled),
            Self::BudgetReached(_) => Some(RunStatus::AwaitingBudget),
            // Raised: claimable again, like a decided approval.
            Self::BudgetRaised(_) => Some(RunStatus::Running),
            // A worker did something: the run runs (these never come while it awaits a
            // decision, and nothing comes after its end).
            Self::ApprovalDecided(_)
            | Self::ModelResponded(_)
            | Self::ToolStarted(_)
            | Self::ToolCompleted(_)
            | Self::SandboxProvisioned(_)
            | Self::ContextCompacted(_)
            | Self::MessageDelivered(_) => Some(RunStatus::Running),
            // Back at an earlier step: claimable, like a raised budget; what it waits for
            // next (a model call, a decision) the state machine decides from the fold.
            Self::Rewound(_) => Some(RunStatus::Running),
            // A record of what happened, journaled beside whatever the run is doing.
            Self::EgressConnections(_) => None,
        }
    }
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct RunCreated {
    /// The agent spec, pinned: a resumed run uses this, never today's file.
    pub agent: AgentSpec,
    /// The sandbox policy, resolved and pinned; `None` for an agent without a sandbox.
    #[serde(default)]
    pub policy: Option<ResolvedPolicy>,
    /// The person's input that started the run.
    pub input: String,
    /// The session this run is a turn of; its conversation so far comes before `input`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionTurn>,
    /// The channel files the agent sends reach the person through; `None` (`toren run`):
    /// `send_to_channel` tells the agent there is no chat to send to.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub channel: Option<ChannelBinding>,
    /// How a session's turn began (see [`TurnStart`]); `None` for a run that is no turn,
    /// and for turns recorded before turns were checkpointed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start: Option<crate::TurnStart>,
}

/// A run that is one turn of a session.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SessionTurn {
    /// The session's id (`ses_…`).
    pub id: String,
    /// The session's name, as people call it.
    pub name: String,
    /// The turn's number in the session, from 1.
    pub turn: u32,
}

/// The channel a run is bound to: where files the agent sends reach the person
/// (`send_to_channel`). `toren run` binds none; a chat session binds its turns to the
/// terminal.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ChannelBinding {
    /// The channel's kind, as channels name themselves: `terminal`, later `telegram`.
    pub kind: String,
    /// Where on that channel, in its own terms: for the terminal, the name of the
    /// downloads subdirectory (a session's name; empty: the run's id); for Telegram, a chat.
    #[serde(default)]
    pub address: String,
}

#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ModelResponded {
    pub message: AssistantMessage,
    /// The provider's stop reason, as sent (`end_turn`, `tool_use`, `stop`, …).
    #[serde(default)]
    pub stop_reason: String,
    #[serde(default)]
    pub usage: Usage,
    /// The model that answered, as the provider named it.
    #[serde(default)]
    pub model: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalRequested {
    pub call_id: String,
    pub tool: String,
    /// The exact command the human is asked to approve.
    pub command: String,
    /// The attempt of the call this approves: 1 for a new call; more when a call that was
    /// interrupted mid-command asks before it runs again (`on_interrupt: ask`).
    #[serde(default = "first_attempt", skip_serializing_if = "is_first_attempt")]
    pub attempt: u32,
}

fn first_attempt() -> u32 {
    1
}

fn is_first_attempt(attempt: &u32) -> bool {
    *attempt == 1
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ApprovalDecided {
    /// The call decided on, or a host approval's id (`host:<name>`).
    pub call_id: String,
    pub approved: bool,
    /// Who decided (a user name).
    pub by: String,
    /// Where the decision was made (`terminal`, `cli`, …).
    pub via: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolStarted {
    pub call_id: String,
    pub tool: String,
    /// 1 for the first execution; higher when an interrupted call is re-run.
    #[serde(default = "format_v1")]
    pub attempt: u32,
    /// The workspace checkpoint taken just before this call could change the workspace
    /// (`toren-checkpoint`'s id, in the store beside the run's workspace). Recorded by the
    /// worker in the same append as the start, so the call and the state before it are
    /// one durable fact; absent in logs from before checkpoints and when they are off.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ToolCompleted {
    pub call_id: String,
    /// The result text the model sees.
    pub output: String,
    /// Whether the result is an error (bad arguments, denial, failed command, …).
    #[serde(default)]
    pub is_error: bool,
    /// For `bash`: the command's exit code; `None` if killed or not a command.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit_code: Option<i32>,
    /// Whether output was cut to fit the cap.
    #[serde(default)]
    pub truncated: bool,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxProvisioned {
    pub backend: String,
    /// The backend's id for the instance (a container id, a sandbox id, or the workspace).
    pub instance: String,
    /// The workspace directory on the host.
    pub workspace: String,
    /// The version of the in-sandbox daemon the backend drives, when it has one: E2B's
    /// `envdVersion`. Absent for local and docker, and in events written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub envd_version: Option<String>,
    /// How this instance came to be when it is not simply a new one: reconnected to the
    /// recorded instance by a resuming worker, or made to replace a lost one (with what was
    /// restored). Absent for a new instance, and in events written before it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub origin: Option<crate::SandboxOrigin>,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCompleted {
    /// The agent's final answer.
    pub output: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunFailed {
    pub error: String,
}

#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct RunCancelled {
    #[serde(default)]
    pub reason: String,
    /// Who cancelled it (a user name), when a person did; since v1, absent in older events.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Through which front door (`cli`, `api`, …), when a person did.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub via: Option<String>,
}

/// What a compaction changes in the conversation sent to the model, on top of the earlier
/// ones. The request is a pure function of the log: the conversation folded from it, with
/// every recorded compaction applied (`toren-agent`'s `context` module), so a resumed run
/// sends exactly the bytes it sent before.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ContextCompacted {
    /// Tool calls whose outputs are replaced by a stub naming the call and the output's size.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub stubbed: Vec<String>,
    /// Stretches of the conversation left out, each replaced by a note listing the tool
    /// calls it held.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dropped: Vec<MessageRange>,
    /// The context window, in tokens, the compaction made room in.
    #[serde(default)]
    pub context_tokens: u32,
    /// Toren's estimate of the request's input tokens before the compaction.
    #[serde(default)]
    pub estimated_before: u64,
    /// … and after it.
    #[serde(default)]
    pub estimated_after: u64,
    /// Why, when it was not Toren's estimate but the provider refusing the request as too
    /// large: what it said. Later requests are estimated with what it taught.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub refused: Option<SizeRefusal>,
}

/// A provider's refusal of a request too large for the model's window (Anthropic
/// `prompt is too long: N tokens > M maximum`, OpenAI `context_length_exceeded`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SizeRefusal {
    /// The request's input tokens by the provider's count, when it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_tokens: Option<u64>,
    /// The model's window by the provider, when it said.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub limit_tokens: Option<u64>,
    /// The provider's message, as sent.
    #[serde(default)]
    pub message: String,
}

/// Positions in the conversation a run sends to its model (0 is the first message; for a
/// session's turn, the session's first), from `start` up to but not including `end`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageRange {
    pub start: u64,
    pub end: u64,
}

/// A file sent with `send_to_channel` that reached the person.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct MessageDelivered {
    /// The `send_to_channel` call that sent it.
    pub call_id: String,
    /// The channel's kind (`terminal`, `telegram`).
    pub channel: String,
    /// The file's path in the workspace, as the agent gave it.
    pub path: String,
    /// Its size in bytes.
    pub bytes: u64,
    /// The SHA-256 of what was delivered, in lowercase hex.
    pub sha256: String,
    /// `image` (shown as a picture: PNG, JPEG, GIF, WebP by content) or `document`.
    pub kind: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub caption: Option<String>,
    /// What the person got, as the channel said: the path on disk (terminal), a message id
    /// (Telegram).
    pub receipt: String,
    /// The channel had already delivered this call (it ran again after an interruption)
    /// and did not deliver it twice; `receipt` is the first delivery's.
    #[serde(default, skip_serializing_if = "is_false")]
    pub repeated: bool,
}

fn is_false(value: &bool) -> bool {
    !*value
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sandbox_provisioned_envd_version_is_optional_both_ways() {
        // An event written before the field still folds; one without it writes no key.
        let old = r#"{"backend":"docker","instance":"c1","workspace":"/w"}"#;
        let folded: SandboxProvisioned = serde_json::from_str(old).unwrap();
        assert_eq!(folded.envd_version, None);
        assert_eq!(serde_json::to_string(&folded).unwrap(), old);

        let e2b = SandboxProvisioned {
            envd_version: Some("0.6.13".into()),
            ..folded
        };
        let written = serde_json::to_value(&e2b).unwrap();
        assert_eq!(written["envd_version"], "0.6.13");
        assert_eq!(
            serde_json::from_value::<SandboxProvisioned>(written).unwrap(),
            e2b
        );
    }
}
