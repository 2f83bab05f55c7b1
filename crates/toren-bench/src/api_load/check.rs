//! Whether a run's log is the one its agent must have written: `run_created` first with
//! the run's own input, seqs contiguous from 1, every event of this run, the one tool call
//! started once (attempt 1) and completed once with the command's output, and
//! `run_completed` last with the expected answer. A pure function over the decoded events,
//! so each way a log can be wrong is tested here.

use toren_protocol::{Event, EventKind};

/// What a correct log holds.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Expected<'a> {
    /// The run's input, as recorded in `run_created`.
    pub(crate) input: &'a str,
    /// The one tool call the run makes, if any.
    pub(crate) call: Option<ExpectedCall<'a>>,
    /// The final answer in `run_completed`.
    pub(crate) answer: &'a str,
}

#[derive(Clone, Copy, Debug)]
pub(crate) struct ExpectedCall<'a> {
    pub(crate) tool: &'a str,
    /// What the tool's output starts with (the command's own output).
    pub(crate) output: &'a str,
}

/// Every way `events`, the log of run `run_id`, differs from `expected`; empty when it is
/// correct.
pub(crate) fn problems(run_id: &str, events: &[Event], expected: &Expected<'_>) -> Vec<String> {
    let mut found = Vec::new();
    let Some((first, last)) = events.first().zip(events.last()) else {
        return vec!["the log is empty".to_owned()];
    };
    for (i, event) in events.iter().enumerate() {
        let want = i as u64 + 1;
        if event.seq != want {
            found.push(format!(
                "event {want} has seq {} (seqs must run 1, 2, 3, … without gaps)",
                event.seq
            ));
            break;
        }
    }
    if let Some(other) = events.iter().find(|e| e.run_id.as_str() != run_id) {
        found.push(format!(
            "seq {} belongs to {}, not to this run",
            other.seq, other.run_id
        ));
    }
    match &first.kind {
        EventKind::RunCreated(created) if created.input == expected.input => {}
        EventKind::RunCreated(created) => found.push(format!(
            "run_created has input {:?}, not {:?}",
            created.input, expected.input
        )),
        other => found.push(format!(
            "the first event is {}, not run_created",
            other.name()
        )),
    }
    match &last.kind {
        EventKind::RunCompleted(done) if done.output == expected.answer => {}
        EventKind::RunCompleted(done) => found.push(format!(
            "run_completed answers {:?}, not {:?}",
            done.output, expected.answer
        )),
        EventKind::RunFailed(failed) => {
            found.push(format!("the run failed: {}", failed.error));
        }
        other => found.push(format!(
            "the last event is {}, not run_completed",
            other.name()
        )),
    }
    found.extend(call_problems(events, expected.call));
    found
}

/// What is wrong with the run's tool calls: exactly `call` (or none) must have been
/// started once and completed once, in that order, successfully.
fn call_problems(events: &[Event], call: Option<ExpectedCall<'_>>) -> Vec<String> {
    let started: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolStarted(s) => Some((e.seq, s)),
            _ => None,
        })
        .collect();
    let completed: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolCompleted(c) => Some((e.seq, c)),
            _ => None,
        })
        .collect();
    let Some(call) = call else {
        if started.is_empty() && completed.is_empty() {
            return Vec::new();
        }
        return vec![format!(
            "{} tool_started and {} tool_completed, but the agent makes no tool call",
            started.len(),
            completed.len()
        )];
    };
    let ([(started_at, started)], [(completed_at, completed)]) =
        (started.as_slice(), completed.as_slice())
    else {
        return vec![format!(
            "{} tool_started and {} tool_completed, not one of each",
            started.len(),
            completed.len()
        )];
    };
    let mut found = Vec::new();
    if started.tool != call.tool || started.attempt != 1 {
        found.push(format!(
            "tool_started is {} attempt {}, not {} attempt 1",
            started.tool, started.attempt, call.tool
        ));
    }
    if completed.call_id != started.call_id || completed_at < started_at {
        found.push(format!(
            "tool_completed (seq {completed_at}, {}) does not follow tool_started (seq \
             {started_at}, {})",
            completed.call_id, started.call_id
        ));
    }
    if completed.is_error
        || completed.exit_code != Some(0)
        || !completed.output.starts_with(call.output)
    {
        found.push(format!(
            "the call's result is {:?} (error: {}, exit code {:?}), not {:?} with exit code 0",
            completed.output, completed.is_error, completed.exit_code, call.output
        ));
    }
    found
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
