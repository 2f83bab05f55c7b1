//! The two scripted agents of the `concurrency` benchmark and what each run's log must
//! hold. `tool` makes one bash call without asking (`approval: never`) and answers;
//! `ask` has `sandbox: true`, so its one bash call waits for a person's approval first.
//! [`problems`] is a pure function over the decoded events, tested below.

use toren_protocol::{Event, EventKind};

/// The agent whose runs make a tool call at once.
pub(crate) const TOOL: &str = "tool";
/// The agent whose runs wait for an approval.
pub(crate) const ASK: &str = "ask";

/// What a run of `agent` prints in its call and answers at the end.
fn script(agent: &str) -> (&'static str, &'static str, &'static str) {
    if agent == ASK {
        ("echo approved-ok", "approved-ok\n", "approved done")
    } else {
        ("echo tool-ok", "tool-ok\n", "tool done")
    }
}

/// The agents directory: both agents and their scripts.
pub(crate) fn files() -> Vec<(String, String)> {
    let mut files = Vec::new();
    for (agent, sandbox) in [
        (TOOL, "sandbox:\n  approval: never\n"),
        (ASK, "sandbox: true\n"),
    ] {
        let (command, _, answer) = script(agent);
        files.push((
            format!("{agent}.script.yaml"),
            format!(
                "turns:\n  - tool_calls:\n      - bash: {{command: \"{command}\"}}\n  - text: \"{answer}\"\n"
            ),
        ));
        files.push((
            format!("{agent}.yaml"),
            format!("name: {agent}\nmodel: scripted/{agent}.script.yaml\n{sandbox}"),
        ));
    }
    files
}

/// The input of run `index` of `agent`: distinct, so a log shown for another run is caught.
pub(crate) fn input(agent: &str, index: usize) -> String {
    format!("{agent} run {index}")
}

/// Every way `events`, the log of run `run_id` of `agent` given `input`, is wrong; empty
/// when it is correct.
pub(crate) fn problems(run_id: &str, agent: &str, input: &str, events: &[Event]) -> Vec<String> {
    let (_, prints, answer) = script(agent);
    let mut found = Vec::new();
    let Some((first, last)) = events.first().zip(events.last()) else {
        return vec!["the log is empty".to_owned()];
    };
    if let Some((i, e)) = events
        .iter()
        .enumerate()
        .find(|(i, e)| e.seq != *i as u64 + 1)
    {
        found.push(format!(
            "event {} has seq {} (seqs must not skip)",
            i + 1,
            e.seq
        ));
    }
    if let Some(other) = events.iter().find(|e| e.run_id.as_str() != run_id) {
        found.push(format!("seq {} belongs to {}", other.seq, other.run_id));
    }
    match &first.kind {
        EventKind::RunCreated(c) if c.input == input => {}
        other => found.push(format!(
            "the first event is {} not run_created({input:?})",
            other.name()
        )),
    }
    match &last.kind {
        EventKind::RunCompleted(done) if done.output == answer => {}
        EventKind::RunFailed(failed) => found.push(format!("the run failed: {}", failed.error)),
        other => found.push(format!(
            "the last event is {}, not run_completed({answer:?})",
            other.name()
        )),
    }
    let seq_of = |pred: &dyn Fn(&EventKind) -> bool| -> Vec<u64> {
        events
            .iter()
            .filter(|e| pred(&e.kind))
            .map(|e| e.seq)
            .collect()
    };
    let requested = seq_of(&|k| matches!(k, EventKind::ApprovalRequested(_)));
    let approved = seq_of(&|k| matches!(k, EventKind::ApprovalDecided(d) if d.approved));
    let started = seq_of(&|k| matches!(k, EventKind::ToolStarted(s) if s.attempt == 1));
    let all_started = seq_of(&|k| matches!(k, EventKind::ToolStarted(_)));
    let completed: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolCompleted(c) => Some((e.seq, c)),
            _ => None,
        })
        .collect();
    if started.len() != 1 || all_started.len() != 1 || completed.len() != 1 {
        found.push(format!(
            "{} tool_started and {} tool_completed, not one of each (attempt 1)",
            all_started.len(),
            completed.len()
        ));
    }
    if let (Some(start), Some((done_at, done))) = (started.first(), completed.first()) {
        if done_at < start {
            found.push("tool_completed comes before tool_started".to_owned());
        }
        if done.is_error || done.exit_code != Some(0) || !done.output.starts_with(prints) {
            found.push(format!(
                "the call's result is {:?} (exit code {:?}), not {prints:?}",
                done.output, done.exit_code
            ));
        }
        if agent == ASK {
            match (requested.as_slice(), approved.as_slice()) {
                ([asked], [yes]) if asked < yes && yes < start => {}
                _ => found.push(format!(
                    "approval_requested at {requested:?} and approved at {approved:?}, not once \
                     each before tool_started (seq {start})"
                )),
            }
        }
    }
    if agent != ASK && !(requested.is_empty() && approved.is_empty()) {
        found.push("a run of the agent that never asks has approval events".to_owned());
    }
    found
}

#[cfg(test)]
#[path = "check_tests.rs"]
mod tests;
