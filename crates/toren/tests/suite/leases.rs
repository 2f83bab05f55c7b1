//! Who may take a live run's lease, through the real binary: a `toren resume` in another
//! PID namespace (a container, a pod, `unshare`) cannot see the holder's processes and must
//! not take the lease while the holder lives; a holder in a child PID namespace is not
//! judged from the parent either; a holder that was killed but not yet reaped (a zombie)
//! is gone, and `toren resume` takes over at once.

use std::path::Path;
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;

use super::common::{Toren, read, text};

/// A long command that says once that it started; a re-run would say it again.
const LONG: &str = r#"
turns:
  - tool_calls:
      - bash: {command: "echo start >> count.txt; sleep 60"}
  - text: "finished"
"#;

/// Like `LONG`, but the second attempt finishes at once.
const ONCE_LONG: &str = r#"
turns:
  - tool_calls:
      - bash: {command: "echo start >> count.txt; if [ -f once ]; then echo again; else touch once; sleep 60; fi"}
  - text: "finished"
"#;

const AGENT: &str = "name: a\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n";

/// Kills (SIGKILL) and reaps a child when the test ends, however it ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// The `unshare` arguments that give a new PID namespace (with its own `/proc` if
/// `mount_proc`) here: directly as root, inside a new user namespace otherwise.
fn unshare_args(mount_proc: bool) -> Vec<&'static str> {
    let direct = Command::new("unshare")
        .args(["--pid", "--fork", "--mount-proc", "true"])
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success());
    let mut args = if direct {
        vec![]
    } else {
        vec!["--user", "--map-root-user"]
    };
    // When unshare is killed, toren gets SIGTERM and stops cleanly (its command's cgroup
    // removed), rather than leave a cgroup no process of its namespace will ever clean.
    args.extend(["--pid", "--fork", "--kill-child=SIGTERM"]);
    if mount_proc {
        args.push("--mount-proc");
    }
    args
}

/// `toren ARGS…` in a new PID namespace, with the test home's environment.
fn unshared(toren: &Toren, mount_proc: bool, args: &[&str]) -> Command {
    let mut cmd = Command::new("unshare");
    cmd.args(unshare_args(mount_proc))
        .arg(env!("CARGO_BIN_EXE_toren"))
        .args(args)
        .env_clear()
        .envs(toren.vars().iter().map(|(n, v)| (n, v)))
        .stdin(Stdio::null());
    cmd
}

fn starts(count: &Path) -> usize {
    std::fs::read_to_string(count)
        .unwrap_or_default()
        .lines()
        .filter(|l| *l == "start")
        .count()
}

fn wait_for_start(count: &Path, holder: &mut Child) {
    let deadline = Instant::now() + Duration::from_secs(30);
    while starts(count) == 0 {
        assert!(
            holder.try_wait().unwrap().is_none(),
            "the run's process exited before its command started"
        );
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// Runs a `toren resume` to its end, or stops it once it has started the command a second
/// time (the lease was taken from a live holder): its output, and how often the command
/// started by then.
fn resume_against_live_holder(mut resume: Command, count: &Path) -> (Option<Output>, usize) {
    resume.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut resume = Reaped(resume.spawn().unwrap());
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if resume.0.try_wait().unwrap().is_some() {
            let mut out = Output {
                status: resume.0.wait().unwrap(),
                stdout: Vec::new(),
                stderr: Vec::new(),
            };
            std::io::Read::read_to_end(resume.0.stdout.as_mut().unwrap(), &mut out.stdout).unwrap();
            std::io::Read::read_to_end(resume.0.stderr.as_mut().unwrap(), &mut out.stderr).unwrap();
            return (Some(out), starts(count));
        }
        if starts(count) > 1 {
            return (None, starts(count));
        }
        assert!(
            Instant::now() < deadline,
            "the resume neither ended nor ran"
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

fn assert_refused(out: Option<Output>, starts: usize, count: &Path, how: &str) {
    let Some(out) = out else {
        panic!(
            "{how}: the resume took the lease of a live holder and re-ran its command: \
             count.txt = {:?}",
            read(count)
        );
    };
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{how}: {stderr}");
    assert!(stderr.contains("being driven by"), "{how}: {stderr}");
    assert_eq!(starts, 1, "{how}");
    assert_eq!(read(count), "start\n", "{how}");
}

#[test]
fn a_resume_from_another_pid_namespace_does_not_take_a_live_lease() {
    let toren = Toren::new();
    toren.file("s.yaml", LONG);
    toren.agent("a", AGENT);
    let mut holder = Reaped(toren.spawn(&["run", "a", "--input", "go"]));
    let run = toren.wait_for_status(&mut holder.0, "running");
    let count = toren.workspace(&run).join("count.txt");
    wait_for_start(&count, &mut holder.0);

    // With a /proc of its own the other namespace sees none of the holder's pids; without
    // one it sees them under numbers its own getpid() does not use. Neither can judge.
    for (mount_proc, how) in [(true, "--mount-proc"), (false, "host /proc")] {
        let (out, starts) =
            resume_against_live_holder(unshared(&toren, mount_proc, &["resume", &run]), &count);
        assert_refused(out, starts, &count, how);
    }
    assert!(
        holder.0.try_wait().unwrap().is_none(),
        "the holder still drives the run"
    );
    assert!(!toren.show(&run)["held_by"].is_null());
}

#[test]
fn a_holder_in_a_child_pid_namespace_is_not_judged_from_the_parent() {
    let toren = Toren::new();
    toren.file("s.yaml", LONG);
    toren.agent("a", AGENT);
    // The holder is pid 1 of its namespace; pid 1 here is someone else entirely.
    let mut holder = unshared(&toren, true, &["run", "a", "--input", "go"]);
    holder.stdout(Stdio::piped()).stderr(Stdio::piped());
    let mut holder = Reaped(holder.spawn().unwrap());
    let run = toren.wait_for_status(&mut holder.0, "running");
    let count = toren.workspace(&run).join("count.txt");
    wait_for_start(&count, &mut holder.0);

    let (out, starts) = resume_against_live_holder(toren.command(&["resume", &run]), &count);
    assert_refused(out, starts, &count, "from the parent namespace");
}

/// The process state (field 3 of `/proc/PID/stat`).
fn state(pid: u32) -> Option<char> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    stat[stat.rfind(')')? + 1..].trim_start().chars().next()
}

#[test]
fn a_killed_holder_that_is_not_reaped_yet_is_gone() {
    let toren = Toren::new();
    toren.file("s.yaml", ONCE_LONG);
    toren.agent("a", AGENT);
    let mut holder = toren.spawn(&["run", "a", "--input", "go"]);
    let run = toren.wait_for_status(&mut holder, "running");
    let count = toren.workspace(&run).join("count.txt");
    wait_for_start(&count, &mut holder);
    // SIGKILL, and no wait: the process stays a zombie, its pid and start time intact.
    holder.kill().unwrap();
    let pid = holder.id();
    let holder = Reaped(holder);
    let deadline = Instant::now() + Duration::from_secs(10);
    while state(pid) != Some('Z') {
        assert!(Instant::now() < deadline, "{pid} never became a zombie");
        std::thread::sleep(Duration::from_millis(10));
    }

    let out = toren.run(&["resume", &run]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "finished\n");
    assert_eq!(read(&count), "start\nstart\n", "re-run once, by the resume");
    assert_eq!(state(pid), Some('Z'), "the holder was still unreaped");
    drop(holder);
}
