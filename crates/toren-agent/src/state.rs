//! [`RunState`]: a run folded from its events. What comes next is decided from it in
//! `decide`.
//!
//! Folding is strict: an event that does not fit the state (a tool result for a call the
//! model never made, a second `run_created`) is a corrupt log and an [`Error`], never
//! silently skipped.

use std::collections::{BTreeSet, HashMap};

use toren_protocol::{
    AgentSpec, ChannelBinding, Event, EventKind, Message, MessageDelivered, ResolvedPolicy, RunId,
    RunStatus, SandboxProvisioned, ToolCall, ToolResult,
};

/// An event log that does not describe a possible run.
#[derive(Clone, Debug, thiserror::Error, PartialEq, Eq)]
pub enum Error {
    #[error("the event log of run {0} is empty or does not start with run_created")]
    NotCreated(String),
    #[error("event {seq} ({kind}) of run {run} does not fit the run's state: {why}")]
    Inconsistent {
        run: String,
        seq: u64,
        kind: &'static str,
        why: String,
    },
}

/// What is known of one tool call of the current turn.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct CallProgress {
    /// Approval requests in order; the last one is the current one.
    pub(crate) approvals: Vec<Approval>,
    /// How many times it was started (the highest attempt recorded).
    pub(crate) attempts: u32,
    pub(crate) result: Option<ToolResult>,
    /// Its file reached the person (`message_delivered`).
    pub(crate) delivered: bool,
}

/// One approval request of a call and its decision, if any.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Approval {
    /// The attempt it approves (see `ApprovalRequested::attempt`).
    pub(crate) attempt: u32,
    pub(crate) command: String,
    /// `(approved, reason)`.
    pub(crate) decision: Option<(bool, Option<String>)>,
}

impl CallProgress {
    /// The approval request for `attempt`, if one was made.
    pub(crate) fn approval_for(&self, attempt: u32) -> Option<&Approval> {
        self.approvals.iter().rev().find(|a| a.attempt == attempt)
    }
}

/// A run, as its events describe it.
#[derive(Clone, Debug, PartialEq)]
pub struct RunState {
    pub run_id: RunId,
    pub agent: AgentSpec,
    pub policy: Option<ResolvedPolicy>,
    /// The conversation to send to the model.
    pub messages: Vec<Message>,
    /// How many of `messages` came before this run (a session's earlier turns).
    pub history_len: usize,
    /// Model responses so far.
    pub turns: u32,
    pub status: RunStatus,
    /// The seq of the last folded event.
    pub last_seq: u64,
    pub sandbox: Option<SandboxProvisioned>,
    /// The final answer, once completed.
    pub output: Option<String>,
    /// The failure, once failed.
    pub error: Option<String>,
    /// The channel the run is bound to (`send_to_channel` delivers through it).
    pub channel: Option<ChannelBinding>,
    /// The files that reached the person, in order.
    pub deliveries: Vec<MessageDelivered>,
    /// Tool calls of the last assistant message, in order, while some lack a result.
    pub(crate) pending: Vec<ToolCall>,
    pub(crate) progress: HashMap<String, CallProgress>,
    /// Every tool call id the run has used, so that a new answer's ids can be made unique
    /// within the run (see [`RunState::admit`]).
    pub(crate) used_ids: BTreeSet<String>,
    /// What is stubbed or left out of the conversation to fit the context window.
    pub(crate) compaction: crate::Compaction,
    /// The token usage of the run's model answers, summed.
    pub(crate) usage: toren_protocol::Usage,
    /// The steps a rewind can go back to, and a restore due (`rewind`).
    pub(crate) line: crate::rewind::Line,
    /// Hosts outside the network list a person is or was asked about (`hosts`).
    pub(crate) hosts: crate::hosts::HostApprovals,
    /// Its budget: the limits in force, a pause, the active time (`budget`).
    pub(crate) budget: crate::budget::BudgetFold,
    /// The approval requests the run's current wait still has open.
    pub(crate) waiting: toren_protocol::Waiting,
    /// This run is a session's rewind turn, going back to the step this names
    /// (`TurnStart::rewound`): it restores the workspace and completes, calling no model.
    pub(crate) session_rewind: Option<toren_protocol::Rewound>,
    /// The ended run and its step this run goes on from (`TurnStart::forked`).
    pub(crate) forked_from: Option<(RunId, u64)>,
}

impl RunState {
    /// Folds a whole log, which must start with `run_created`.
    pub fn from_events(events: &[Event]) -> Result<Self, Error> {
        Self::from_events_with_history(&[], events)
    }

    /// Folds a whole log of a run that continues `history` (a session's conversation before
    /// this turn): the model sees the history, then this run's input and what followed.
    pub fn from_events_with_history(history: &[Message], events: &[Event]) -> Result<Self, Error> {
        let (first, rest) = events
            .split_first()
            .ok_or_else(|| Error::NotCreated(String::new()))?;
        let EventKind::RunCreated(created) = &first.kind else {
            return Err(Error::NotCreated(first.run_id.to_string()));
        };
        let mut messages = history.to_vec();
        // A session's rewind turn has no input: it only takes the session back.
        let session_rewind = created.start.as_ref().and_then(|s| s.rewound.clone());
        // A run going on from an ended run's step begins with that step's conversation.
        let forked = created.start.as_ref().and_then(|s| s.forked.as_ref());
        if let Some(forked) = forked {
            messages.extend(forked.messages.iter().cloned());
        } else if session_rewind.is_none() {
            messages.push(Message::User {
                text: created.input.clone(),
            });
        }
        // Ids stay unique across the whole conversation the model sees.
        let used_ids = messages
            .iter()
            .filter_map(|m| match m {
                Message::Assistant(a) => Some(a.tool_calls.iter().map(|c| c.id.clone())),
                _ => None,
            })
            .flatten()
            .collect();
        let mut state = Self {
            run_id: first.run_id.clone(),
            agent: created.agent.clone(),
            policy: created.policy.clone(),
            history_len: history.len(),
            messages,
            turns: 0,
            status: RunStatus::Queued,
            last_seq: first.seq,
            sandbox: None,
            output: None,
            error: None,
            channel: created.channel.clone(),
            deliveries: Vec::new(),
            pending: Vec::new(),
            progress: HashMap::new(),
            used_ids,
            compaction: crate::Compaction::default(),
            usage: toren_protocol::Usage::default(),
            line: crate::rewind::Line::default(),
            hosts: crate::hosts::HostApprovals::default(),
            waiting: toren_protocol::Waiting::default(),
            budget: crate::budget::BudgetFold::new(
                created.agent.budget.map(|b| b.limits).unwrap_or_default(),
                first.at,
            ),
            session_rewind: None,
            forked_from: forked.map(|f| (f.from.clone(), f.to)),
        };
        crate::rewind::start_session_rewind(&mut state, session_rewind);
        if let Some(forked) = forked {
            crate::rewind::start_fork(&mut state, forked);
        }
        crate::rewind::mark(&mut state);
        for event in rest {
            state.apply(event)?;
        }
        Ok(state)
    }

    /// Folds one more event.
    pub fn apply(&mut self, event: &Event) -> Result<(), Error> {
        let bad = |why: String| Error::Inconsistent {
            run: event.run_id.to_string(),
            seq: event.seq,
            kind: event.kind.name(),
            why,
        };
        if event.seq != self.last_seq + 1 {
            return Err(bad(format!("expected seq {}", self.last_seq + 1)));
        }
        self.budget.tick(self.status, event);
        self.line.event_folded();
        match &event.kind {
            EventKind::RunCreated(_) => return Err(bad("the run was already created".into())),
            EventKind::Rewound(r) => {
                crate::rewind::rewind(self, event.seq, r).map_err(bad)?;
                self.hosts.rewound(r.to);
            }
            EventKind::ModelResponded(r) => {
                if !self.pending.is_empty() {
                    return Err(bad("tool calls of the previous turn are unanswered".into()));
                }
                self.turns += 1;
                self.usage += r.usage;
                self.pending = r.message.tool_calls.clone();
                self.progress = self
                    .pending
                    .iter()
                    .map(|c| (c.id.clone(), CallProgress::default()))
                    .collect();
                if self.progress.len() != self.pending.len() {
                    return Err(bad("two tool calls share one id".into()));
                }
                // Logs written before ids were made unique per run may repeat an id of an
                // earlier turn; those still fold (each turn's calls are tracked apart).
                self.used_ids
                    .extend(self.pending.iter().map(|c| c.id.clone()));
                self.messages.push(Message::Assistant(r.message.clone()));
            }
            EventKind::ApprovalRequested(a) => {
                let p = self
                    .call_mut(&a.call_id)
                    .ok_or_else(|| bad(unknown(&a.call_id)))?;
                if p.approvals
                    .last()
                    .is_some_and(|last| last.decision.is_none())
                {
                    return Err(bad(format!("{} already waits for a decision", a.call_id)));
                }
                p.approvals.push(Approval {
                    attempt: a.attempt,
                    command: a.command.clone(),
                    decision: None,
                });
            }
            EventKind::HostApprovalRequested(h) => {
                self.hosts.request(event.seq, h).map_err(bad)?;
            }
            // A decision on a host (`host:<name>`): no tool call has such an id (`admit`).
            EventKind::ApprovalDecided(d) if toren_protocol::is_host_approval_id(&d.call_id) => {
                self.hosts.decide(d).map_err(bad)?;
            }
            // Journaled beside whatever runs; nothing the run decides depends on it.
            EventKind::EgressConnections(_) => {}
            EventKind::ApprovalDecided(d) => {
                let p = self
                    .call_mut(&d.call_id)
                    .ok_or_else(|| bad(unknown(&d.call_id)))?;
                // A decision answers the latest request of the call (the store enforces it).
                match p.approvals.last_mut() {
                    Some(last) if last.decision.is_none() => {
                        last.decision = Some((d.approved, d.reason.clone()));
                    }
                    _ => return Err(bad(format!("no pending approval for {}", d.call_id))),
                }
            }
            EventKind::ToolStarted(t) => {
                let p = self
                    .call_mut(&t.call_id)
                    .ok_or_else(|| bad(unknown(&t.call_id)))?;
                p.attempts = p.attempts.max(t.attempt);
            }
            EventKind::ToolCompleted(t) => {
                let p = self
                    .call_mut(&t.call_id)
                    .ok_or_else(|| bad(unknown(&t.call_id)))?;
                if p.result.is_some() {
                    return Err(bad(format!("{} already completed", t.call_id)));
                }
                p.result = Some(ToolResult {
                    call_id: t.call_id.clone(),
                    content: t.output.clone(),
                    is_error: t.is_error,
                });
                self.hosts.call_ended(&t.call_id);
                self.close_turn_if_answered();
            }
            EventKind::MessageDelivered(d) => {
                let p = self
                    .call_mut(&d.call_id)
                    .ok_or_else(|| bad(unknown(&d.call_id)))?;
                // Journaled with the call's result, before it: the call is running.
                let why = if p.attempts == 0 {
                    Some("was never started")
                } else if p.result.is_some() {
                    Some("already completed")
                } else if p.delivered {
                    Some("was already delivered")
                } else {
                    None
                };
                if let Some(why) = why {
                    return Err(bad(format!("{} {why}", d.call_id)));
                }
                p.delivered = true;
                self.deliveries.push(d.clone());
            }
            EventKind::ContextCompacted(c) => {
                if !self.pending.is_empty() {
                    return Err(bad(
                        "a compaction comes between turns, not during one".into()
                    ));
                }
                let window = u64::from(self.agent.context_window());
                self.compaction
                    .record(c, &self.messages, window)
                    .map_err(bad)?;
            }
            EventKind::BudgetReached(r) => {
                // Recorded before a model call, between turns, once until raised.
                if !self.pending.is_empty() || self.status == RunStatus::AwaitingBudget {
                    return Err(bad(
                        "a budget is reached between turns, once until it is raised".into(),
                    ));
                }
                self.budget.reach(r);
            }
            EventKind::BudgetRaised(r) => {
                if self.status != RunStatus::AwaitingBudget {
                    return Err(bad(format!(
                        "the run does not wait for a budget raise (it is {})",
                        self.status
                    )));
                }
                self.budget.raise(r);
            }
            EventKind::SandboxProvisioned(s) => self.sandbox = Some(s.clone()),
            EventKind::RunCompleted(c) => self.output = Some(c.output.clone()),
            EventKind::RunFailed(f) => self.error = Some(f.error.clone()),
            EventKind::RunCancelled(c) => {
                self.error = Some(match (c.reason.is_empty(), &c.by) {
                    (false, _) => format!("cancelled: {}", c.reason),
                    (true, Some(by)) => format!("cancelled by {by}"),
                    (true, None) => "cancelled".to_owned(),
                });
            }
        }
        // A decision frees the run only when nothing else it waits on is open (the rule
        // the stores keep the status column by).
        self.status = self.waiting.status_after(&event.kind, self.status);
        self.last_seq = event.seq;
        crate::rewind::mark(self);
        Ok(())
    }

    /// This run's own part of the conversation (its input and what followed), as the next
    /// turn of a session continues it: tool calls left without a result (the turn was
    /// cancelled or failed before they ran) are answered with a note saying so, so that the
    /// conversation stays one a model accepts.
    pub fn own_messages(&self) -> Vec<Message> {
        let mut own = self.messages[self.history_len.min(self.messages.len())..].to_vec();
        if !self.pending.is_empty() {
            let results = self
                .pending
                .iter()
                .map(|c| {
                    self.result_of(&c.id)
                        .cloned()
                        .unwrap_or_else(|| ToolResult {
                            call_id: c.id.clone(),
                            content: format!(
                                "[this call did not run: the turn ended ({}) before it did]",
                                self.status
                            ),
                            is_error: true,
                        })
                })
                .collect();
            own.push(Message::ToolResults { results });
        }
        own
    }

    pub(crate) fn result_of(&self, call_id: &str) -> Option<&ToolResult> {
        self.progress.get(call_id).and_then(|p| p.result.as_ref())
    }

    fn call_mut(&mut self, call_id: &str) -> Option<&mut CallProgress> {
        self.progress.get_mut(call_id)
    }

    fn close_turn_if_answered(&mut self) {
        if self.pending.iter().any(|c| self.result_of(&c.id).is_none()) {
            return;
        }
        // Every call has its result: they move into the conversation, in the calls' order.
        let mut progress = std::mem::take(&mut self.progress);
        let results = self
            .pending
            .drain(..)
            .filter_map(|c| progress.remove(&c.id).and_then(|p| p.result))
            .collect();
        self.messages.push(Message::ToolResults { results });
    }
}

fn unknown(call_id: &str) -> String {
    format!("the current turn has no tool call {call_id}")
}

#[cfg(test)]
#[path = "state_tests.rs"]
pub(crate) mod tests;

#[cfg(test)]
#[path = "delivery_tests.rs"]
mod delivery_tests;
