//! Scripted agents: model turns (text and `{tool: arguments}` calls) written as a
//! `turns:` script (JSON, which is YAML) for `toren_model::scripted`, and sandbox specs.

use serde_json::{Value, json};
use toren_protocol::{ApprovalPolicy, SandboxSpec};

/// One scripted model turn: text and tool calls (`{tool: arguments}` each).
#[derive(Clone, Debug, Default)]
pub(crate) struct Turn {
    text: Option<String>,
    calls: Vec<Value>,
}

/// A turn that says `text` (the final answer when it has no calls).
pub(crate) fn say(text: &str) -> Turn {
    Turn {
        text: Some(text.to_owned()),
        ..Turn::default()
    }
}

/// A turn that makes `calls`.
pub(crate) fn calls(calls: Vec<Value>) -> Turn {
    Turn {
        calls,
        ..Turn::default()
    }
}

impl Turn {
    /// The same turn, saying `text` besides its calls.
    pub(crate) fn saying(self, text: &str) -> Self {
        Self {
            text: Some(text.to_owned()),
            ..self
        }
    }
}

/// A `bash` call.
pub(crate) fn bash(command: &str) -> Value {
    json!({ "bash": { "command": command } })
}

/// A call of `tool` with `args`.
pub(crate) fn tool(name: &str, args: Value) -> Value {
    json!({ name: args })
}

/// The script file of `turns`, as JSON (which is YAML).
pub(crate) fn script(turns: &[Turn]) -> String {
    let turns: Vec<Value> = turns
        .iter()
        .map(|t| json!({ "text": t.text, "tool_calls": t.calls }))
        .collect();
    serde_json::to_string_pretty(&json!({ "turns": turns })).unwrap()
}

/// A sandbox with `approval` and everything else at its default.
pub(crate) fn sandbox(approval: ApprovalPolicy) -> SandboxSpec {
    SandboxSpec {
        checkpoints: Default::default(),
        image: None,
        network: false,
        egress: None,
        approval,
        env: Vec::new(),
        limits: Default::default(),
        on_interrupt: Default::default(),
    }
}
