//! Toren's vocabulary, shared by every other crate.
//!
//! This crate names things and nothing more: run ids, the versioned event format that the
//! event log stores ([`Event`], [`EventKind`]), the pinned agent spec and resolved sandbox
//! policy, the provider-neutral conversation ([`Message`], [`AssistantMessage`],
//! [`ToolCall`]) and run statuses. It performs no I/O and depends on no other Toren crate.

mod agent;
mod event;
mod ids;
mod message;
mod status;

pub use agent::{AgentSpec, ApprovalPolicy, ResolvedPolicy, ResourceLimits, SandboxSpec};
pub use event::{
    ApprovalDecided, ApprovalRequested, EVENT_FORMAT_VERSION, Event, EventKind, ModelResponded,
    RunCancelled, RunCompleted, RunCreated, RunFailed, SandboxProvisioned, ToolCompleted,
    ToolStarted,
};
pub use ids::{InvalidRunId, RunId};
pub use message::{AssistantMessage, Message, ToolCall, ToolResult, ToolSpec, Usage};
pub use status::{RunStatus, UnknownStatus};
