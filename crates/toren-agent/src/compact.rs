//! The model call, or the compaction that must come first: `context` estimates and folds,
//! this decides. When the request would go over the input budget, a compaction is planned
//! that brings it down to the budget's target, in this order, stopping as soon as it fits:
//!
//! 1. stub the outputs (over 400 bytes) of tool calls older than the last two exchanges,
//!    oldest first;
//! 2. leave out the oldest exchanges (an assistant turn with its tool results, or a user
//!    message), never the first message or the latest user message;
//! 3. only if the request is still over the budget itself: stub the recent outputs, leave
//!    out recent exchanges but the last, and last of all stub the last exchange's outputs.
//!
//! If even that does not fit, the run fails with a message saying so; a request the
//! provider must refuse is never sent.

use std::collections::{BTreeSet, HashMap};

use toren_protocol::{ContextCompacted, Message, MessageRange, RunFailed, SizeRefusal, ToolCall};

use crate::context::{
    Budget, Compaction, calls_by_id, message_tokens, note, result_tokens, stubbed,
};
use crate::{Action, RunState};

/// How many of the latest assistant turns stay whole while anything older is left.
const KEEP_RECENT: usize = 2;
/// Outputs this long or shorter are not worth stubbing before the recent ones must go.
const STUB_MIN_BYTES: usize = 400;

impl RunState {
    /// The next model call with the conversation as it fits; or the compaction to record
    /// first; or the failure when nothing makes it fit.
    pub(crate) fn model_call(&self) -> Action {
        let system = crate::system_prompt(&self.agent);
        let offer_tools = self.agent.sandbox.is_some();
        let budget = Budget::new(&self.agent, &system, offer_tools, &self.compaction);
        let messages = self.conversation();
        let estimate = budget.fixed + messages.iter().map(message_tokens).sum::<u64>();
        if estimate <= budget.input {
            return Action::CallModel {
                system,
                messages,
                offer_tools,
                max_output_tokens: u32::try_from(budget.output_room(estimate)).unwrap_or(u32::MAX),
            };
        }
        match plan(&self.messages, &self.compaction, &budget) {
            Ok(mut event) => {
                event.estimated_before = estimate;
                Action::Compact { event }
            }
            Err(least) => Action::Fail {
                event: RunFailed {
                    error: format!(
                        "the conversation does not fit the model's context window of {} tokens, \
                         even with old tool outputs stubbed and old exchanges left out: what \
                         must stay (the system prompt, the tool definitions, the first and the \
                         latest user message, the last exchange) is about {least} tokens by \
                         Toren's estimate, over the {} allowed for input; raise \
                         `context_tokens` in the agent file if the model's window is larger",
                        budget.window, budget.input
                    ),
                },
            },
        }
    }
}

impl RunState {
    /// The provider refused the model call as too large for the window, though Toren's
    /// estimate said it fitted (the estimate fell short, or the window is smaller than the
    /// spec says). What to record: a compaction that learns from `refused` and makes the
    /// request fit by what it taught (possibly leaving the conversation as it is, when the
    /// answer's room was the trouble); or, when nothing more can be left out, the failure.
    pub fn after_refusal(&self, refused: SizeRefusal) -> Result<ContextCompacted, RunFailed> {
        let system = crate::system_prompt(&self.agent);
        let offer_tools = self.agent.sandbox.is_some();
        let fixed = Budget::new(&self.agent, &system, offer_tools, &self.compaction).fixed;
        let estimate = fixed + self.conversation().iter().map(message_tokens).sum::<u64>();
        let mut taught = self.compaction.clone();
        taught.learn(&refused, estimate, u64::from(self.agent.context_window()));
        let budget = Budget::new(&self.agent, &system, offer_tools, &taught);
        let planned = if estimate <= budget.input {
            Ok(ContextCompacted {
                context_tokens: u32::try_from(budget.window).unwrap_or(u32::MAX),
                estimated_after: estimate,
                ..ContextCompacted::default()
            })
        } else {
            plan(&self.messages, &self.compaction, &budget)
        };
        match planned {
            Ok(event) => Ok(ContextCompacted {
                estimated_before: estimate,
                refused: Some(refused),
                ..event
            }),
            Err(_) => Err(RunFailed {
                error: format!(
                    "the model provider refused the request as too large for the model's context \
                     window ({}), and nothing more of the conversation can be left out; set \
                     `context_tokens` in the agent file to the model's real window",
                    refused.message
                ),
            }),
        }
    }
}

/// The compaction that brings the request to the budget's target, or as close as it can
/// within the budget; `Err` with the smallest estimate reached when nothing fits.
pub(crate) fn plan(
    messages: &[Message],
    current: &Compaction,
    budget: &Budget,
) -> Result<ContextCompacted, u64> {
    let mut c = Candidate::new(messages, current, budget.fixed);
    let assistants: Vec<usize> = positions(messages, |m| matches!(m, Message::Assistant(_)));
    let last_user = positions(messages, |m| matches!(m, Message::User { .. }))
        .last()
        .copied()
        .unwrap_or(0);
    let last = assistants.last().copied().unwrap_or(0).max(last_user);
    let tail = match assistants.len().checked_sub(KEEP_RECENT) {
        Some(n) => assistants[n],
        None => assistants.first().copied().unwrap_or(messages.len()),
    }
    .max(1);
    let pinned = |i: usize| i == 0 || i == last_user || i >= last;
    let fits = |c: &Candidate, goal: u64| c.total() <= goal;

    'target: {
        for i in 1..tail {
            c.stub_outputs(i, STUB_MIN_BYTES);
            if fits(&c, budget.target) {
                break 'target;
            }
        }
        let mut i = 1;
        while i < tail {
            match c.drop_exchange(i, &pinned) {
                Some(_) if fits(&c, budget.target) => break 'target,
                Some(end) => i = end,
                None => i += 1,
            }
        }
    }
    'budget: {
        if fits(&c, budget.input) {
            break 'budget;
        }
        for i in tail..last {
            c.stub_outputs(i, 0);
            if fits(&c, budget.input) {
                break 'budget;
            }
        }
        let mut i = tail;
        while i < last {
            match c.drop_exchange(i, &pinned) {
                Some(_) if fits(&c, budget.input) => break 'budget,
                Some(end) => i = end,
                None => i += 1,
            }
        }
        for i in last..messages.len() {
            c.stub_outputs(i, 0);
        }
    }
    if !fits(&c, budget.input) || (c.new_stubs.is_empty() && !c.newly_dropped.contains(&true)) {
        return Err(c.total());
    }
    Ok(c.event(budget))
}

fn positions(messages: &[Message], pick: impl Fn(&Message) -> bool) -> Vec<usize> {
    (0..messages.len())
        .filter(|i| pick(&messages[*i]))
        .collect()
}

/// A compaction being planned, with the estimate of the request it would make.
struct Candidate<'a> {
    messages: &'a [Message],
    calls: HashMap<&'a str, &'a ToolCall>,
    stubbed: BTreeSet<String>,
    new_stubs: Vec<String>,
    dropped: Vec<bool>,
    newly_dropped: Vec<bool>,
    /// Each message's estimate as it would be sent (stubs applied).
    costs: Vec<u64>,
    /// The estimate of the kept messages, of the notes, and of the rest of the request.
    kept: u64,
    notes: u64,
    fixed: u64,
}

impl<'a> Candidate<'a> {
    fn new(messages: &'a [Message], current: &Compaction, fixed: u64) -> Self {
        let mut c = Self {
            messages,
            calls: calls_by_id(messages),
            stubbed: messages
                .iter()
                .filter_map(|m| match m {
                    Message::ToolResults { results } => Some(results),
                    _ => None,
                })
                .flatten()
                .filter(|r| current.is_stubbed(&r.call_id))
                .map(|r| r.call_id.clone())
                .collect(),
            new_stubs: Vec::new(),
            dropped: (0..messages.len()).map(|i| current.is_dropped(i)).collect(),
            newly_dropped: vec![false; messages.len()],
            costs: Vec::new(),
            kept: 0,
            notes: 0,
            fixed,
        };
        c.costs = (0..messages.len()).map(|i| c.cost(i)).collect();
        c.kept = (0..messages.len())
            .filter(|i| !c.dropped[*i])
            .map(|i| c.costs[i])
            .sum();
        c.recount_notes();
        c
    }

    fn total(&self) -> u64 {
        self.fixed + self.kept + self.notes
    }

    fn cost(&self, i: usize) -> u64 {
        match &self.messages[i] {
            Message::ToolResults { results } => {
                message_tokens(&Message::ToolResults {
                    results: Vec::new(),
                }) + results
                    .iter()
                    .map(|r| {
                        result_tokens(&stubbed(r, self.stubbed.contains(&r.call_id), &self.calls))
                    })
                    .sum::<u64>()
            }
            other => message_tokens(other),
        }
    }

    /// Stubs the outputs of message `i` longer than `min_bytes` (and than their stub).
    /// Whether it changed anything.
    fn stub_outputs(&mut self, i: usize, min_bytes: usize) -> bool {
        let Message::ToolResults { results } = &self.messages[i] else {
            return false;
        };
        if self.dropped[i] {
            return false;
        }
        let mut changed = false;
        for r in results {
            if self.stubbed.contains(&r.call_id) || r.content.len() <= min_bytes {
                continue;
            }
            let stub = stubbed(r, true, &self.calls);
            if stub.content.len() >= r.content.len() {
                continue;
            }
            self.stubbed.insert(r.call_id.clone());
            self.new_stubs.push(r.call_id.clone());
            changed = true;
        }
        if changed {
            let cost = self.cost(i);
            self.kept = self.kept - self.costs[i] + cost;
            self.costs[i] = cost;
        }
        changed
    }

    /// Leaves out the exchange starting at `i` (a message that is not tool results, with
    /// the tool results after it), unless it is pinned or already out. Where it ends.
    fn drop_exchange(&mut self, i: usize, pinned: &impl Fn(usize) -> bool) -> Option<usize> {
        if self.dropped[i] || pinned(i) || matches!(self.messages[i], Message::ToolResults { .. }) {
            return None;
        }
        let mut end = i + 1;
        while end < self.messages.len() && matches!(self.messages[end], Message::ToolResults { .. })
        {
            end += 1;
        }
        if end >= self.messages.len() {
            return None;
        }
        for j in i..end {
            self.dropped[j] = true;
            self.newly_dropped[j] = true;
            self.kept -= self.costs[j];
        }
        self.recount_notes();
        Some(end)
    }

    fn recount_notes(&mut self) {
        self.notes = runs(&self.dropped)
            .map(|(s, e)| {
                message_tokens(&Message::User {
                    text: note(&self.messages[s..e]),
                })
            })
            .sum();
    }

    fn event(&self, budget: &Budget) -> ContextCompacted {
        ContextCompacted {
            stubbed: self.new_stubs.clone(),
            dropped: runs(&self.newly_dropped)
                .map(|(s, e)| MessageRange {
                    start: s as u64,
                    end: e as u64,
                })
                .collect(),
            context_tokens: u32::try_from(budget.window).unwrap_or(u32::MAX),
            estimated_before: 0,
            estimated_after: self.total(),
            refused: None,
        }
    }
}

/// The maximal runs of `true` in `flags`, as `(start, end)`.
fn runs(flags: &[bool]) -> impl Iterator<Item = (usize, usize)> + '_ {
    let mut i = 0;
    std::iter::from_fn(move || {
        while i < flags.len() && !flags[i] {
            i += 1;
        }
        if i >= flags.len() {
            return None;
        }
        let start = i;
        while i < flags.len() && flags[i] {
            i += 1;
        }
        Some((start, i))
    })
}

#[cfg(test)]
#[path = "compact_tests.rs"]
mod tests;
