//! A run's approvals as a front door shows them: every `approval_requested` and
//! `host_approval_requested` of its log, with the `approval_decided` that answered it, if
//! any. Read from the events alone (a pure fold, [`approvals_of`]); the rules are the
//! store's: a decision answers the latest request of its id, and a request the run ended
//! without answering, or that a rewind left behind (the run went back to a step before
//! it), or a host's request whose tool call completed first, stays unanswered. A host's
//! approval is shown like a tool call's
//! (tool `network`, its summary as the command, its id `host:<name>` as the call id), so a
//! surface that decides by call id decides it too; [`Approval::host`] says which host.

use jiff::Timestamp;
use toren_protocol::{Event, EventKind, HostApprovalRequested, RunId, RunStatus};

use crate::{Result, RunService};

/// One approval a run asked for.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Approval {
    pub call_id: String,
    pub tool: String,
    /// What the person was shown: exactly the command that runs if approved.
    pub command: String,
    /// The attempt of the call it is for (more than 1 when an interrupted call asks again).
    pub attempt: u32,
    /// The `at` of its `approval_requested`.
    pub requested_at: Timestamp,
    pub state: ApprovalState,
    /// When its subject is network access to a host (not a tool call): the request.
    pub host: Option<HostApprovalRequested>,
}

/// Where an approval stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ApprovalState {
    /// Nobody has answered and the run waits for it.
    Pending,
    /// Answered (the first decision, which stands).
    Decided(Decided),
    /// The run ended (cancelled, failed) before anyone answered, a rewind went back to a
    /// step before the request, or (a host's) the call it was made in completed; it can no
    /// longer be.
    Unanswered,
}

/// A recorded decision.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decided {
    pub approved: bool,
    pub by: String,
    pub via: String,
    pub reason: Option<String>,
    /// The `at` of its `approval_decided`.
    pub decided_at: Timestamp,
}

/// Every approval in `events` (one run's log, in order), oldest first.
pub fn approvals_of(events: &[Event]) -> Vec<Approval> {
    let mut approvals: Vec<Approval> = Vec::new();
    // The seq of each approval's request, by index.
    let mut asked: Vec<u64> = Vec::new();
    let mut ended = false;
    for event in events {
        if matches!(
            event.kind,
            EventKind::ApprovalRequested(_) | EventKind::HostApprovalRequested(_)
        ) {
            asked.push(event.seq);
        }
        match &event.kind {
            EventKind::ApprovalRequested(request) => approvals.push(Approval {
                call_id: request.call_id.clone(),
                tool: request.tool.clone(),
                command: request.command.clone(),
                attempt: request.attempt,
                requested_at: event.at,
                state: ApprovalState::Pending,
                host: None,
            }),
            EventKind::HostApprovalRequested(request) => {
                let shown = request.as_approval();
                approvals.push(Approval {
                    call_id: shown.call_id,
                    tool: shown.tool,
                    command: shown.command,
                    attempt: shown.attempt,
                    requested_at: event.at,
                    state: ApprovalState::Pending,
                    host: Some(request.clone()),
                });
            }
            EventKind::ApprovalDecided(decision) => {
                // The latest request of the call id (older logs may reuse an id).
                if let Some(approval) = approvals
                    .iter_mut()
                    .rev()
                    .find(|a| a.call_id == decision.call_id)
                    && approval.state == ApprovalState::Pending
                {
                    approval.state = ApprovalState::Decided(Decided {
                        approved: decision.approved,
                        by: decision.by.clone(),
                        via: decision.via.clone(),
                        reason: decision.reason.clone(),
                        decided_at: event.at,
                    });
                }
            }
            // Back at step `to`: what was asked after it was left behind with its call.
            EventKind::Rewound(rewound) => {
                for (approval, seq) in approvals.iter_mut().zip(&asked) {
                    if *seq > rewound.to && approval.state == ApprovalState::Pending {
                        approval.state = ApprovalState::Unanswered;
                    }
                }
            }
            // The command that asked about a host is over: its request is too (the next
            // connection to the host asks again).
            EventKind::ToolCompleted(done) => {
                for approval in &mut approvals {
                    let made_in = approval.host.as_ref().and_then(|h| h.call_id.as_deref());
                    if approval.state == ApprovalState::Pending && made_in == Some(&done.call_id) {
                        approval.state = ApprovalState::Unanswered;
                    }
                }
            }
            other => ended |= other.status_after().is_some_and(RunStatus::is_terminal),
        }
    }
    if ended {
        for approval in &mut approvals {
            if approval.state == ApprovalState::Pending {
                approval.state = ApprovalState::Unanswered;
            }
        }
    }
    approvals
}

impl RunService {
    /// Every approval `run` asked for, pending, decided or left unanswered, oldest first.
    /// An unknown run is [`toren_store::Error::RunNotFound`].
    pub async fn approvals(&self, run: &RunId) -> Result<Vec<Approval>> {
        let events = self.store().read(run, 0).await?;
        Ok(approvals_of(&events))
    }
}

#[cfg(test)]
mod tests {
    use toren_protocol::{
        ApprovalDecided, ApprovalRequested, EVENT_FORMAT_VERSION, RunCancelled, ToolStarted,
    };

    use super::*;

    fn event(seq: u64, kind: EventKind) -> Event {
        Event {
            run_id: "run_a".parse().unwrap(),
            seq,
            at: Timestamp::from_second(1_700_000_000 + seq as i64).unwrap(),
            v: EVENT_FORMAT_VERSION,
            kind,
        }
    }

    fn request(call: &str, command: &str, attempt: u32) -> EventKind {
        EventKind::ApprovalRequested(ApprovalRequested {
            call_id: call.into(),
            tool: "bash".into(),
            command: command.into(),
            attempt,
        })
    }

    fn decide(call: &str, approved: bool) -> EventKind {
        EventKind::ApprovalDecided(ApprovalDecided {
            call_id: call.into(),
            approved,
            by: "ana".into(),
            via: "api".into(),
            reason: (!approved).then(|| "not that".into()),
        })
    }

    fn at(seq: u64) -> Timestamp {
        Timestamp::from_second(1_700_000_000 + seq as i64).unwrap()
    }

    fn approval(
        call: &str,
        command: &str,
        attempt: u32,
        seq: u64,
        state: ApprovalState,
    ) -> Approval {
        Approval {
            call_id: call.into(),
            tool: "bash".into(),
            command: command.into(),
            attempt,
            requested_at: at(seq),
            state,
            host: None,
        }
    }

    fn decided(approved: bool, seq: u64) -> ApprovalState {
        ApprovalState::Decided(Decided {
            approved,
            by: "ana".into(),
            via: "api".into(),
            reason: (!approved).then(|| "not that".into()),
            decided_at: at(seq),
        })
    }

    #[test]
    fn requests_with_their_decisions_and_the_one_pending() {
        let events = vec![
            event(1, request("c1", "ls", 1)),
            event(2, decide("c1", true)),
            event(
                3,
                EventKind::ToolStarted(ToolStarted {
                    call_id: "c1".into(),
                    tool: "bash".into(),
                    attempt: 1,
                    checkpoint: None,
                }),
            ),
            event(4, request("c1", "ls", 2)),
            event(5, decide("c1", false)),
            event(6, request("c2", "rm -rf build", 1)),
        ];
        assert_eq!(
            approvals_of(&events),
            vec![
                approval("c1", "ls", 1, 1, decided(true, 2)),
                approval("c1", "ls", 2, 4, decided(false, 5)),
                approval("c2", "rm -rf build", 1, 6, ApprovalState::Pending),
            ]
        );
    }

    #[test]
    fn a_request_a_rewind_left_behind_is_no_longer_pending() {
        let rewound = |to| {
            EventKind::Rewound(toren_protocol::Rewound {
                to,
                checkpoint: None,
                by: None,
                turn: None,
            })
        };
        let events = vec![
            event(1, request("c1", "ls", 1)),
            event(2, decide("c1", true)),
            event(3, request("c2", "rm -rf build", 1)),
            event(4, rewound(2)),
            event(5, request("c2", "rm -rf build", 1)),
        ];
        assert_eq!(
            approvals_of(&events),
            vec![
                approval("c1", "ls", 1, 1, decided(true, 2)),
                approval("c2", "rm -rf build", 1, 3, ApprovalState::Unanswered),
                approval("c2", "rm -rf build", 1, 5, ApprovalState::Pending),
            ]
        );
    }

    #[test]
    fn a_host_approval_is_listed_like_a_call_with_its_host() {
        let host = toren_protocol::HostApprovalRequested::new(
            "pypi.org",
            443,
            Some(("c1".into(), "pip install x".into())),
        );
        let events = vec![
            event(1, request("c1", "pip install x", 1)),
            event(2, decide("c1", true)),
            event(3, EventKind::HostApprovalRequested(host.clone())),
            event(4, decide("host:pypi.org", false)),
        ];
        let mut want = approval(
            "host:pypi.org",
            "network access to pypi.org:443 (from bash call c1: pip install x)",
            1,
            3,
            decided(false, 4),
        );
        want.tool = "network".into();
        want.host = Some(host);
        assert_eq!(
            approvals_of(&events),
            vec![
                approval("c1", "pip install x", 1, 1, decided(true, 2)),
                want
            ]
        );
    }

    #[test]
    fn a_host_request_whose_call_completed_is_no_longer_pending() {
        let asked = |call: &str| {
            toren_protocol::HostApprovalRequested::new(
                "pypi.org",
                443,
                Some((call.into(), "pip install x".into())),
            )
        };
        let completed = EventKind::ToolCompleted(toren_protocol::ToolCompleted {
            call_id: "c1".into(),
            output: "connection refused".into(),
            is_error: true,
            exit_code: Some(1),
            truncated: false,
        });
        let events = vec![
            event(1, EventKind::HostApprovalRequested(asked("c1"))),
            event(2, completed),
            event(3, EventKind::HostApprovalRequested(asked("c2"))),
        ];
        let states: Vec<(Option<String>, ApprovalState)> = approvals_of(&events)
            .into_iter()
            .map(|a| (a.host.and_then(|h| h.call_id), a.state))
            .collect();
        assert_eq!(
            states,
            vec![
                (Some("c1".into()), ApprovalState::Unanswered),
                (Some("c2".into()), ApprovalState::Pending),
            ]
        );
    }

    #[test]
    fn a_request_the_run_ended_without_answering_is_unanswered() {
        let events = vec![
            event(1, request("c1", "make", 1)),
            event(
                2,
                EventKind::RunCancelled(RunCancelled {
                    reason: "enough".into(),
                    by: None,
                    via: None,
                }),
            ),
        ];
        assert_eq!(
            approvals_of(&events),
            vec![approval("c1", "make", 1, 1, ApprovalState::Unanswered)]
        );
        assert_eq!(approvals_of(&events[..1])[0].state, ApprovalState::Pending);
    }
}
