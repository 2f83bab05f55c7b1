//! A run's budget, folded from its log: what it has spent (tokens and dollars from the
//! `usage` of its model answers, active wall time from the events' timestamps), the limits
//! in force (the pinned `budget` with every `budget_raised`), and the decision taken before
//! each model call: go on, record `budget_reached`, or wait for a raise.
//!
//! **Where it is checked**: before each model call only (in `next_action`, where the call
//! would be decided), never during one. A call in flight may take the run over a limit;
//! the next call is then not made. Tool calls are not checked: they spend no tokens, and a
//! turn's calls always complete before the budget stops the run.
//!
//! **Wall time** is the run's active time: the time between each event and the next,
//! except while the run waited for a person (awaiting an approval or a budget raise).
//! Time queued before a worker took the run, and time a crashed run sat until it was
//! resumed, count: the log cannot tell them from work. It is measured to the last event,
//! so time since then (a model call being answered) is not yet counted. Pure: no clock is
//! read, only the `at` the store gave each event.

use jiff::{SignedDuration, Timestamp};
use toren_protocol::{
    BudgetLimit, BudgetLimits, BudgetRaised, BudgetReached, Event, RunStatus, Spending, Usage,
};

use crate::{Action, RunState};

/// The budget part of a folded run.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct BudgetFold {
    /// The limits in force: the pinned ones with every raise added.
    pub(crate) limits: BudgetLimits,
    /// The `budget_reached` the run waits on, until a raise.
    pub(crate) reached: Option<BudgetReached>,
    /// Active time up to the last folded event.
    pub(crate) active: SignedDuration,
    /// The `at` of the last folded event.
    pub(crate) last_at: Timestamp,
}

impl BudgetFold {
    pub(crate) fn new(limits: BudgetLimits, created_at: Timestamp) -> Self {
        Self {
            limits,
            reached: None,
            active: SignedDuration::ZERO,
            last_at: created_at,
        }
    }

    /// Counts the time from the previous event to `event` unless the run was waiting for a
    /// person meanwhile (`status` is the status before `event`).
    pub(crate) fn tick(&mut self, status: RunStatus, event: &Event) {
        let waiting = matches!(
            status,
            RunStatus::AwaitingApproval | RunStatus::AwaitingBudget
        );
        let elapsed = event.at.duration_since(self.last_at);
        if !waiting && elapsed.is_positive() {
            self.active = self.active.saturating_add(elapsed);
        }
        self.last_at = event.at;
    }

    pub(crate) fn reach(&mut self, reached: &BudgetReached) {
        self.reached = Some(reached.clone());
    }

    pub(crate) fn raise(&mut self, raise: &BudgetRaised) {
        self.limits = self.limits.raised(raise);
        self.reached = None;
    }
}

impl RunState {
    /// What the run has spent: its tokens, their price (`None` when the model's prices
    /// are unknown and the agent file gives none) and its active wall time.
    pub fn spending(&self) -> Spending {
        let usage = self.usage;
        Spending {
            tokens: tokens(&usage),
            usd: self.agent.pricing().map(|p| p.cost(&usage)),
            wall_secs: u64::try_from(self.budget.active.as_secs()).unwrap_or(0),
        }
    }

    /// The limits in force: the pinned budget with every raise added.
    pub fn budget_limits(&self) -> BudgetLimits {
        self.budget.limits
    }

    /// The `budget_reached` the run waits on, until someone raises its budget.
    pub fn budget_reached(&self) -> Option<&BudgetReached> {
        self.budget.reached.as_ref()
    }

    /// The limits `spent` has reached (spent at least the limit).
    pub fn limits_reached(&self, spent: &Spending) -> Vec<BudgetLimit> {
        let limits = &self.budget.limits;
        let mut reached = Vec::new();
        if limits.tokens.is_some_and(|t| spent.tokens >= t) {
            reached.push(BudgetLimit::Tokens);
        }
        if let (Some(limit), Some(usd)) = (limits.usd, spent.usd)
            && usd >= limit
        {
            reached.push(BudgetLimit::Usd);
        }
        if limits.wall_secs.is_some_and(|w| spent.wall_secs >= w) {
            reached.push(BudgetLimit::Wall);
        }
        reached
    }

    /// Before a model call: wait for a raise if the run waits for one, record
    /// `budget_reached` if a limit is reached, else `None` (the call may go).
    pub(crate) fn budget_step(&self) -> Option<Action> {
        if self.status == RunStatus::AwaitingBudget
            && let Some(reached) = &self.budget.reached
        {
            return Some(Action::AwaitBudget {
                reached: reached.clone(),
            });
        }
        let spent = self.spending();
        let reached = self.limits_reached(&spent);
        (!reached.is_empty()).then_some(Action::ReachBudget {
            event: BudgetReached {
                reached,
                spent,
                limits: self.budget.limits,
            },
        })
    }
}

/// Tokens as a budget counts them: every input token (cached ones included) and every
/// output token.
fn tokens(usage: &Usage) -> u64 {
    usage.input_tokens.saturating_add(usage.output_tokens)
}

#[cfg(test)]
#[path = "budget_tests.rs"]
mod tests;
