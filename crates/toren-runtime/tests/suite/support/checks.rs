//! Checks on a run's log and waits for a condition (a file, a process gone, a future)
//! with a deadline, instead of sleeps.

use std::collections::BTreeMap;
use std::future::Future;
use std::time::{Duration, Instant};

use toren_protocol::{Event, EventKind, ToolCompleted};

use super::WAIT;

/// Waits until `cond` holds, checking every 10 ms; fails the test after [`WAIT`].
pub(crate) async fn until(what: &str, mut cond: impl FnMut() -> bool) {
    let deadline = Instant::now() + WAIT;
    while !cond() {
        assert!(Instant::now() < deadline, "{what}: not within {WAIT:?}");
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
}

/// Awaits `future`, failing the test after [`WAIT`] with `what`.
pub(crate) async fn within<T>(what: &str, future: impl Future<Output = T>) -> T {
    tokio::time::timeout(WAIT, future)
        .await
        .unwrap_or_else(|_| panic!("{what}: not within {WAIT:?}"))
}

/// The `type` of each event.
pub(crate) fn types(events: &[Event]) -> Vec<&'static str> {
    events.iter().map(|e| e.kind.name()).collect()
}

/// Asserts that the seqs are 1, 2, 3, … with no gap.
pub(crate) fn assert_gap_free(events: &[Event]) {
    let seqs: Vec<u64> = events.iter().map(|e| e.seq).collect();
    let expected: Vec<u64> = (1..=events.len() as u64).collect();
    assert_eq!(seqs, expected, "{:?}", types(events));
}

/// Each call's recorded result, by call id (the last one where a call has several).
pub(crate) fn results(events: &[Event]) -> BTreeMap<String, ToolCompleted> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolCompleted(c) => Some((c.call_id.clone(), c.clone())),
            _ => None,
        })
        .collect()
}

/// Where in `events` the first event matching `pred` is.
pub(crate) fn position(events: &[Event], pred: impl Fn(&EventKind) -> bool) -> Option<usize> {
    events.iter().position(|e| pred(&e.kind))
}

/// Pids and command lines of the host's processes (other than this test) that contain
/// `marker`.
pub(crate) fn processes_with(marker: &str) -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter(|pid| *pid != std::process::id())
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            let line = String::from_utf8_lossy(&raw).replace('\0', " ");
            line.contains(marker).then_some((pid, line))
        })
        .collect()
}
