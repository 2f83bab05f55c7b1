//! Events being written to one run: [`Sequence`] numbers them after the run's last seq,
//! stamps them with one time, encodes them and keeps the run's status in step, refusing
//! anything after a terminal event; [`check_decision`] is the rule of
//! [`EventLog::decide_approval`](crate::EventLog::decide_approval).

use jiff::Timestamp;
use toren_protocol::{ApprovalDecided, EVENT_FORMAT_VERSION, Event, EventKind, RunId, RunStatus};

use crate::{Error, Result};

/// The events of one write to one run, in order.
#[derive(Clone, Debug)]
pub struct Sequence {
    run_id: RunId,
    at: Timestamp,
    last_seq: u64,
    status: RunStatus,
}

impl Sequence {
    /// A write stamped `at`, going on after `last_seq` of a run in `status`.
    pub fn new(run_id: &RunId, at: Timestamp, last_seq: u64, status: RunStatus) -> Self {
        Self {
            run_id: run_id.clone(),
            at,
            last_seq,
            status,
        }
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
        self.status = event.kind.status_after().unwrap_or(self.status);
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

/// Whether `decision` may be recorded, given the run's `approval_requested` and
/// `approval_decided` events in order (others are passed over): only the latest request for
/// its call id counts (logs written before call ids were unique within a run may reuse an
/// earlier turn's id), and that request must be undecided ([`Error::AlreadyDecided`],
/// [`Error::NoPendingApproval`]).
pub fn check_decision(
    run_id: &RunId,
    decision: &ApprovalDecided,
    earlier: impl IntoIterator<Item = Result<Event>>,
) -> Result<()> {
    let mut requested = false;
    let mut decided = None;
    for event in earlier {
        match event?.kind {
            EventKind::ApprovalDecided(earlier) if earlier.call_id == decision.call_id => {
                decided = Some(earlier.approved);
            }
            EventKind::ApprovalRequested(request) if request.call_id == decision.call_id => {
                requested = true;
                decided = None;
            }
            // A host's approval (`host:<name>`), decided the same way.
            EventKind::HostApprovalRequested(request) if request.id == decision.call_id => {
                requested = true;
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
    if !requested {
        return Err(Error::NoPendingApproval {
            run_id: run_id.clone(),
            call_id: decision.call_id.clone(),
        });
    }
    Ok(())
}
