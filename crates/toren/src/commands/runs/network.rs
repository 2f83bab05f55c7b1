//! `runs show`'s network part: the hosts a person was asked about and what was
//! decided, and the connections the egress proxy journaled, tallied per host, port, method
//! and outcome. Everything from the sandbox is rendered with `toren-display`.

use std::collections::BTreeMap;

use serde_json::{Value, json};
use toren_agent::RunState;
use toren_display::visible;
use toren_protocol::{Event, EventKind, RunId};

/// Connections of one host, port, method and outcome.
#[derive(Default)]
struct Tally {
    count: u64,
    bytes_up: u64,
    bytes_down: u64,
    /// The last refusal's reason.
    reason: Option<String>,
}

fn tallies(events: &[Event]) -> BTreeMap<(String, u16, String, &'static str), Tally> {
    let mut tallies: BTreeMap<_, Tally> = BTreeMap::new();
    for event in events {
        let EventKind::EgressConnections(batch) = &event.kind else {
            continue;
        };
        for c in &batch.connections {
            let key = (c.host.clone(), c.port, c.method.clone(), c.outcome.as_str());
            let tally = tallies.entry(key).or_default();
            tally.count += 1;
            tally.bytes_up += c.bytes_up;
            tally.bytes_down += c.bytes_down;
            if c.reason.is_some() {
                tally.reason.clone_from(&c.reason);
            }
        }
    }
    tallies
}

/// `--json`'s `network`: `{hosts: [...], connections: [...]}`.
pub(super) fn json_of(state: &RunState, events: &[Event]) -> Value {
    let hosts: Vec<Value> = state
        .host_approvals()
        .map(|a| {
            json!({"id": a.request.id, "host": a.request.host, "port": a.request.port,
                "call_id": a.request.call_id, "command": a.request.command,
                "decision": match a.decision { Some(true) => "allowed", Some(false) => "denied", None => "pending" }})
        })
        .collect();
    let connections: Vec<Value> = tallies(events)
        .into_iter()
        .map(|((host, port, method, outcome), t)| {
            json!({"host": host, "port": port, "method": method, "outcome": outcome,
                "count": t.count, "bytes_up": t.bytes_up, "bytes_down": t.bytes_down,
                "reason": t.reason})
        })
        .collect();
    json!({"hosts": hosts, "connections": connections})
}

/// The lines `runs show` prints (none for a run that never used the proxy).
pub(super) fn lines(run: &RunId, state: &RunState, events: &[Event]) -> Vec<String> {
    let mut lines = Vec::new();
    for a in state.host_approvals() {
        let id = visible(&a.request.id);
        let what = visible(&a.request.summary()).into_owned();
        lines.push(match a.decision {
            Some(true) => format!("network    allowed for the run: {what}"),
            Some(false) => format!("network    denied for the run: {what}"),
            None => format!(
                "waiting    a decision on {what}: toren approve {run} {id} | toren deny {run} {id}"
            ),
        });
    }
    for ((host, port, method, outcome), t) in tallies(events) {
        let mut line = format!(
            "connection {} {}:{port} {outcome} ×{}",
            visible(&method),
            visible(&host),
            t.count
        );
        match &t.reason {
            Some(reason) if t.bytes_up == 0 && t.bytes_down == 0 => {
                line.push_str(&format!(": {}", visible(reason)));
            }
            _ => line.push_str(&format!(" (↑{} B ↓{} B)", t.bytes_up, t.bytes_down)),
        }
        lines.push(line);
    }
    lines
}
