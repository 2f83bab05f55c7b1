//! Toren's vocabulary, shared by every other crate.
//!
//! This crate names things and nothing more: run ids, the versioned event format that the
//! event log stores ([`Event`], [`EventKind`]), the pinned agent spec and resolved sandbox
//! policy, the provider-neutral conversation ([`Message`], [`AssistantMessage`],
//! [`ToolCall`]), the decoding of tool arguments shared by the tools and the approval
//! prompt, and run statuses. It performs no I/O and depends on no other Toren crate.

mod agent;
mod budget;
mod egress_events;
mod event;
mod ids;
mod message;
mod models;
mod network;
mod origin;
mod rewind;
mod secrets;
mod status;
mod tool_args;
mod waiting;

pub use agent::CheckpointPolicy;
pub use agent::{
    AgentSpec, ApprovalPolicy, OnInterrupt, ResolvedPolicy, ResourceLimits, SandboxSpec,
};
pub use budget::{
    Budget, BudgetLimit, BudgetLimits, BudgetRaised, BudgetReached, Pricing, Spending, Usd,
};
pub use egress_events::{
    ConnectionOutcome, EgressConnection, EgressConnections, HOST_APPROVAL_PREFIX,
    HostApprovalRequested, NETWORK_SUBJECT, host_approval_id, is_host_approval_id,
};
pub use event::{
    ApprovalDecided, ApprovalRequested, EVENT_FORMAT_VERSION, Event, EventKind, ModelResponded,
    RunCancelled, RunCompleted, RunCreated, RunFailed, SandboxProvisioned, SessionTurn,
    ToolCompleted, ToolStarted,
};
pub use event::{ChannelBinding, MessageDelivered};
pub use event::{ContextCompacted, MessageRange, SizeRefusal};
pub use ids::{InvalidRunId, RunId};
pub use message::{AssistantMessage, Message, ToolCall, ToolResult, ToolSpec, Usage, wire_ids};
pub use models::{DEFAULT_CONTEXT_TOKENS, context_window, known_context_window, known_pricing};
pub use network::{EgressPolicy, HostPattern, HostVerdict};
pub use origin::{NotRestored, SandboxOrigin};
pub use rewind::{Forked, Rewound, TurnStart, WorkspaceSeed};
pub use secrets::{SECRET_PLACEHOLDER, SecretRule};
pub use status::{RunStatus, UnknownStatus};
pub use tool_args::{BASH, BASH_USAGE, BashArgs, decode_args};
pub use waiting::Waiting;
