//! Token usage, summed from the `usage` of each `model_responded`: a run's is folded into
//! [`RunState`] ([`RunState::usage`]); [`usage_of`] sums a log without folding it, and
//! [`total_usage`] sums several runs (a session's turns). Sums add field by field
//! ([`Usage`] implements `+` and `Sum`).

use toren_protocol::{Event, EventKind, Usage};

use crate::RunState;

impl RunState {
    /// The tokens the run's model answers used, summed.
    pub fn usage(&self) -> Usage {
        self.usage
    }
}

/// The usage recorded in `events` (one run's log, or any events), summed.
pub fn usage_of(events: &[Event]) -> Usage {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ModelResponded(r) => Some(r.usage),
            _ => None,
        })
        .sum()
}

/// The usage of several runs, e.g. the turns of a session.
pub fn total_usage<'a>(runs: impl IntoIterator<Item = &'a RunState>) -> Usage {
    runs.into_iter().map(RunState::usage).sum()
}
