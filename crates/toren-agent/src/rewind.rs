//! Folding `rewound`: the run goes back to the state it had after an earlier event.
//!
//! The fold keeps, for each step of the run's current line where the run can continue
//! from, what `rewound` needs to go back there ([`Line`]): how long the conversation was,
//! the turn count, the calls the last answer made (right after a model answer, before any
//! of them was asked about or started) and the compactions. Those are the steps between
//! turns and right after a model answer; a step in the middle of a call's approval and
//! result is not one (its rewind would leave half a call). Going back drops the later
//! steps from the line (they were left behind), keeps what happened for real (usage, the
//! files delivered, the sandbox instance, every call id used), and marks the workspace
//! restore as due until the next event is folded: the driver that finds the rewind last
//! in the log restores the workspace before it does anything else (`restore_due`).

use std::collections::HashMap;

use toren_protocol::{Message, Rewound, RunStatus, ToolCall};

use crate::RunState;
use crate::state::CallProgress;

/// The steps of the run's current line a rewind can go back to.
#[derive(Clone, Debug, Default, PartialEq)]
pub(crate) struct Line {
    /// By `seq`, ascending.
    points: Vec<Point>,
    /// The checkpoint a `rewound` folded last restores (the workspace is made so before
    /// anything else is done); cleared by the next event.
    due: Option<String>,
    /// Where the line was cut by the latest rewind: steps after it and before the rewind
    /// were left behind.
    cut: Option<(u64, u64)>,
}

#[derive(Clone, Debug, PartialEq)]
struct Point {
    seq: u64,
    messages: usize,
    turns: u32,
    status: RunStatus,
    /// The last answer's calls, none of them asked about or started yet (empty between
    /// turns).
    pending: Vec<ToolCall>,
    compaction: crate::Compaction,
}

impl Line {
    /// An event other than `rewound` is being folded: the restore, if one was due, was
    /// done by whoever wrote it.
    pub(crate) fn event_folded(&mut self) {
        self.due = None;
    }
}

/// A session's rewind turn (see `TurnStart`): its restore is due from its first event
/// until the next is folded (the driver restores, then completes it).
pub(crate) fn start_session_rewind(state: &mut RunState, rewound: Option<Rewound>) {
    if let Some(r) = &rewound {
        state.line.due = r.checkpoint.clone();
    }
    state.session_rewind = rewound;
}

/// A run going on from an ended run's step (`TurnStart::forked`): its turns so far and the
/// calls the step's answer made, not yet asked about or started, are the step's.
pub(crate) fn start_fork(state: &mut RunState, forked: &toren_protocol::Forked) {
    state.turns = forked.turns;
    state.progress = forked
        .pending
        .iter()
        .map(|c| (c.id.clone(), CallProgress::default()))
        .collect();
    state.pending = forked.pending.clone();
}

/// What a session's rewind turn says when it completes.
pub(crate) fn session_rewind_note(rewound: &Rewound) -> String {
    let step = toren_protocol::TurnStart::step_name(rewound.turn.unwrap_or(0), rewound.to);
    let workspace = match &rewound.checkpoint {
        Some(id) => format!("workspace restored to checkpoint {id}"),
        None => "workspace unchanged since".to_owned(),
    };
    if rewound.to == 0 {
        format!("the session went back to before turn {step} ({workspace})")
    } else {
        format!("the session went back to step {step} ({workspace})")
    }
}

/// Records the step just folded if the run can continue from it.
pub(crate) fn mark(state: &mut RunState) {
    let fresh = state
        .pending
        .iter()
        .all(|c| state.progress.get(&c.id) == Some(&CallProgress::default()));
    if !fresh || state.status.is_terminal() {
        return;
    }
    let point = Point {
        seq: state.last_seq,
        messages: state.messages.len(),
        turns: state.turns,
        status: state.status,
        pending: state.pending.clone(),
        compaction: state.compaction.clone(),
    };
    state.line.points.push(point);
}

/// Folds `rewound`: the state goes back to what it was after step `to`.
pub(crate) fn rewind(state: &mut RunState, seq: u64, rewound: &Rewound) -> Result<(), String> {
    let to = rewound.to;
    let Some(at) = state.line.points.iter().position(|p| p.seq == to) else {
        return Err(why_not(state, to));
    };
    let point = state.line.points[at].clone();
    state.line.points.truncate(at + 1);
    state.line.due = rewound.checkpoint.clone();
    state.line.cut = Some((to, seq));
    state.messages.truncate(point.messages);
    state.turns = point.turns;
    state.status = point.status;
    state.progress = point
        .pending
        .iter()
        .map(|c| (c.id.clone(), CallProgress::default()))
        .collect::<HashMap<_, _>>();
    state.pending = point.pending;
    state.compaction = point.compaction;
    state.output = None;
    state.error = None;
    Ok(())
}

/// Why `to` is not a step to go back to, naming the ones near it that are.
fn why_not(state: &RunState, to: u64) -> String {
    if to == 0 || to > state.last_seq {
        return format!(
            "step {to} is not in the run (its steps are 1 to {})",
            state.last_seq
        );
    }
    if let Some((cut_to, cut_at)) = state.line.cut
        && to > cut_to
        && to <= cut_at
    {
        return format!(
            "step {to} was left behind by the rewind at step {cut_at} (back to step {cut_to})"
        );
    }
    let before = state.line.points.iter().rev().find(|p| p.seq < to);
    let after = state.line.points.iter().find(|p| p.seq > to);
    let near: Vec<String> = before
        .into_iter()
        .chain(after)
        .map(|p| p.seq.to_string())
        .collect();
    format!(
        "step {to} is in the middle of a tool call (between its approval or start and its \
         result); go back to a step between turns or right after a model answer{}",
        if near.is_empty() {
            String::new()
        } else {
            format!(", e.g. step {}", near.join(" or "))
        }
    )
}

impl RunState {
    /// The workspace checkpoint to restore before anything else: the run's last event is a
    /// `rewound` whose restore may not have finished (the process that recorded it may
    /// have died during it). Restoring again is harmless: it is idempotent.
    pub fn restore_due(&self) -> Option<&str> {
        self.line.due.as_deref()
    }

    /// The steps a rewind can go back to, oldest first (on the run's current line, between
    /// turns or right after a model answer).
    pub fn rewind_targets(&self) -> Vec<u64> {
        self.line.points.iter().map(|p| p.seq).collect()
    }

    /// The steps of [`RunState::rewind_targets`] where no tool call was pending: where a
    /// person's next message can follow (a session goes back to those).
    pub fn quiet_targets(&self) -> Vec<u64> {
        self.line
            .points
            .iter()
            .filter(|p| p.pending.is_empty())
            .map(|p| p.seq)
            .collect()
    }

    /// The ended run and its step this run goes on from (`TurnStart::forked`).
    pub fn forked_from(&self) -> Option<(&toren_protocol::RunId, u64)> {
        self.forked_from.as_ref().map(|(run, to)| (run, *to))
    }

    /// The rewind this run, a session's rewind turn, makes (`TurnStart::rewound`).
    pub fn session_rewind(&self) -> Option<&Rewound> {
        self.session_rewind.as_ref()
    }

    /// Whether the conversation at step `to` is reachable by a rewind, and if not why.
    /// A run that has ended is not rewound (its log is closed): a new run goes on from the
    /// step instead ([`RunState::fork_at`]).
    pub fn can_rewind_to(&self, to: u64) -> Result<(), String> {
        if self.status.is_terminal() {
            return Err(format!(
                "the run has ended ({}): its log is closed, so it cannot be rewound; a new \
                 run can go on from the step instead",
                self.status
            ));
        }
        self.on_line(to)
    }

    fn on_line(&self, to: u64) -> Result<(), String> {
        if self.line.points.iter().any(|p| p.seq == to) {
            Ok(())
        } else {
            Err(why_not(self, to))
        }
    }

    /// What a new run going on from step `to` of this one begins with (for a run that has
    /// ended; see `toren_protocol::Forked`): the conversation at the step, the calls of
    /// its answer that had not run and the turns so far. `to` must be a step a rewind
    /// could go back to, on the run's current line. Only this run's own part of the
    /// conversation is taken (a session's turn goes back through its session).
    pub fn fork_at(&self, to: u64) -> Result<toren_protocol::Forked, String> {
        self.on_line(to)?;
        let Some(point) = self.line.points.iter().find(|p| p.seq == to) else {
            return Err(why_not(self, to));
        };
        let messages = self
            .messages
            .get(self.history_len..point.messages)
            .unwrap_or_default()
            .to_vec();
        Ok(toren_protocol::Forked {
            from: self.run_id.clone(),
            to,
            checkpoint: None,
            by: None,
            messages,
            pending: point.pending.clone(),
            turns: point.turns,
        })
    }

    /// The messages the model saw up to and including step `to` would be: for display.
    pub fn messages_at(&self, to: u64) -> Option<&[Message]> {
        let point = self.line.points.iter().find(|p| p.seq == to)?;
        self.messages.get(..point.messages)
    }
}

#[cfg(test)]
#[path = "rewind_tests.rs"]
mod tests;
