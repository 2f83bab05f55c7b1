//! What the metrics remember of the runs this process drives, and what each committed
//! event means for them: a tool call that ended (its tool, its [`Outcome`], how long it
//! ran if this process saw it start), a sandbox opened or closed. Pure: the caller gives
//! the monotonic time of each event and applies what comes back to the registry
//! (`metrics.rs`).
//!
//! A call's outcome comes from its events: it ran (`tool_started` seen) and
//! `tool_completed.is_error` says ok or error; a person denied it (`approval_decided`
//! with `approved: false`, or a call asked about that ended without starting — the state
//! machine refuses a call before asking, never after — which also covers a decision
//! recorded while no worker watched); otherwise the state machine refused it.

use std::collections::HashMap;
use std::time::{Duration, Instant};

use toren_protocol::{Event, EventKind, RunId};

/// The tool label of a call this process did not see requested or started.
const UNKNOWN_TOOL: &str = "unknown";
/// The tool label of a name that is none of the toolkit's.
const OTHER_TOOL: &str = "other";

/// How a tool call ended.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum Outcome {
    /// It ran and succeeded.
    Ok,
    /// It ran and failed (a non-zero exit, a timeout, a bad path, …).
    Error,
    /// A person denied it; it did not run.
    Denied,
    /// It never ran: the state machine answered it (bad arguments, no sandbox, too many
    /// interrupted attempts).
    Refused,
}

impl Outcome {
    pub(super) const ALL: [Self; 4] = [Self::Ok, Self::Error, Self::Denied, Self::Refused];

    pub(super) fn as_str(self) -> &'static str {
        match self {
            Self::Ok => "ok",
            Self::Error => "error",
            Self::Denied => "denied",
            Self::Refused => "refused",
        }
    }
}

/// What one event changes in the metrics.
#[derive(Clone, Debug, PartialEq)]
pub(super) enum Observed {
    ToolEnded {
        tool: &'static str,
        outcome: Outcome,
        /// From `tool_started` to `tool_completed`, when this process saw both.
        took: Option<Duration>,
    },
    SandboxOpened(String),
    SandboxClosed(String),
}

/// The runs this process saw events of, each until it ends or has nothing open.
#[derive(Default)]
pub(super) struct Runs(HashMap<RunId, Run>);

/// One run's calls in flight and its open sandbox.
#[derive(Default)]
struct Run {
    calls: HashMap<String, Call>,
    /// The backend of the sandbox this process saw provisioned, until the run ends.
    sandbox: Option<String>,
}

struct Call {
    tool: &'static str,
    /// When this process saw the latest attempt's `tool_started`.
    started: Option<Instant>,
    /// A person was asked about the latest attempt.
    asked: bool,
    denied: bool,
}

impl Call {
    fn named(name: &str) -> Self {
        Self {
            tool: tool_label(name),
            started: None,
            asked: false,
            denied: false,
        }
    }

    /// A call this process did not see asked for.
    fn unseen() -> Self {
        Self {
            tool: UNKNOWN_TOOL,
            started: None,
            asked: false,
            denied: false,
        }
    }

    fn ended(self, is_error: bool, now: Instant) -> Observed {
        let (outcome, took) = match self.started {
            _ if self.denied => (Outcome::Denied, None),
            Some(started) if is_error => (Outcome::Error, Some(now - started)),
            Some(started) => (Outcome::Ok, Some(now - started)),
            None if self.asked => (Outcome::Denied, None),
            None => (Outcome::Refused, None),
        };
        Observed::ToolEnded {
            tool: self.tool,
            outcome,
            took,
        }
    }
}

/// The label of a tool name: the toolkit's own name, or [`OTHER_TOOL`].
pub(super) fn tool_label(name: &str) -> &'static str {
    toren_tools::TOOL_NAMES
        .iter()
        .find(|known| **known == name)
        .copied()
        .unwrap_or(OTHER_TOOL)
}

impl Runs {
    /// Folds `event`, committed at `now`, and says what it changes.
    pub(super) fn event(&mut self, event: &Event, now: Instant) -> Vec<Observed> {
        let run = self.0.entry(event.run_id.clone()).or_default();
        let observed = run.event(&event.kind, now);
        // Nothing left open: forget the run (one stopped mid-way keeps only what it has
        // open, until it ends).
        if run.calls.is_empty() && run.sandbox.is_none() {
            self.0.remove(&event.run_id);
        }
        observed
    }
}

impl Run {
    fn event(&mut self, kind: &EventKind, now: Instant) -> Vec<Observed> {
        match kind {
            EventKind::ModelResponded(answer) => {
                for call in &answer.message.tool_calls {
                    self.calls.insert(call.id.clone(), Call::named(&call.name));
                }
            }
            EventKind::ApprovalRequested(request) => {
                let call = self
                    .calls
                    .entry(request.call_id.clone())
                    .or_insert_with(|| Call::named(&request.tool));
                // A new attempt: not started, and nobody has answered yet.
                call.started = None;
                call.asked = true;
                call.denied = false;
            }
            EventKind::ApprovalDecided(decided) if !decided.approved => {
                let call = self
                    .calls
                    .entry(decided.call_id.clone())
                    .or_insert_with(Call::unseen);
                call.denied = true;
            }
            EventKind::ToolStarted(started) => {
                let call = self
                    .calls
                    .entry(started.call_id.clone())
                    .or_insert_with(|| Call::named(&started.tool));
                call.tool = tool_label(&started.tool);
                call.started = Some(now);
                call.denied = false;
            }
            EventKind::ToolCompleted(result) => {
                let ended = match self.calls.remove(&result.call_id) {
                    Some(call) => call.ended(result.is_error, now),
                    None => Call::unseen().ended(result.is_error, now),
                };
                return vec![ended];
            }
            EventKind::SandboxProvisioned(provisioned) => {
                // A new instance on the same backend (a container recreated) is still one.
                if self.sandbox.as_deref() != Some(provisioned.backend.as_str()) {
                    let mut observed: Vec<Observed> = self
                        .sandbox
                        .replace(provisioned.backend.clone())
                        .map(Observed::SandboxClosed)
                        .into_iter()
                        .collect();
                    observed.push(Observed::SandboxOpened(provisioned.backend.clone()));
                    return observed;
                }
            }
            EventKind::RunCompleted(_) | EventKind::RunFailed(_) | EventKind::RunCancelled(_) => {
                self.calls.clear();
                return self
                    .sandbox
                    .take()
                    .map(Observed::SandboxClosed)
                    .into_iter()
                    .collect();
            }
            EventKind::RunCreated(_)
            | EventKind::ApprovalDecided(_)
            | EventKind::ContextCompacted(_)
            | EventKind::Rewound(_)
            | EventKind::MessageDelivered(_)
            | EventKind::BudgetReached(_)
            | EventKind::BudgetRaised(_)
            | EventKind::HostApprovalRequested(_)
            | EventKind::EgressConnections(_) => {}
        }
        Vec::new()
    }
}

#[cfg(test)]
mod tests {
    use toren_protocol::{RunCompleted, SandboxProvisioned};

    use super::*;

    fn event(run: &RunId, kind: EventKind) -> Event {
        Event {
            run_id: run.clone(),
            seq: 2,
            at: jiff::Timestamp::UNIX_EPOCH,
            v: 1,
            kind,
        }
    }

    fn provisioned(backend: &str, instance: &str) -> EventKind {
        EventKind::SandboxProvisioned(SandboxProvisioned {
            backend: backend.to_owned(),
            instance: instance.to_owned(),
            workspace: "/srv/ws".to_owned(),
            envd_version: None,
            origin: None,
        })
    }

    #[test]
    fn a_run_holds_one_sandbox_until_it_ends() {
        let (mut runs, now, run) = (Runs::default(), Instant::now(), RunId::new());
        let mut see = |kind| runs.event(&event(&run, kind), now);
        assert_eq!(
            see(provisioned("docker", "c1")),
            vec![Observed::SandboxOpened("docker".into())]
        );
        assert_eq!(
            see(provisioned("docker", "c2")),
            vec![],
            "a recreated container replaces the first"
        );
        assert_eq!(
            see(provisioned("local", "/srv/ws")),
            vec![
                Observed::SandboxClosed("docker".into()),
                Observed::SandboxOpened("local".into())
            ]
        );
        let end = EventKind::RunCompleted(RunCompleted {
            output: "done".into(),
        });
        assert_eq!(
            see(end.clone()),
            vec![Observed::SandboxClosed("local".into())]
        );
        assert_eq!(see(end), vec![], "closed once");
        assert!(runs.0.is_empty(), "an ended run is forgotten");
    }
}
