//! What each run of the fleet benchmark does: the scripted agent's files (an agent that
//! only answers, or one that makes one bash call first) and what its log must hold.

use toren_protocol::{Event, EventKind};

/// What each run does.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Workload {
    /// The scripted model answers at once; no sandbox, no tool.
    NoTool,
    /// One bash call in the local sandbox (`approval: never`), then the answer.
    OneBash,
}

pub(crate) const AGENT: &str = "fleet";
const ANSWER: &str = "fleet done";

impl Workload {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Self::NoTool => "no-tool",
            Self::OneBash => "one-bash",
        }
    }

    pub(crate) fn sandbox(self) -> &'static str {
        match self {
            Self::NoTool => "none",
            Self::OneBash => "local",
        }
    }

    pub(crate) fn files(self) -> Vec<(String, String)> {
        let (script, sandbox) = match self {
            Self::NoTool => (format!("turns:\n  - text: \"{ANSWER}\"\n"), ""),
            Self::OneBash => (
                format!(
                    "turns:\n  - tool_calls:\n      - bash: {{command: \"echo fleet-ok\"}}\n  - text: \"{ANSWER}\"\n"
                ),
                "sandbox:\n  approval: never\n",
            ),
        };
        vec![
            (format!("{AGENT}.script.yaml"), script),
            (
                format!("{AGENT}.yaml"),
                format!("name: {AGENT}\nmodel: scripted/{AGENT}.script.yaml\n{sandbox}"),
            ),
        ]
    }

    /// What is wrong with a run's log (empty: nothing).
    pub(crate) fn problems(self, run: &str, events: &[Event]) -> Vec<String> {
        let mut problems = Vec::new();
        let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
        if seqs != (1..=events.len() as u64).collect::<Vec<_>>() {
            problems.push(format!("{run}: seqs {seqs:?} are not 1..={}", events.len()));
        }
        match events.last().map(|e| &e.kind) {
            Some(EventKind::RunCompleted(c)) if c.output == ANSWER => {}
            other => problems.push(format!("{run}: ends with {other:?}, not the answer")),
        }
        let calls: Vec<&str> = events
            .iter()
            .filter_map(|e| match &e.kind {
                EventKind::ToolCompleted(t) => Some(t.output.as_str()),
                _ => None,
            })
            .collect();
        let ok = match self {
            Self::NoTool => calls.is_empty(),
            Self::OneBash => calls.len() == 1 && calls[0].starts_with("fleet-ok"),
        };
        if !ok {
            problems.push(format!("{run}: tool results {calls:?}"));
        }
        problems
    }
}
