//! Runaway commands: an endless loop, a fork bomb, gigabytes of output, daemons that try to
//! outlive their call, a memory hog, memory-backed filesystems filled, a full workspace
//! disk. Each is stopped by a timeout or a limit, the runtime stays responsive and small,
//! the run goes on, and nothing the run started is left behind. The file tools, which run
//! in the runtime itself, cannot be made to allocate without bound either: an edit whose
//! result would pass the file size limit — a 10 MiB file with every byte replaced by 400
//! bytes, or doubled — is refused before anything is built.

use std::collections::BTreeMap;
use std::time::{Duration, SystemTime};

use pretty_assertions::assert_eq;
use serde_json::json;

use super::harness::{self, Call, bash, bash_for, call, gone, peak_rss_kib};
use super::{Backend, note, report, report_not_applicable};
use crate::suite::common::text;

/// The toren process may use at most this much memory, however much a command prints.
const MAX_RSS_KIB: u64 = 150 * 1024;

const SANDBOX: &str = "  approval: never\n  limits: {memory: 256MiB, pids: 64}\n";

/// (probe, what its output must show; `|` separates alternatives).
fn probes(backend: &Backend) -> Vec<(Call, &'static str)> {
    // An E2B VM's /tmp is on its own disk and its /dev/shm in its own memory: filling them
    // fills the VM (bounded by its size), so there the probes only have to run. Its root
    // is the VM's own, not writable by the default user.
    let tmp = if backend.applies("memory-backed /tmp") {
        "No space left on device|memory limit of 256 MiB"
    } else {
        "tmp="
    };
    let shm = if backend.applies("/dev/shm bounded") {
        "No space left on device"
    } else {
        "shm="
    };
    // 2 GB through a remote sandbox's stream (base64 over HTTP) takes minutes; a tenth of
    // it shows the same cap and the same bound on the runtime's memory.
    let flood = if backend.applies("flood of 2 GB") {
        "yes | head -c 2000000000; echo the-end"
    } else {
        "yes | head -c 200000000; echo the-end"
    };
    // Where a fork bomb cannot be bounded by Toren, a harmless stand-in keeps the numbering.
    let bomb = if backend.applies("fork bomb") {
        bash_for(
            "bomb_4c2a() { bomb_4c2a | bomb_4c2a & }; bomb_4c2a; sleep 3",
            3,
        )
    } else {
        bash_for("sleep 5", 3)
    };
    let root = if backend.applies("read-only root") {
        "Read-only file system"
    } else {
        "Read-only file system|Permission denied"
    };
    vec![
        // 0: an endless loop with a child: the timeout kills both.
        (
            bash_for("sleep 977 & while :; do :; done", 2),
            "[timed out: the command and everything it started were killed after 2 s",
        ),
        // 1: a fork bomb meets the process limit and the timeout.
        (bomb, "[timed out"),
        // 2: right after it, the next command runs at once.
        (bash("echo alive"), "alive\n[exit code: 0]"),
        // 3: gigabytes of output.
        (bash_for(flood, 60), "[output truncated"),
        // 4: daemons of every kind, and one that would write later.
        (
            bash(
                "sleep 971 & nohup sleep 972 >/dev/null 2>&1 & setsid sleep 973 & \
                 (setsid nohup sleep 974 >/dev/null 2>&1 &); \
                 setsid sh -c 'sleep 2; touch late.txt' >/dev/null 2>&1 & echo started",
            ),
            "started\n[exit code: 0]",
        ),
        // 5: the window in which a surviving daemon would show.
        (bash("sleep 3; echo waited"), "waited"),
        // 6: a memory hog.
        (
            bash_for(
                "x=$(head -c 600000000 /dev/zero | tr '\\0' a); echo survived ${#x}",
                30,
            ),
            // Contained either way: the hog's subshell dies (local: a cgroup per call), or
            // the whole command is killed (docker: one memory limit for the container).
            "[exit code: |[killed by a signal]",
        ),
        // 7-9: memory-backed and read-only filesystems cannot be filled.
        (
            bash("head -c 600000000 /dev/zero > /tmp/fill; echo tmp=$?; rm -f /tmp/fill"),
            tmp,
        ),
        (
            bash("head -c 100000000 /dev/zero > /dev/shm/fill; echo shm=$?; rm -f /dev/shm/fill"),
            shm,
        ),
        (
            bash("echo x > /fill; echo x > /dev/fill; echo root-and-dev-checked"),
            root,
        ),
        // 10: reading stdin ends at once.
        (bash("read line; echo read-exit=$?"), "read-exit=1"),
        // 11: binary noise comes back as text.
        (
            bash("head -c 100000 /dev/urandom; echo"),
            "[output truncated",
        ),
    ]
}

pub(crate) fn suite(backend: &Backend) {
    let toren = harness::toren_for(backend);
    if harness::fake().is_some() && !toren_test_support::e2b::sandboxes_bounded() {
        // Without a VM's bounds a fork bomb and a memory hog would hit this host.
        return report_not_applicable(
            backend,
            "runaway",
            "this host cannot give the local E2B service's sandboxes a cgroup of their own \
             (a VM's memory and process table), so the bomb and the hog would hit the host",
        );
    }
    let probes = probes(backend);
    let calls: Vec<Call> = probes.iter().map(|(c, _)| c.clone()).collect();
    harness::agent(&toren, "wild", SANDBOX, &[calls]);

    let mut peak = 0;
    let mut sightings: BTreeMap<String, SystemTime> = BTreeMap::new();
    let ran = harness::run_watching(&toren, "wild", |pid| {
        peak = peak.max(peak_rss_kib(pid).unwrap_or(0));
        for marker in ["sleep 971", "sleep 972", "sleep 973", "sleep 974"] {
            if !harness::processes_with(marker).is_empty() {
                sightings.insert(marker.to_owned(), SystemTime::now());
            }
        }
    });
    ran.assert_completed();
    let mut count = 0;
    for (i, (probe, proof)) in probes.iter().enumerate() {
        let result = ran.result(i);
        assert!(
            proof.split('|').any(|p| result.output.contains(p)),
            "{probe:?}: expected {proof:?} in:\n{}\nstderr:\n{}",
            &result.output[..result.output.len().min(3000)],
            text(&ran.out.stderr)
        );
        count += 1;
    }

    // The loop's child and the bomb are gone; the daemons died with their call.
    assert_eq!(gone("sleep 977", Duration::from_secs(2)), vec![]);
    assert_eq!(gone("bomb_4c2a", Duration::from_secs(2)), vec![]);
    let daemons_done = completed_at(&ran.events, "call_5");
    for (marker, seen) in &sightings {
        let late = seen.duration_since(daemons_done).unwrap_or_default();
        assert!(
            late < Duration::from_millis(500),
            "{marker} outlived its call by {late:?}"
        );
    }
    assert!(
        !harness::workspace(&toren, &ran.run)
            .join("late.txt")
            .exists()
    );
    count += 1;

    // The fork bomb was contained and the next call was quick.
    let alive = elapsed(&ran.events, "call_3");
    assert!(
        alive < Duration::from_secs(2),
        "echo after the bomb took {alive:?}"
    );
    let limits = toren_sandbox_enforcement();
    if limits.0 && backend.applies("limit notes") {
        let bomb = &ran.result(1).output;
        assert!(bomb.contains("limit of 64 processes"), "{bomb}");
        let hog = &ran.result(6).output;
        assert!(hog.contains("memory limit of 256 MiB"), "{hog}");
    } else if !limits.0 {
        report_not_applicable(backend, "limit notes", &limits.1);
    }
    assert!(!ran.result(6).output.contains("survived"));
    count += 1;

    // Output was capped, and so was the runtime's memory.
    let flood_2gb = !backend
        .not_applicable
        .iter()
        .any(|(name, _)| *name == "flood of 2 GB");
    let flood = &ran.result(3).output;
    assert!(flood.len() < 40_000, "{} bytes came back", flood.len());
    assert!(flood.contains("the-end"), "the tail is kept");
    assert!(
        peak > 0 && peak < MAX_RSS_KIB,
        "toren's peak RSS was {peak} KiB"
    );
    note(
        backend,
        &format!(
            "toren's peak RSS while a command printed {}: {} MiB",
            if flood_2gb { "2 GB" } else { "200 MB" },
            peak / 1024
        ),
    );
    count += 1;

    report(backend, "runaway", count);
}

/// Whether limit notes can be expected (per-call cgroups), or why not.
fn toren_sandbox_enforcement() -> (bool, String) {
    use toren_sandbox::{Enforcement, LocalBackend, LocalSettings};
    let dir = tempfile::tempdir().unwrap();
    let backend = LocalBackend::new(LocalSettings {
        sandbox_root: dir.path().to_owned(),
        bwrap: None,
    });
    let e = backend.enforcement();
    let cgroup = |m| matches!(m, Enforcement::CgroupV1 | Enforcement::CgroupV2);
    (
        cgroup(e.pids) && cgroup(e.memory),
        format!("this host enforces limits by {e}; the kernel reports limit hits only for cgroups"),
    )
}

/// When `call`'s `tool_completed` was recorded.
fn completed_at(events: &[serde_json::Value], call: &str) -> SystemTime {
    let at = events
        .iter()
        .find(|e| e["type"] == "tool_completed" && e["call_id"] == call)
        .and_then(|e| e["at"].as_str())
        .unwrap();
    SystemTime::UNIX_EPOCH + unix_time(at)
}

/// How long `call` took, from `tool_started` to `tool_completed`.
fn elapsed(events: &[serde_json::Value], call: &str) -> Duration {
    let at = |kind: &str| {
        let at = events
            .iter()
            .find(|e| e["type"] == kind && e["call_id"] == call)
            .and_then(|e| e["at"].as_str())
            .unwrap();
        unix_time(at)
    };
    at("tool_completed").saturating_sub(at("tool_started"))
}

/// An RFC 3339 UTC timestamp (`2026-03-14T09:26:53.589793238Z`) as time since the epoch.
fn unix_time(at: &str) -> Duration {
    let (date, time) = at.trim_end_matches('Z').split_once('T').unwrap();
    let d: Vec<i64> = date.split('-').map(|p| p.parse().unwrap()).collect();
    let (y, m, day) = (d[0] - i64::from(d[1] <= 2), d[1], d[2]);
    // Days from the civil date (Howard Hinnant's algorithm).
    let era = y.div_euclid(400);
    let yoe = y - era * 400;
    let doy = (153 * (m + if m > 2 { -3 } else { 9 }) + 2) / 5 + day - 1;
    let days = era * 146_097 + yoe * 365 + yoe / 4 - yoe / 100 + doy - 719_468;
    let t: Vec<f64> = time.split(':').map(|p| p.parse().unwrap()).collect();
    let secs = days as f64 * 86_400.0 + t[0] * 3600.0 + t[1] * 60.0 + t[2];
    Duration::from_secs_f64(secs)
}

/// A command that fills the workspace's disk fails inside the sandbox; the run, the event
/// log and the database (on another disk) are unharmed, and freeing space lets work go on.
pub(crate) fn disk_fill(backend: &Backend) {
    if !backend.applies("disk fill") {
        return;
    }
    let toren = harness::toren_for(backend);
    if harness::fake().is_some() {
        // Under e2b the workspace is the VM's disk: a local service of the test's own makes
        // it 20 MiB (a tmpfs, unmounted when the service is dropped at the end).
        let fake = toren_test_support::e2b::FakeE2b::start(harness::E2B_KEY).unwrap();
        fake.set_disk_size(Some(20 * 1024 * 1024));
        let toren = toren
            .env("E2B_API_URL", &fake.api_url())
            .env("E2B_SANDBOX_URL", &fake.sandbox_url());
        return fill_disk(backend, &toren);
    }
    let root = toren.dir.path().join("small-disk");
    std::fs::create_dir_all(&root).unwrap();
    let toren = toren.env("TOREN_SANDBOX_ROOT", root.to_str().unwrap());
    // Declared after `toren`, so it unmounts before the temporary directory is removed.
    let _mounted = match std::process::Command::new("mount")
        .args(["-t", "tmpfs", "-o", "size=20m", "tmpfs"])
        .arg(&root)
        .output()
    {
        Ok(out) if out.status.success() => Unmount(root.clone()),
        Ok(out) => {
            let why = format!("cannot mount a small tmpfs: {}", text(&out.stderr).trim());
            return report_not_applicable(backend, "disk fill", &why);
        }
        Err(e) => {
            return report_not_applicable(backend, "disk fill", &format!("no `mount`: {e}"));
        }
    };
    fill_disk(backend, &toren);
}

/// Fills the workspace's 20 MiB disk, writes, frees and writes again.
fn fill_disk(backend: &Backend, toren: &crate::suite::common::Toren) {
    let calls = vec![
        bash("head -c 50000000 /dev/zero > fill.bin; echo fill=$?"),
        call(
            "write_file",
            json!({"path": "more.txt", "content": "x".repeat(100_000)}),
        ),
        bash("rm fill.bin; echo freed"),
        call(
            "write_file",
            json!({"path": "after.txt", "content": "room again\n"}),
        ),
    ];
    harness::agent(toren, "filler", "  approval: never\n", &[calls]);
    let ran = harness::run(toren, "filler");
    ran.assert_completed();
    let fill = ran.result(0);
    assert!(
        fill.output.contains("No space left on device") && fill.output.contains("fill=1"),
        "{fill:?}"
    );
    let more = ran.result(1);
    assert!(
        more.is_error && more.output.contains("disk is full"),
        "{more:?}"
    );
    assert!(ran.result(2).output.contains("freed"));
    assert!(!ran.result(3).is_error, "{:?}", ran.result(3));
    // The log is whole: gap-free and ending in the run's completion.
    let seqs: Vec<u64> = ran
        .events
        .iter()
        .map(|e| e["seq"].as_u64().unwrap())
        .collect();
    assert_eq!(seqs, (1..=seqs.len() as u64).collect::<Vec<_>>());
    assert_eq!(ran.events.last().unwrap()["type"], "run_completed");
    assert_eq!(toren.show(&ran.run)["status"], "completed");
    report(backend, "runaway (disk fill)", 4);
}

/// Unmounts the test's tmpfs when dropped.
struct Unmount(std::path::PathBuf);

impl Drop for Unmount {
    fn drop(&mut self) {
        let _ = std::process::Command::new("umount")
            .arg("-l")
            .arg(&self.0)
            .status();
    }
}

/// `edit_file` runs in the runtime: a replace_all that would multiply a file at the size
/// limit is refused from the match count alone, and the runtime stays small; the file is
/// untouched and the run goes on. (An oversized `write_file` is a `bad_input` probe: its
/// 10 MiB argument alone takes the runtime past this test's memory bound.)
pub(crate) fn edit_bomb(backend: &Backend) {
    const LIMIT: usize = 10 * 1024 * 1024;
    let toren = harness::toren_for(backend);
    let replace_all = |new: &str| {
        call(
            "edit_file",
            json!({"path": "a.txt", "old_string": "a", "new_string": new, "replace_all": true}),
        )
    };
    let calls = vec![
        bash(&format!(
            "head -c {LIMIT} /dev/zero | tr '\\0' a > a.txt; wc -c < a.txt"
        )),
        replace_all(&"x".repeat(400)),
        replace_all("aa"),
        bash("wc -c < a.txt; echo still-here"),
    ];
    harness::agent(&toren, "bomber", "  approval: never\n", &[calls]);
    let mut peak = 0;
    let ran = harness::run_watching(&toren, "bomber", |pid| {
        peak = peak.max(peak_rss_kib(pid).unwrap_or(0));
    });
    ran.assert_completed();
    assert!(ran.result(0).output.starts_with(&format!("{LIMIT}\n")));
    let refused = [
        (1, format!("would make `a.txt` {} bytes", LIMIT * 400)),
        (2, format!("would make `a.txt` {} bytes", LIMIT * 2)),
    ];
    for (index, message) in &refused {
        let result = ran.result(*index);
        assert!(
            result.is_error && result.output.contains(message.as_str()),
            "call {index}: expected {message:?}, got {result:?}"
        );
    }
    let after = &ran.result(3).output;
    assert!(
        after.starts_with(&format!("{LIMIT}\n")) && after.contains("still-here"),
        "{after}"
    );
    assert!(
        peak > 0 && peak < MAX_RSS_KIB,
        "toren's peak RSS was {peak} KiB"
    );
    note(
        backend,
        &format!(
            "toren's peak RSS while edits asked for a 4 GB file: {} MiB",
            peak / 1024
        ),
    );
    report(backend, "runaway (file tools)", refused.len() + 2);
}
