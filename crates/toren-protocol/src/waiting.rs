//! What a run waiting for approval still waits on, so that its status stays true when one
//! of several requests is decided. A run can wait on more than one request at once: two
//! hosts a running command reached, or a host its killed command reached and the approval
//! of the re-run (`on_interrupt: ask`). A decision makes the run `running` (claimable)
//! only once nothing else of the current wait is open; until then it stays
//! `awaiting_approval`, so no worker claims a run that would only park again.
//!
//! The fold ([`Waiting::status_after`]) is shared by the stores, which keep the status
//! column, and the agent's state machine, which folds the whole log: both must agree.

use std::collections::BTreeSet;

use crate::{EventKind, RunStatus};

/// The requests of the run's current wait that no decision has answered yet: those made
/// since the run last did anything else (any event but a request, a decision or a
/// connection record ends a wait, so a host request whose connection gave up before the
/// command finished does not hold the run later). A tool call's approval request starts a
/// new wait of its own: host requests before it came from an attempt that is over.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Waiting {
    open: BTreeSet<String>,
}

impl Waiting {
    /// The event kinds (by [`EventKind::name`]) that do not end a wait: requests,
    /// decisions and connection records. Stores find where the current wait began as
    /// the last event of any other kind.
    pub const KINDS: [&'static str; 4] = [
        "approval_requested",
        "host_approval_requested",
        "approval_decided",
        "egress_connections",
    ];

    /// Folds the next event of the run and returns the run's status after it, given its
    /// status `before`. A decision leaves a run `awaiting_approval` while another request
    /// of the wait is open, makes it `running` when none is, and leaves any other status
    /// alone (a decision on a request of an earlier wait changes nothing: a run awaiting
    /// its budget stays so). Every other event moves the status as
    /// [`EventKind::status_after`] says.
    pub fn status_after(&mut self, kind: &EventKind, before: RunStatus) -> RunStatus {
        match kind {
            EventKind::ApprovalRequested(request) => {
                self.open.clear();
                self.open.insert(request.call_id.clone());
            }
            EventKind::HostApprovalRequested(request) => {
                self.open.insert(request.id.clone());
            }
            EventKind::ApprovalDecided(decision) => {
                self.open.remove(&decision.call_id);
                return match before {
                    RunStatus::AwaitingApproval if self.open.is_empty() => RunStatus::Running,
                    other => other,
                };
            }
            other if Self::KINDS.contains(&other.name()) => {}
            _ => self.open.clear(),
        }
        kind.status_after().unwrap_or(before)
    }

    /// Folds an event of the current wait (see [`Self::KINDS`]) without a status.
    pub fn fold(&mut self, kind: &EventKind) {
        self.status_after(kind, RunStatus::Running);
    }

    /// Whether no request of the current wait is open.
    pub fn is_empty(&self) -> bool {
        self.open.is_empty()
    }

    /// The ids (a call's, or `host:<name>`) of the open requests, in order.
    pub fn open(&self) -> impl Iterator<Item = &str> {
        self.open.iter().map(String::as_str)
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;
    use crate::{
        ApprovalDecided, ApprovalRequested, EgressConnections, HostApprovalRequested, ToolCompleted,
    };

    fn asked(call: &str) -> EventKind {
        EventKind::ApprovalRequested(ApprovalRequested {
            call_id: call.into(),
            tool: "bash".into(),
            command: "make".into(),
            attempt: 2,
        })
    }

    fn host(name: &str) -> EventKind {
        EventKind::HostApprovalRequested(HostApprovalRequested::new(name, 443, None))
    }

    fn decided(id: &str) -> EventKind {
        EventKind::ApprovalDecided(ApprovalDecided {
            call_id: id.into(),
            approved: true,
            by: "ana".into(),
            via: "api".into(),
            reason: None,
        })
    }

    /// The statuses after each of `kinds`, from `running`.
    fn statuses(kinds: &[EventKind]) -> Vec<RunStatus> {
        let mut waiting = Waiting::default();
        let mut status = RunStatus::Running;
        kinds
            .iter()
            .map(|kind| {
                status = waiting.status_after(kind, status);
                status
            })
            .collect()
    }

    use RunStatus::{AwaitingApproval as Waits, Running};

    #[test]
    fn a_decision_frees_the_run_only_when_nothing_else_is_open() {
        // Two hosts of one command; decided in either order.
        let records = EventKind::EgressConnections(EgressConnections {
            connections: Vec::new(),
        });
        assert_eq!(
            statuses(&[
                host("a.org"),
                host("b.org"),
                decided("host:b.org"),
                records,
                decided("host:a.org"),
            ]),
            [Waits, Waits, Waits, Waits, Running]
        );
        // A host the killed attempt reached, then the re-run's approval: the host's
        // decision leaves the run waiting on the call; the call's frees it (the host's
        // request belongs to an attempt that is over).
        assert_eq!(
            statuses(&[
                host("a.org"),
                asked("c1"),
                decided("host:a.org"),
                decided("c1")
            ]),
            [Waits, Waits, Waits, Running]
        );
        assert_eq!(
            statuses(&[host("a.org"), asked("c1"), decided("c1")]),
            [Waits, Waits, Running]
        );
    }

    #[test]
    fn a_request_of_an_earlier_wait_holds_nothing() {
        // A host asked about while c1 ran, never answered; c1 finished; c2 waits for its
        // approval. The late host decision keeps the run waiting on c2, c2's frees it.
        let tool_completed = EventKind::ToolCompleted(ToolCompleted {
            call_id: "c1".into(),
            output: String::new(),
            is_error: false,
            exit_code: Some(0),
            truncated: false,
        });
        assert_eq!(
            statuses(&[
                host("a.org"),
                tool_completed.clone(),
                asked("c2"),
                decided("host:a.org"),
                decided("c2"),
            ]),
            [Waits, Running, Waits, Waits, Running]
        );
        // Decided while the run waits for its budget (or simply runs): unchanged.
        let mut waiting = Waiting::default();
        waiting.fold(&host("a.org"));
        waiting.fold(&tool_completed);
        assert!(waiting.is_empty());
        assert_eq!(
            waiting.status_after(&decided("host:a.org"), RunStatus::AwaitingBudget),
            RunStatus::AwaitingBudget
        );
        assert_eq!(
            waiting.status_after(&decided("host:a.org"), Running),
            Running
        );
    }
}
