//! Events being written to one run: [`Sequence`] numbers them after the run's last seq,
//! stamps them with one time, encodes them and keeps the run's status in step (a decision
//! leaves a run awaiting approval while another request is open: [`Waiting`]), refusing
//! anything after a terminal event; [`check_decision`] is the rule of
//! [`EventLog::decide_approval`](crate::EventLog::decide_approval) and
//! [`RunState::check_unleased`] the rule of every write without a lease.

use jiff::Timestamp;
use toren_protocol::{
    ApprovalDecided, EVENT_FORMAT_VERSION, Event, EventKind, RunId, RunStatus, Waiting,
};

use crate::backend::RunState;
use crate::{Error, Result};

/// The events of one write to one run, in order.
#[derive(Clone, Debug)]
pub struct Sequence {
    run_id: RunId,
    at: Timestamp,
    last_seq: u64,
    status: RunStatus,
    /// The open requests of the run's current wait, as far as this write knows them.
    waiting: Waiting,
}

impl Sequence {
    /// A write stamped `at`, going on after `last_seq` of a run in `status`.
    pub fn new(run_id: &RunId, at: Timestamp, last_seq: u64, status: RunStatus) -> Self {
        Self {
            run_id: run_id.clone(),
            at,
            last_seq,
            status,
            waiting: Waiting::default(),
        }
    }

    /// The same write, to a run whose current wait has `waiting` open (what
    /// [`check_decision`] found): a decision keeps the run `awaiting_approval` while
    /// another of them is open. Without it a decision frees a waiting run.
    pub fn waiting_on(mut self, waiting: Waiting) -> Self {
        self.waiting = waiting;
        self
    }

    /// The next event, of `kind`, and its payload (the event as JSON); [`Error::RunEnded`]
    /// if an earlier event ended the run.
    pub fn next(&mut self, kind: EventKind) -> Result<(Event, String)> {
        if self.status.is_terminal() {
            return Err(Error::RunEnded {
                run_id: self.run_id.clone(),
                status: self.status,
            });
        }
        let seq = self.last_seq + 1;
        let event = Event {
            run_id: self.run_id.clone(),
            seq,
            at: self.at,
            v: EVENT_FORMAT_VERSION,
            kind,
        };
        let payload = serde_json::to_string(&event).map_err(|source| Error::Encode {
            run_id: self.run_id.clone(),
            seq,
            source,
        })?;
        self.last_seq = seq;
        self.status = self.waiting.status_after(&event.kind, self.status);
        Ok((event, payload))
    }

    pub fn run_id(&self) -> &RunId {
        &self.run_id
    }

    /// The time every event of this write carries.
    pub fn at(&self) -> Timestamp {
        self.at
    }

    /// The seq of the last event so far (the run's `last_seq` once written).
    pub fn last_seq(&self) -> u64 {
        self.last_seq
    }

    /// The run's status after the events so far.
    pub fn status(&self) -> RunStatus {
        self.status
    }

    /// Whether the events so far ended the run (its lease is released with them).
    pub fn ended(&self) -> bool {
        self.status.is_terminal()
    }
}

/// Whether `decision` may be recorded, given the run's `approval_requested`,
/// `host_approval_requested`, `approval_decided` and `rewound` events in order, and for a
/// host's request (`host:<name>`) its `tool_completed` events too (others are passed
/// over): only the latest request for its call id counts (logs written before call ids
/// were unique within a run may reuse an earlier turn's id), it must be on the run's
/// current line (a `rewound` back to a step before it left it behind), a host's request
/// must have been made while a call runs that has not completed since (or outside any
/// call), and it must be undecided ([`Error::LeftBehind`], [`Error::CallEnded`],
/// [`Error::AlreadyDecided`], [`Error::NoPendingApproval`]). Returns the open requests of the run's current wait,
/// which began after event `wait_began` (the run's last event of a kind not in
/// [`Waiting::KINDS`]; 0 for none), for [`Sequence::waiting_on`].
pub fn check_decision(
    run_id: &RunId,
    decision: &ApprovalDecided,
    earlier: impl IntoIterator<Item = Result<Event>>,
    wait_began: u64,
) -> Result<Waiting> {
    // The seq of the latest request of the call id on the run's current line.
    let mut requested: Option<u64> = None;
    let mut left_behind = None;
    // The tool call a host's latest request was made in, and whether it completed since.
    let mut made_in: Option<String> = None;
    let mut call_ended = false;
    let mut decided = None;
    let mut waiting = Waiting::default();
    for event in earlier {
        let event = event?;
        if event.seq > wait_began {
            waiting.fold(&event.kind);
        }
        match event.kind {
            EventKind::ApprovalDecided(earlier) if earlier.call_id == decision.call_id => {
                decided = Some(earlier.approved);
            }
            EventKind::ApprovalRequested(request) if request.call_id == decision.call_id => {
                requested = Some(event.seq);
                left_behind = None;
                made_in = None;
                call_ended = false;
                decided = None;
            }
            // A host's approval (`host:<name>`), decided the same way while the command
            // that asked still runs.
            EventKind::HostApprovalRequested(request) if request.id == decision.call_id => {
                requested = Some(event.seq);
                left_behind = None;
                made_in = request.call_id;
                call_ended = false;
                decided = None;
            }
            EventKind::ToolCompleted(done)
                if decided.is_none() && made_in.as_deref() == Some(done.call_id.as_str()) =>
            {
                call_ended = true;
            }
            // Back at step `to`: a request after it was left behind with its call (a
            // decision on it would name a call the current line does not have, and the
            // log would no longer fold).
            EventKind::Rewound(rewound) if requested.is_some_and(|seq| seq > rewound.to) => {
                requested = None;
                left_behind = Some(rewound.to);
                made_in = None;
                call_ended = false;
                decided = None;
            }
            _ => {}
        }
    }
    if let Some(approved) = decided {
        return Err(Error::AlreadyDecided {
            run_id: run_id.clone(),
            call_id: decision.call_id.clone(),
            approved,
        });
    }
    if let Some(to) = left_behind {
        return Err(Error::LeftBehind {
            run_id: run_id.clone(),
            call_id: decision.call_id.clone(),
            to,
        });
    }
    if call_ended && let Some(call) = made_in {
        return Err(Error::CallEnded {
            run_id: run_id.clone(),
            call_id: decision.call_id.clone(),
            call,
        });
    }
    if requested.is_none() {
        return Err(Error::NoPendingApproval {
            run_id: run_id.clone(),
            call_id: decision.call_id.clone(),
        });
    }
    Ok(waiting)
}

impl RunState {
    /// Whether `kind` may be written to this run without a lease (a decision, a
    /// cancellation, a raised budget), after a decision passed [`check_decision`]:
    /// [`Error::RunEnded`] once the run ended, [`Error::NotAwaitingBudget`] for a raise
    /// of a run that does not wait for one.
    pub fn check_unleased(&self, run_id: &RunId, kind: &EventKind) -> Result<()> {
        self.refuse_if_ended(run_id)?;
        if matches!(kind, EventKind::BudgetRaised(_)) && self.status != RunStatus::AwaitingBudget {
            return Err(Error::NotAwaitingBudget {
                run_id: run_id.clone(),
                status: self.status,
            });
        }
        Ok(())
    }
}
