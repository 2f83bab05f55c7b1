//! The helper's promises, checked on the host: exact exit codes, interleaved output, the
//! exact environment, process-group kill on timeout and at exit, bounded output, CPU
//! limits, concurrent requests, malformed requests, and what happens when stdin ends.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use toren_exec::protocol::{Finished, Response};

use super::harness::{Helper, alive, finished, gone};

#[test]
fn exit_codes_are_exact_and_a_signal_is_not_an_exit_code() {
    let mut helper = Helper::start();
    for (command, code) in [("true", 0), ("false", 1), ("exit 3", 3), ("exit 255", 255)] {
        let f = helper.run_command(command);
        assert_eq!(
            (f.exit_code, f.signal, f.timed_out),
            (Some(code), None, false)
        );
    }
    let f = helper.run_command("kill -9 $$");
    assert_eq!((f.exit_code, f.signal, f.timed_out), (None, Some(9), false));
}

#[test]
fn stdout_and_stderr_interleave_in_order() {
    let mut helper = Helper::start();
    let f = helper.run_command("echo one; echo two >&2; echo three");
    assert_eq!(f.output, "one\ntwo\nthree\n");
    assert!(!f.truncated);
}

#[test]
fn the_environment_and_directory_are_exactly_the_requested_ones() {
    let mut helper = Helper::start();
    let dir = tempfile::tempdir().unwrap();
    let mut req = helper.request("pwd; echo \"$GRANTED\" \"${HOME-unset}\" \"${USER-unset}\"");
    req.cwd = dir.path().display().to_string();
    req.env.push(("GRANTED".into(), "value with spaces".into()));
    let f = helper.run(req);
    assert_eq!(
        f.output,
        format!("{}\nvalue with spaces unset unset\n", dir.path().display())
    );
}

#[test]
fn a_timeout_kills_the_whole_process_group() {
    let mut helper = Helper::start();
    let dir = tempfile::tempdir().unwrap();
    let pidfile = dir.path().join("pid");
    let mut req = helper.request(&format!(
        "sleep 300 & echo $! > {}; echo started; sleep 300",
        pidfile.display()
    ));
    req.timeout_ms = 500;
    let started = Instant::now();
    let f = helper.run(req);
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        (f.exit_code, f.signal, f.timed_out, f.output.as_str()),
        (None, Some(9), true, "started\n")
    );
    let grandchild: i32 = std::fs::read_to_string(&pidfile)
        .unwrap()
        .trim()
        .parse()
        .unwrap();
    assert!(
        gone(grandchild),
        "the backgrounded sleep survived the timeout"
    );
}

#[test]
fn background_jobs_die_when_the_command_ends() {
    let mut helper = Helper::start();
    let f = helper.run_command("sleep 300 & echo $!");
    assert_eq!(f.exit_code, Some(0));
    let pid: i32 = f.output.trim().parse().unwrap();
    assert!(gone(pid), "the background job outlived its command");
}

#[test]
fn output_is_capped_to_its_head_and_tail() {
    let mut helper = Helper::start();
    let mut req =
        helper.request("echo first; head -c 5000000 /dev/zero | tr '\\0' x; echo; echo last");
    req.output_limit = 1000;
    let f = helper.run(req);
    assert!(f.truncated);
    assert!(f.output.starts_with("first\nxxx"), "{}", &f.output[..50]);
    assert!(f.output.ends_with("xxx\nlast\n"), "{}", f.output);
    assert!(f.output.contains("bytes of output cut"));
    assert!(f.output.len() < 1200, "{} bytes kept", f.output.len());
}

#[test]
fn a_cpu_limit_stops_a_busy_loop() {
    let mut helper = Helper::start();
    let mut req = helper.request("while :; do :; done");
    req.cpu_secs = Some(1);
    let started = Instant::now();
    let f = helper.run(req);
    assert!(!f.timed_out);
    assert_eq!(f.signal, Some(nix::sys::signal::Signal::SIGXCPU as i32));
    assert!(started.elapsed() < Duration::from_secs(10));
}

#[test]
fn requests_run_concurrently_and_answer_by_id() {
    let mut helper = Helper::start();
    let slow = helper.request("sleep 1; echo slow");
    let fast = helper.request("echo fast");
    helper.send(&slow);
    helper.send(&fast);
    let first = finished(helper.next_response());
    assert_eq!(
        (first.id.as_str(), first.output.as_str()),
        (fast.id.as_str(), "fast\n")
    );
    let second = finished(helper.response(&slow.id));
    assert_eq!(second.output, "slow\n");
}

#[test]
fn bad_requests_are_answered_and_the_helper_goes_on() {
    let mut helper = Helper::start();
    helper.send_raw(r#"{"id":"broken","command":42}"#);
    let Response::Failed { id, error } = helper.response("broken") else {
        panic!("a malformed request was not refused");
    };
    assert_eq!(id, "broken");
    assert!(error.starts_with("malformed request"), "{error}");

    let mut req = helper.request("true");
    req.cwd = "/does/not/exist".into();
    helper.send(&req);
    let Response::Failed { error, .. } = helper.response(&req.id) else {
        panic!("a missing working directory was not reported");
    };
    assert!(error.contains("No such file or directory"), "{error}");

    assert_eq!(helper.run_command("echo still here").output, "still here\n");
}

#[test]
fn closing_stdin_kills_running_commands_answers_them_and_exits() {
    let mut helper = Helper::start();
    let req = helper.request("echo $$; sleep 300");
    helper.send(&req);
    std::thread::sleep(Duration::from_millis(300));
    helper.close_stdin();
    let f: Finished = finished(helper.response(&req.id));
    assert_eq!((f.exit_code, f.signal), (None, Some(9)));
    let shell: i32 = f.output.trim().parse().unwrap();
    assert!(!alive(shell));
    assert!(helper.wait_exit().success());
}

#[test]
fn many_quick_commands_leave_no_zombies() {
    let mut helper = Helper::start();
    for _ in 0..50 {
        assert_eq!(helper.run_command("true & true").exit_code, Some(0));
    }
    let f = helper.run_command(
        "command -v ps >/dev/null || echo no-ps; ps -o stat= --ppid $PPID | grep -c Z || true",
    );
    assert_eq!(f.output.trim(), "0", "zombies among the helper's children");
}
