//! Running one bubblewrap invocation: spawn it with a cleared environment under its
//! resource limits (prepared by `limits`), collect stdout and stderr from one shared pipe
//! (so they interleave in arrival order) into a bounded [`Capture`], enforce the timeout by
//! killing the whole process group, and finally empty and remove the call's cgroups.
//!
//! bwrap runs the command in a fresh pid namespace with `--die-with-parent`: when bash
//! exits, or bwrap is killed, the kernel kills everything the command started (background
//! jobs, `nohup`, `setsid`), which also closes the pipe. Reading is still bounded in time in
//! case something else holds the pipe open. A call whose future is dropped (the worker
//! stopped the run, e.g. because it could not renew its lease) ends the same way: bwrap is
//! SIGKILLed (`kill_on_drop`), its pid namespace goes with it, and the call's cgroup kills
//! whatever is left as it is dropped. The worker's lease tests check that nothing of such
//! a command is left on the host.

use std::ffi::OsString;
use std::path::Path;
use std::process::{ExitStatus, Stdio};
use std::time::Duration;

use nix::sys::signal::{Signal, killpg};
use nix::unistd::Pid;
use tokio::io::AsyncReadExt;
use tokio::net::unix::pipe;
use tokio::process::{Child, Command};
use tokio::time::Instant;

use toren_protocol::ResourceLimits;

use super::limits::Prepared;
use crate::error::{Error, Result};
use crate::sandbox::{ExecOutput, ExecRequest, LimitHit};
use toren_exec::Capture;

const READ_CHUNK: usize = 64 * 1024;

/// How long to keep reading after the command exited; the pid namespace's teardown closes
/// the pipe at once, so this only matters if something outside it holds the pipe.
const DRAIN_AFTER_EXIT: Duration = Duration::from_secs(2);

/// How long to keep reading after killing a command that timed out.
const DRAIN_AFTER_KILL: Duration = Duration::from_secs(2);

/// Spawns `bwrap argv…` with exactly `env` as its environment and collects the result.
///
/// `--die-with-parent` ties bwrap to the thread that spawned it, so call this from a
/// runtime worker thread (any `async` context), not from a short-lived blocking thread.
pub(crate) async fn run(
    bwrap: &Path,
    argv: Vec<OsString>,
    env: &[(String, String)],
    req: &ExecRequest,
    limits: &ResourceLimits,
    prepared: Prepared,
) -> Result<ExecOutput> {
    let (sender, mut receiver) =
        pipe::pipe().map_err(|e| Error::io("cannot create a pipe for the command's output", e))?;
    let stdout = sender
        .into_blocking_fd()
        .map_err(|e| Error::io("cannot prepare the command's output pipe", e))?;
    let stderr = stdout
        .try_clone()
        .map_err(|e| Error::io("cannot prepare the command's output pipe", e))?;

    let mut command = Command::new(bwrap);
    command
        .args(argv)
        .env_clear()
        .envs(env.iter().map(|(name, value)| (name, value)))
        .stdin(Stdio::null())
        .stdout(Stdio::from(stdout))
        .stderr(Stdio::from(stderr))
        .process_group(0)
        .kill_on_drop(true);
    let Prepared { cgroup, setup } = prepared;
    setup.install(&mut command);
    let mut child = command
        .spawn()
        .map_err(|e| Error::io(format!("cannot start `{}`", bwrap.display()), e))?;
    // Close our copies of the write end: end of file then means the sandbox is gone.
    drop(command);

    let deadline = Instant::now() + req.timeout;
    let mut capture = Capture::new(req.output_limit);
    let mut buf = vec![0u8; READ_CHUNK];
    let mut status: Option<ExitStatus> = None;
    let mut eof = false;
    let mut read_until = deadline;
    let mut timed_out = false;

    while !(eof && status.is_some()) {
        tokio::select! {
            read = receiver.read(&mut buf), if !eof => match read {
                Ok(0) => eof = true,
                Ok(n) => capture.push(&buf[..n]),
                Err(e) => return Err(Error::io("cannot read the command's output", e)),
            },
            waited = child.wait(), if status.is_none() => {
                status = Some(waited.map_err(|e| Error::io("cannot wait for bwrap", e))?);
                read_until = read_until.min(Instant::now() + DRAIN_AFTER_EXIT);
            },
            () = tokio::time::sleep_until(read_until) => {
                timed_out = status.is_none();
                break;
            }
        }
    }

    if timed_out {
        kill_group(&mut child);
        child
            .wait()
            .await
            .map_err(|e| Error::io("cannot wait for bwrap", e))?;
        let until = Instant::now() + DRAIN_AFTER_KILL;
        while !eof {
            match tokio::time::timeout_at(until, receiver.read(&mut buf)).await {
                Ok(Ok(0)) | Err(_) => eof = true,
                Ok(Ok(n)) => capture.push(&buf[..n]),
                Ok(Err(e)) => return Err(Error::io("cannot read the command's output", e)),
            }
        }
    }

    let mut limits_hit = Vec::new();
    if let Some(cgroup) = cgroup {
        let (oom, pids_max) = cgroup.events();
        cgroup.finish().await;
        if oom {
            limits_hit.push(LimitHit::Memory {
                limit: limits.memory,
            });
        }
        if pids_max {
            limits_hit.push(LimitHit::Pids { limit: limits.pids });
        }
    }

    let (output, truncated) = capture.finish();
    let exit_code = if timed_out {
        None
    } else {
        status.and_then(|s| s.code())
    };
    tracing::debug!(
        ?exit_code,
        timed_out,
        truncated,
        ?limits_hit,
        "sandboxed command finished"
    );
    Ok(ExecOutput {
        exit_code,
        output,
        truncated,
        timed_out,
        limits_hit,
    })
}

/// SIGKILL to bwrap's process group; bwrap's death takes the pid namespace with it.
fn kill_group(child: &mut Child) {
    // The child has not been reaped, so its pid (= its process group id) is still ours.
    if let Some(pgid) = child.id().and_then(|id| i32::try_from(id).ok())
        && let Err(err) = killpg(Pid::from_raw(pgid), Signal::SIGKILL)
    {
        tracing::warn!(%err, pgid, "could not kill the sandbox's process group");
    }
    // Belt and braces: the direct child, even if the group kill failed. An error here
    // means it has already exited.
    let _ = child.start_kill();
}
