//! What only a kept sandbox does, run for real: the run's commands share one sandbox (its
//! helper as PID 1, its `/tmp`), a sandbox killed from outside cuts its command short and
//! is replaced by the next command, a caller that stops waiting gets its command killed
//! while the sandbox stays, dropping the sandbox ends it (processes and cgroup), a helper
//! that cannot serve fails the check, and the check's own sandbox leaves nothing behind.

use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;
use pretty_assertions::assert_eq;
use toren_sandbox::{Error, ExecRequest, HELPER_PATH, LocalBackend, LocalSettings};

use super::limits::toren_cgroups;
use super::local::{fixture, ok};
use super::support::{Mode, eventually, helper, processes_with};

/// The host pid of the sandbox's helper, seen as the parent of a command showing `marker`.
async fn helper_of(marker: &str) -> i32 {
    let mut found = None;
    assert!(
        eventually(|| {
            found = processes_with(marker).into_iter().find_map(|pid| {
                let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
                let comm = std::fs::read_to_string(format!("/proc/{pid}/comm")).ok()?;
                if comm != "sleep\n" {
                    return None;
                }
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("PPid:"))?
                    .trim()
                    .parse::<i32>()
                    .ok()
            });
            found.is_some()
        })
        .await,
        "the command never showed up"
    );
    let helper = found.unwrap();
    let cmdline = std::fs::read(format!("/proc/{helper}/cmdline")).unwrap();
    assert!(
        String::from_utf8_lossy(&cmdline).starts_with(HELPER_PATH),
        "the command's parent is not the helper"
    );
    helper
}

fn alive(pid: i32) -> bool {
    kill(Pid::from_raw(pid), None).is_ok()
        && !std::fs::read_to_string(format!("/proc/{pid}/stat"))
            .is_ok_and(|s| s.split(' ').nth(2) == Some("Z"))
}

fn request(command: &str) -> ExecRequest {
    ExecRequest {
        command: command.to_owned(),
        timeout: Duration::from_secs(30),
        output_limit: 30_000,
    }
}

#[tokio::test]
async fn the_runs_commands_share_one_sandbox_with_the_helper_as_pid_1() {
    let f = fixture(Mode::Kept).await;
    let first = f
        .run("readlink /proc/self/ns/pid; echo kept > /tmp/mark")
        .await;
    assert_eq!(first.exit_code, Some(0), "{first:?}");
    let second = f.run("readlink /proc/self/ns/pid; cat /tmp/mark").await;
    assert_eq!(second, ok(&format!("{}kept\n", first.output)));
    let init = f.run("tr '\\0' ' ' < /proc/1/cmdline").await;
    assert_eq!(init, ok(&format!("{HELPER_PATH} ")));
}

#[tokio::test]
async fn a_sandbox_killed_from_outside_cuts_its_command_short_and_is_replaced() {
    let f = fixture(Mode::Kept).await;
    let before = f.run("echo kept > /tmp/mark && ls /tmp").await;
    assert_eq!(before, ok("mark\n"));
    let marker = "sleep 41.4159";
    let (out, ()) = tokio::join!(f.run(marker), async {
        let helper = helper_of(marker).await;
        kill(Pid::from_raw(helper), Signal::SIGKILL).unwrap();
    });
    assert_eq!(out.exit_code, None, "{out:?}");
    assert!(out.output.contains("the sandbox stopped"), "{out:?}");
    assert!(processes_with(marker).is_empty());
    // A fresh sandbox: its /tmp is a new tmpfs. (Not told by its pid namespace: the kernel
    // may give the new one the inode number the killed one had.)
    let after = f.run("ls /tmp").await;
    assert_eq!(after, ok(""), "a fresh sandbox, with a fresh /tmp");
}

#[tokio::test]
async fn a_call_nobody_waits_for_is_killed_and_dropping_the_sandbox_ends_it() {
    let f = fixture(Mode::Kept).await;
    let marker = "sleep 42.7182";
    let sandbox = f.sandbox.clone();
    let call = tokio::spawn(async move { sandbox.exec(request(marker)).await });
    let helper = helper_of(marker).await;
    let cgroups = std::fs::read_to_string(format!("/proc/{helper}/cgroup")).unwrap();
    call.abort();
    assert!(eventually(|| processes_with(marker).is_empty()).await);
    assert!(alive(helper), "the sandbox went with its command");
    assert_eq!(f.run("echo still").await, ok("still\n"));

    // The sandbox's own cgroups, as the host sees them (v1: one per controller).
    let dirs: Vec<String> = cgroups
        .lines()
        .filter_map(|l| {
            let (_, rest) = l.split_once(':')?;
            let (list, path) = rest.split_once(':')?;
            let dir = match list {
                "pids" | "memory" => format!("/sys/fs/cgroup/{list}{path}"),
                "" => format!("/sys/fs/cgroup{path}"),
                _ => return None,
            };
            path.contains("/toren-").then_some(dir)
        })
        .collect();
    drop(f);
    assert!(
        eventually(|| !alive(helper)).await,
        "the helper outlived its sandbox"
    );
    for dir in &dirs {
        assert!(
            eventually(|| !std::path::Path::new(dir).exists()).await,
            "{dir} outlived its sandbox"
        );
    }
}

#[tokio::test]
async fn a_helper_that_cannot_serve_fails_the_check_and_a_missing_one_is_not_used() {
    let root = tempfile::tempdir().unwrap();
    let settings = LocalSettings {
        sandbox_root: root.path().join("sandboxes"),
        bwrap: None,
    };
    // `true` exits at once instead of serving.
    let broken = LocalBackend::new(settings.clone()).with_exec_helper("/usr/bin/true".into());
    assert!(broken.keeps_sandboxes());
    let err = broken.check().unwrap_err();
    assert!(matches!(err, Error::HelperFailed { .. }), "{err:?}");
    assert!(
        err.to_string().contains("scripts/build-exec-helper"),
        "{err}"
    );
    assert!(!err.is_model_fixable());

    let missing =
        LocalBackend::new(settings.clone()).with_exec_helper(root.path().join("no-such-helper"));
    assert!(!missing.keeps_sandboxes());
    missing.check().unwrap();

    assert!(
        LocalBackend::new(settings)
            .with_exec_helper(helper())
            .keeps_sandboxes()
    );
}

#[tokio::test]
async fn the_check_through_the_helper_leaves_no_cgroup_behind() {
    let root = tempfile::tempdir().unwrap();
    let backend = LocalBackend::new(LocalSettings {
        sandbox_root: root.path().join("sandboxes"),
        bwrap: None,
    })
    .with_exec_helper(helper());
    backend.check().unwrap();
    assert_eq!(toren_cgroups(), Vec::<String>::new());
}
