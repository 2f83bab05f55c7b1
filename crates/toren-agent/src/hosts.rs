//! The run's host approvals, folded: each host outside the agent's network list that the
//! sandbox tried to reach while `ask` was on, with a person's decision once made. The
//! egress proxy's approver reads it (through [`crate::RunState::host_approval`]) so that a
//! resumed run keeps its decisions: an allowed host stays allowed without asking again, a
//! denied one stays denied, and a request nobody answered yet is waited on, not repeated.
//!
//! The state machine's next action does not depend on it: a host request comes while a
//! tool call runs, and the call's result is what the run waits for.

use std::collections::BTreeMap;

use toren_protocol::{
    ApprovalDecided, EventKind, HostApprovalRequested, host_approval_id, is_host_approval_id,
};

/// Whether `kind` leaves what the state machine decides unchanged: the network records a
/// run's egress proxy appends while a tool call runs (host approval requests, decisions
/// on them, connection records). A driver whose append found only such events ahead of it
/// appends again after them: what it was about to record (a model answer, a tool start or
/// result) is what it would decide again, since the model request is a pure function of
/// the conversation, which they do not touch.
pub fn is_side_event(kind: &EventKind) -> bool {
    match kind {
        EventKind::HostApprovalRequested(_) | EventKind::EgressConnections(_) => true,
        EventKind::ApprovalDecided(d) => is_host_approval_id(&d.call_id),
        _ => false,
    }
}

/// One host a person is or was asked about.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostApproval {
    pub request: HostApprovalRequested,
    /// `Some(true)`: allowed for the run; `Some(false)`: denied; `None`: not answered yet.
    pub decision: Option<bool>,
    /// Whether a decision can still answer the request. Not once the tool call it was made
    /// in has completed, nor once a rewind went back to a step before it: the store
    /// refuses a decision then (a person would be answering for a command that is over,
    /// or that the run's current line no longer has), and the next connection to the host
    /// asks again with a request of its own.
    pub open: bool,
}

/// Host approvals by id (`host:<name>`).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct HostApprovals {
    by_id: BTreeMap<String, HostApproval>,
    /// The seq of each request, by id (for a rewind's cut).
    asked: BTreeMap<String, u64>,
}

impl HostApprovals {
    /// Folds a request (event `seq`): one per host at a time, its id the host's. A host
    /// whose earlier request can no longer be answered ([`HostApproval::open`]) is asked
    /// about again; one that waits for a decision or was decided is not.
    pub(crate) fn request(
        &mut self,
        seq: u64,
        request: &HostApprovalRequested,
    ) -> Result<(), String> {
        if request.id != host_approval_id(&request.host) {
            return Err(format!(
                "host approval {} is not named after its host {}",
                request.id, request.host
            ));
        }
        if let Some(earlier) = self.by_id.get(&request.id) {
            match earlier.decision {
                None if !earlier.open => {}
                None => return Err(format!("{} already waits for a decision", request.id)),
                Some(_) => return Err(format!("{} was already decided", request.id)),
            }
        }
        self.by_id.insert(
            request.id.clone(),
            HostApproval {
                request: request.clone(),
                decision: None,
                open: true,
            },
        );
        self.asked.insert(request.id.clone(), seq);
        Ok(())
    }

    /// Tool call `call_id` completed: a request made while it ran and not answered can no
    /// longer be.
    pub(crate) fn call_ended(&mut self, call_id: &str) {
        for approval in self.by_id.values_mut() {
            if approval.decision.is_none() && approval.request.call_id.as_deref() == Some(call_id) {
                approval.open = false;
            }
        }
    }

    /// The run went back to step `to`: a request made after it and not answered was left
    /// behind (a decision stands; the host stays allowed or denied for the run).
    pub(crate) fn rewound(&mut self, to: u64) {
        for (id, approval) in &mut self.by_id {
            if approval.decision.is_none() && self.asked.get(id).is_some_and(|seq| *seq > to) {
                approval.open = false;
            }
        }
    }

    /// Folds a decision on a host approval (the store lets only the first one in, and
    /// none on a request that is no longer open; logs written before it refused those
    /// still fold).
    pub(crate) fn decide(&mut self, decision: &ApprovalDecided) -> Result<(), String> {
        match self.by_id.get_mut(&decision.call_id) {
            Some(approval) if approval.decision.is_none() => {
                approval.decision = Some(decision.approved);
                Ok(())
            }
            Some(_) => Err(format!("{} was already decided", decision.call_id)),
            None => Err(format!(
                "no host approval {} was requested",
                decision.call_id
            )),
        }
    }

    pub(crate) fn get(&self, host: &str) -> Option<&HostApproval> {
        self.by_id.get(&host_approval_id(host))
    }

    pub(crate) fn all(&self) -> impl Iterator<Item = &HostApproval> {
        self.by_id.values()
    }
}

impl crate::RunState {
    /// What the run knows about network access to `host` beyond its list: requested,
    /// and decided or not. `None`: never asked about.
    pub fn host_approval(&self, host: &str) -> Option<&HostApproval> {
        self.hosts.get(host)
    }

    /// Every host approval of the run, by host.
    pub fn host_approvals(&self) -> impl Iterator<Item = &HostApproval> {
        self.hosts.all()
    }
}

#[cfg(test)]
#[path = "hosts_tests.rs"]
mod tests;
