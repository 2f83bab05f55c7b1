//! The fleet chaos test's checks, run once every run has completed and every process has
//! stopped: each run's log against the marker files, the database's audit of appends and
//! leases, the partitioned worker's end, the workers' own logs against the database.

use std::collections::{BTreeMap, BTreeSet};

use serde_json::Value;
use toren_protocol::{Event, EventKind};

use super::super::common::Toren;
use super::fleet::{Fleet, rows};
use super::{Partition, RUNS};

/// The run's log, read back from Postgres through `toren events`.
fn log(toren: &Toren, run: &str) -> Vec<Event> {
    toren
        .events(run)
        .into_iter()
        .map(|e| serde_json::from_value(e).unwrap())
        .collect()
}

/// A run completed and each of its calls ran as often as its attempts allow; returns how
/// many of its calls were started more than once.
pub(super) fn check_run(fleet: &Fleet, run: &str, agent: &str) -> usize {
    let events = log(&fleet.toren, run);
    let types: Vec<&str> = events.iter().map(|e| e.kind.name()).collect();
    assert!(
        matches!(
            events.last().map(|e| &e.kind),
            Some(EventKind::RunCompleted(_))
        ),
        "{run} ({agent}) completed: {types:?}"
    );
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    assert_eq!(
        seqs,
        (1..=events.len() as u64).collect::<Vec<_>>(),
        "{run}: gap-free"
    );

    // Label of each call (from the command the model sent), its attempts and completions.
    let mut label: BTreeMap<String, String> = BTreeMap::new();
    let mut attempts: BTreeMap<String, u32> = BTreeMap::new();
    let mut completions: BTreeMap<String, u32> = BTreeMap::new();
    // Calls whose command ran to its end (exit 0), not given up after MAX_TOOL_ATTEMPTS.
    let mut finished: BTreeSet<String> = BTreeSet::new();
    for e in &events {
        match &e.kind {
            EventKind::ModelResponded(m) => {
                for call in &m.message.tool_calls {
                    let command = call.arguments["command"].as_str().unwrap_or_default();
                    let l = command
                        .split("start-")
                        .nth(1)
                        .and_then(|r| r.split_whitespace().next())
                        .unwrap_or_default();
                    label.insert(call.id.clone(), l.to_owned());
                }
            }
            EventKind::ToolStarted(t) => *attempts.entry(t.call_id.clone()).or_default() += 1,
            EventKind::ToolCompleted(t) => {
                *completions.entry(t.call_id.clone()).or_default() += 1;
                if t.exit_code == Some(0) {
                    finished.insert(t.call_id.clone());
                }
            }
            _ => {}
        }
    }
    let expected = if agent == "slow" { 2 } else { 3 };
    assert_eq!(
        label.len(),
        expected,
        "{run}: every scripted call was made: {types:?}"
    );
    assert!(
        completions.values().all(|n| *n == 1) && completions.len() == expected,
        "{run}: every call completed once: {completions:?}"
    );
    let ws = toren_sandbox::workspace_path(&fleet.toren.sandbox_root(), run);
    let marks = std::fs::read_to_string(ws.join("calls.log")).unwrap_or_default();
    let count = |m: String| marks.lines().filter(|l| *l == m).count() as u32;
    let mut retried = 0;
    for (call, l) in &label {
        let tries = attempts.get(call).copied().unwrap_or(0);
        let (starts, ends) = (count(format!("start-{l}")), count(format!("end-{l}")));
        if tries <= 1 {
            assert_eq!(
                (starts, ends),
                (1, 1),
                "{run}: call {call} ({l}) started once in the log ran exactly once"
            );
        } else {
            // Each interrupted attempt may have run (and even ended: a SIGKILLed worker's
            // command can outlive it); a call given up after its last attempt was
            // interrupted need not have ended at all.
            retried += 1;
            let least = u32::from(finished.contains(call));
            assert!(
                (1..=tries).contains(&starts) && (least..=starts).contains(&ends),
                "{run}: call {call} ({l}): {starts} starts and {ends} ends for {tries} attempts"
            );
        }
    }
    retried
}

/// Every event a worker appended was appended while that worker's process held the run's
/// lease (the holder the append transaction saw is a process of the worker whose address
/// the insert came from); only `run_created` comes from the front.
pub(super) fn check_appends(fleet: &Fleet, db: &str) -> usize {
    let audit = rows(db, "SELECT * FROM fleet_audit_events ORDER BY id");
    assert!(!audit.is_empty());
    // Who was granted each (run, token): an append that ends the run releases its lease in
    // the same transaction, so the row the trigger reads may already have no holder; the
    // token it still carries names the lease the append was checked against.
    let mut granted: BTreeMap<(String, i64), String> = BTreeMap::new();
    for row in rows(
        db,
        "SELECT * FROM fleet_audit_leases WHERE lease_holder IS NOT NULL ORDER BY id",
    ) {
        granted
            .entry((
                row["run_id"].as_str().unwrap().to_owned(),
                row["lease_token"].as_i64().unwrap(),
            ))
            .or_insert_with(|| row["lease_holder"].as_str().unwrap().to_owned());
    }
    let mut by_workers = 0;
    for row in &audit {
        let what = format!("{} seq {} ({})", row["run_id"], row["seq"], row["kind"]);
        let Some(client) = row["client"].as_str() else {
            assert_eq!(
                row["kind"], "run_created",
                "{what}: only the front, on the socket"
            );
            continue;
        };
        let writer = fleet
            .worker_at(client)
            .unwrap_or_else(|| panic!("{what}: from {client}, no worker's address"));
        let token = row["lease_token"].as_i64().unwrap();
        let run = row["run_id"].as_str().unwrap().to_owned();
        let holder = row["lease_holder"]
            .as_str()
            .or_else(|| granted.get(&(run, token)).map(String::as_str))
            .unwrap_or_default();
        let held_by = fleet.holder(holder).map(|(k, _)| k);
        assert_eq!(
            held_by,
            Some(writer),
            "{what}: appended by worker {writer} under lease {token} of {holder:?}"
        );
        by_workers += 1;
    }
    by_workers
}

/// A run's lease passed from one holder to another only once the previous one had been
/// released, had expired, or its process had been SIGKILLed (a takeover of the dead).
pub(super) fn check_leases(fleet: &Fleet, db: &str) -> usize {
    let audit = rows(db, "SELECT * FROM fleet_audit_leases ORDER BY id");
    let mut by_run: BTreeMap<String, Vec<&Value>> = BTreeMap::new();
    for row in &audit {
        by_run
            .entry(row["run_id"].as_str().unwrap().to_owned())
            .or_default()
            .push(row);
    }
    let mut handovers = 0;
    for (run, rows) in &by_run {
        for pair in rows.windows(2) {
            let (before, after) = (pair[0], pair[1]);
            if after["lease_token"].as_i64() <= before["lease_token"].as_i64() {
                continue;
            }
            let Some(prev) = before["lease_holder"].as_str() else {
                continue; // released
            };
            let granted_us = after["at_us"].as_i64().unwrap();
            let expired = before["lease_expires_at"]
                .as_i64()
                .is_some_and(|ns| ns / 1_000 <= granted_us);
            let dead = fleet
                .holder(prev)
                .and_then(|(_, killed)| killed)
                .is_some_and(|killed| killed <= granted_us);
            handovers += 1;
            assert!(
                expired || dead,
                "{run}: lease {} granted to {} at {granted_us} us while {prev} held it until {} ns",
                after["lease_token"],
                after["lease_holder"],
                before["lease_expires_at"],
            );
        }
    }
    assert!(handovers > 0, "some lease changed hands while still held");
    handovers
}

/// The partitioned worker's slow command was killed (its end marker written once, by the
/// successor), it appended nothing after the cut to the run, and it said it lost the lease.
pub(super) fn check_partition(fleet: &Fleet, p: &Partition) {
    let ws = toren_sandbox::workspace_path(&fleet.toren.sandbox_root(), &p.run);
    let marks = std::fs::read_to_string(ws.join("calls.log")).unwrap();
    let ends = marks.lines().filter(|l| *l == "end-slow").count();
    // The successor's attempt ends the call once (unless, under load, it too was cut short
    // and the call given up); the cut-off attempt, had it not been killed, would have
    // written one more end inside the cut.
    let finished = log(&fleet.toren, &p.run).iter().any(|e| {
        matches!(&e.kind, EventKind::ToolCompleted(t) if t.call_id == p.call && t.exit_code == Some(0))
    });
    assert_eq!(
        ends,
        usize::from(finished),
        "{}: the cut-off attempt was killed: {marks}",
        p.run
    );
    let logs: String = fleet.workers[p.k]
        .generations
        .iter()
        .map(|g| std::fs::read_to_string(&g.log).unwrap_or_default())
        .collect();
    let said = logs
        .lines()
        .filter(|l| l.contains(&p.run))
        .any(|l| l.to_lowercase().contains("lease"));
    assert!(
        said,
        "worker {} logged that it lost {}'s lease (cut at {} us); its log:\n{logs}",
        p.k, p.run, p.cut_at_us
    );
}

/// The workers' own logs (`--log-format json`) agree with the database: every claim a
/// worker logged (run, holder, token) is a lease grant the database recorded for that
/// holder, and each run's claims came with ever higher tokens.
pub(super) fn check_worker_logs(fleet: &Fleet, db: &str) {
    let grants: BTreeSet<(String, String, i64)> = rows(
        db,
        "SELECT run_id, lease_holder, lease_token FROM fleet_audit_leases \
         WHERE lease_holder IS NOT NULL",
    )
    .iter()
    .map(|r| {
        (
            r["run_id"].as_str().unwrap().to_owned(),
            r["lease_holder"].as_str().unwrap().to_owned(),
            r["lease_token"].as_i64().unwrap(),
        )
    })
    .collect();
    let mut claims: BTreeMap<String, Vec<(jiff::Timestamp, i64)>> = BTreeMap::new();
    for worker in &fleet.workers {
        for g in &worker.generations {
            let log = std::fs::read_to_string(&g.log).unwrap_or_default();
            for line in log.lines() {
                let Ok(entry) = serde_json::from_str::<Value>(line) else {
                    continue;
                };
                if entry["fields"]["message"] != "claimed" {
                    continue;
                }
                let run = entry["span"]["run_id"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let holder = entry["fields"]["holder"]
                    .as_str()
                    .unwrap_or_default()
                    .to_owned();
                let token = entry["fields"]["token"].as_i64().unwrap_or(-1);
                assert!(
                    grants.contains(&(run.clone(), holder.clone(), token)),
                    "worker {} logged a claim the database never granted: {line}",
                    worker.k
                );
                claims.entry(run).or_default().push((
                    entry["timestamp"]
                        .as_str()
                        .and_then(|t| t.parse().ok())
                        .unwrap_or_else(|| panic!("a timestamp: {line}")),
                    token,
                ));
            }
        }
    }
    assert!(
        claims.len() >= RUNS,
        "every run's claim was logged: {}",
        claims.len()
    );
    for (run, mut list) in claims {
        list.sort();
        assert!(
            list.windows(2).all(|w| w[0].1 < w[1].1),
            "{run}: claims in time order come with higher tokens: {list:?}"
        );
    }
}
