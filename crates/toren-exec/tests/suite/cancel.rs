//! Cancelling a request: its whole process group is killed at once (not at its timeout)
//! and it is still answered, as killed; a cancel that arrives before the command was even
//! spawned still kills it; a cancel of an unknown id is ignored.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use toren_exec::protocol::{Cancel, write_line};

use super::harness::{Helper, finished, gone};

fn cancel(helper: &mut Helper, id: &str) {
    let line = serde_json::to_string(&Cancel { cancel: id.into() }).unwrap();
    helper.send_raw(&line);
}

#[test]
fn a_cancelled_command_and_its_group_are_killed_and_answered() {
    let mut helper = Helper::start();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let req = helper.request(&format!(
        "sleep 300 & echo $! > {}.tmp; mv {0}.tmp {0}; sleep 300",
        pidfile.display()
    ));
    helper.send(&req);
    let deadline = Instant::now() + Duration::from_secs(10);
    while !pidfile.exists() {
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(10));
    }
    let started = Instant::now();
    cancel(&mut helper, &req.id);
    let f = finished(helper.response(&req.id));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!((f.exit_code, f.signal, f.timed_out), (None, Some(9), false));
    let job: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(gone(job), "the background job survived the cancel");
}

#[test]
fn a_cancel_right_behind_its_request_kills_the_command_when_it_starts() {
    let mut helper = Helper::start();
    let req = helper.request("sleep 300");
    // Both lines in one write: the cancel is read before the command's thread spawns it.
    let mut both = Vec::new();
    write_line(&mut both, &req).unwrap();
    write_line(
        &mut both,
        &Cancel {
            cancel: req.id.clone(),
        },
    )
    .unwrap();
    helper.send_raw(String::from_utf8(both).unwrap().trim_end());
    let started = Instant::now();
    let f = finished(helper.response(&req.id));
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!((f.exit_code, f.signal), (None, Some(9)));
}

#[test]
fn cancels_of_unknown_or_finished_requests_are_ignored() {
    let mut helper = Helper::start();
    let done = helper.run_command("echo one");
    cancel(&mut helper, &done.id);
    cancel(&mut helper, "never-sent");
    let f = helper.run_command("echo two");
    assert_eq!((f.exit_code, f.output.as_str()), (Some(0), "two\n"));
}
