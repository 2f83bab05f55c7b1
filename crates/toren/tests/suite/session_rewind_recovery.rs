//! A session's rewind stopped in the middle of its restore, through the real binary (real
//! bubblewrap sandbox, real SQLite, a fake Anthropic server): `toren rewind SESSION` is
//! frozen while it writes the workspace back (its rewind turn recorded, the restore under
//! way), a cancel of the rewind turn is refused then (a restore is one unit, not left half
//! done), the process is killed, a cancel is still refused, and a pool worker
//! (`toren worker`) that claims the turn once its lease expires finishes it: the workspace
//! is byte for byte the test's copy at the step, and the session continues from there.

use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use toren_test_support::Reply;

use super::common::text;
use super::session_rewind::{
    Session, cancel_refused_restore_due, make, same, sent, session, show, tree,
};

/// Whether the restore has begun changing `ws`, which turn 3 wrecked (`wreck.txt` and
/// a dangling symlink left).
fn restore_begun(ws: &Path) -> bool {
    !ws.join("wreck.txt").exists()
        || ["repo", "docs", "tree", "data.bin"]
            .iter()
            .any(|p| ws.join(p).exists())
}

fn signal(pid: u32, signal: &str) {
    let status = Command::new("kill")
        .args([signal, &pid.to_string()])
        .status()
        .unwrap();
    assert!(status.success(), "kill {signal} {pid}");
}

#[test]
fn a_rewind_killed_mid_restore_is_not_cancelled_and_a_worker_finishes_it() {
    let Session {
        toren,
        fake,
        ws,
        after,
    } = session(10);
    // A short lease, so that a worker may claim the killed rewind's turn soon after.
    let toren = toren.env("TOREN_LEASE_TTL", "2s");
    assert!(
        ws.join("wreck.txt").exists() && !ws.join("tree").exists(),
        "turn 3 wrecked the workspace"
    );
    let turns = show(&toren, "s")["turns"].as_array().unwrap().clone();
    // The step: inside turn 1, right after its bash call's result (the workspace after
    // turn 1: 2,000 files and a git repository to write back).
    let done = toren
        .events(turns[0]["run"].as_str().unwrap())
        .iter()
        .find(|e| e["type"] == "tool_completed")
        .map(|e| e["seq"].as_u64().unwrap())
        .unwrap();
    let step = format!("1.{done}");
    let turns = turns.len();

    // `toren rewind s --to STEP`, frozen as soon as the workspace starts to change. The
    // restore comes after the rewind turn is recorded, so the turn exists then; a restore
    // that outran the check is tried again on a wrecked workspace.
    let mut caught = None;
    for attempt in 0..5 {
        let mut child = toren.spawn(&["rewind", "s", "--to", &step]);
        let deadline = Instant::now() + Duration::from_secs(300);
        while !restore_begun(&ws) {
            if let Some(exit) = child.try_wait().unwrap() {
                let out = child.wait_with_output().unwrap();
                panic!("the rewind exited ({exit}) first: {}", text(&out.stderr));
            }
            assert!(Instant::now() < deadline, "the restore never began");
            std::thread::sleep(Duration::from_millis(1));
        }
        signal(child.id(), "-STOP");
        let shown = show(&toren, "s");
        let rewind = &shown["turns"][turns + attempt];
        // Not ended: `queued` (its run has no event past `run_created` until completed).
        if rewind["status"] != "completed" {
            caught = Some((child, rewind["run"].as_str().unwrap().to_owned()));
            break;
        }
        // Finished already: wreck the workspace again and go on from the new turn.
        signal(child.id(), "-CONT");
        assert!(child.wait().unwrap().success());
        for entry in std::fs::read_dir(&ws).unwrap() {
            let path = entry.unwrap().path();
            if path.is_dir() && !path.is_symlink() {
                std::fs::remove_dir_all(&path).unwrap();
            } else {
                std::fs::remove_file(&path).unwrap();
            }
        }
        std::fs::write(ws.join("wreck.txt"), "oops\n").unwrap();
    }
    let (mut child, run) = caught.expect("no rewind was caught in the middle of its restore");
    let rewind_turn = show(&toren, "s")["turns"].as_array().unwrap().len();
    let partial = tree(&ws);
    eprintln!(
        "frozen mid-restore: {} of {} entries written back",
        partial.keys().filter(|k| after[1].contains_key(*k)).count(),
        after[1].len()
    );

    // A cancel while the restore runs is refused and writes nothing.
    let logged = toren.events(&run).len();
    cancel_refused_restore_due(&toren, &run);
    assert_eq!(toren.events(&run).len(), logged);

    // Killed there. Still not cancellable: the restore is due until someone finishes it.
    child.kill().unwrap();
    child.wait().unwrap();
    cancel_refused_restore_due(&toren, &run);
    assert_eq!(toren.events(&run).len(), logged);
    let open = show(&toren, "s")["turns"][rewind_turn - 1]["status"].clone();
    assert_eq!(open, "queued");

    // A pool worker claims the turn once the dead process's lease expires, restores the
    // workspace and completes the rewind.
    let log = toren.dir.path().join("worker.log");
    let mut worker = toren
        .command(&["worker"])
        .stdout(Stdio::null())
        .stderr(std::fs::File::create(&log).unwrap())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(300);
    loop {
        let shown = show(&toren, "s");
        if shown["turns"][rewind_turn - 1]["status"] != open {
            assert_eq!(
                shown["turns"][rewind_turn - 1]["status"],
                "completed",
                "{shown}\n{}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
            assert_eq!(
                shown["turns"][rewind_turn - 1]["rewind_to"],
                step.as_str(),
                "{shown}"
            );
            break;
        }
        if let Some(exit) = worker.try_wait().unwrap() {
            panic!(
                "the worker exited ({exit}): {}",
                std::fs::read_to_string(&log).unwrap_or_default()
            );
        }
        assert!(
            Instant::now() < deadline,
            "no worker finished the rewind: {}",
            std::fs::read_to_string(&log).unwrap_or_default()
        );
        std::thread::sleep(Duration::from_millis(100));
    }
    worker.kill().unwrap();
    worker.wait().unwrap();
    same(
        &after[1],
        &tree(&ws),
        "a killed rewind finished by a worker",
    );
    assert_eq!(
        toren.event_types(&run).last().map(String::as_str),
        Some("run_completed")
    );

    // The session continues from the step: the model is sent turn 1 up to its bash
    // result, not its answer, nor anything of turns 2 and 3.
    fake.push(Reply::text("after the worker's rewind"));
    let out = super::session_rewind::chat(&toren, &["chat", "s"], "and on\n");
    assert_eq!(text(&out.stdout).trim(), "after the worker's rewind");
    let (said, commands) = sent(&fake.requests().last().unwrap().body);
    assert_eq!(commands, [make(10).as_str()]);
    assert!(
        !said
            .iter()
            .any(|s| s == "model: made" || s.contains("turn two") || s.contains("turn three")),
        "{said:?}"
    );
    assert_eq!(said.last().unwrap(), "and on");
    same(&after[1], &tree(&ws), "after the next turn");
}
