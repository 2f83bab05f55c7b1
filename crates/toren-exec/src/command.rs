//! Running one [`Request`]: spawn the shell as the leader of a new process group with
//! exactly the requested environment, collect stdout and stderr from one shared pipe (so
//! they interleave in arrival order) into a bounded [`Capture`], SIGKILL the group at the
//! deadline, and answer with the exact exit code. Its rlimits (`RLIMIT_CPU`, and where
//! asked `RLIMIT_DATA` and `RLIMIT_NPROC`) are set between fork and exec. The group is killed when its leader exits
//! too (in `children`), and as a container's PID 1 the helper then also kills whatever
//! escaped the group, so nothing a command started outlives it.

use std::io::{self, Read};
use std::mem;
use std::os::unix::process::CommandExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::sync::mpsc::{self, RecvTimeoutError};
use std::sync::{Arc, Mutex, PoisonError};
use std::thread;
use std::time::{Duration, Instant};

use nix::sys::resource::{Resource, getrlimit, setrlimit};

use crate::capture::Capture;
use crate::cgroup::Counters;
use crate::children::{Children, Exit};
use crate::protocol::{Finished, Limits, Request, Response};
use crate::running::Slot;

const READ_CHUNK: usize = 64 * 1024;

/// How long to keep reading after the command ended; only a process that escaped its
/// group (outside a container) can hold the pipe open that long.
const DRAIN: Duration = Duration::from_secs(2);

/// Runs `req` with `shell` and says how it went; `slot` learns the command's process
/// group, so a cancel can kill it.
pub(crate) fn run(
    req: &Request,
    limits: &Limits,
    shell: &Path,
    children: &Children,
    slot: &Slot,
) -> Response {
    match try_run(req, limits, shell, children, slot) {
        Ok(finished) => Response::Finished(finished),
        Err(err) => Response::Failed {
            id: req.id.clone(),
            error: format!("cannot start `{}`: {err}", shell.display()),
        },
    }
}

fn try_run(
    req: &Request,
    limits: &Limits,
    shell: &Path,
    children: &Children,
    slot: &Slot,
) -> io::Result<Finished> {
    let started = Instant::now();
    let (mut reader, writer) = io::pipe()?;
    let mut command = Command::new(shell);
    command
        .arg("-c")
        .arg(&req.command)
        .env_clear()
        .envs(req.env.iter().map(|(name, value)| (name, value)))
        .current_dir(&req.cwd)
        .stdin(Stdio::null())
        .stdout(writer.try_clone()?)
        .stderr(writer)
        .process_group(0);
    install_rlimits(&mut command, req.cpu_secs, limits)?;
    let before = Counters::read();
    let (pid, exited) = children.spawn(&mut command)?;
    slot.started(pid, children);
    // Close our copies of the write end: end of file then means the command is gone.
    drop(command);

    let capture = Arc::new(Mutex::new(Capture::new(req.output_limit)));
    let (drained, done) = mpsc::channel();
    let sink = Arc::clone(&capture);
    thread::Builder::new()
        .name(format!("read-{}", req.id))
        .spawn(move || {
            let mut buf = vec![0u8; READ_CHUNK];
            loop {
                match reader.read(&mut buf) {
                    Ok(0) => break,
                    Ok(n) => sink
                        .lock()
                        .unwrap_or_else(PoisonError::into_inner)
                        .push(&buf[..n]),
                    Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                    Err(_) => break,
                }
            }
            let _ = drained.send(());
        })?;

    let timeout = Duration::from_millis(req.timeout_ms);
    let (exit, timed_out) = match exited.recv_timeout(timeout) {
        Ok(exit) => (exit, false),
        Err(RecvTimeoutError::Timeout) => {
            children.kill_group(pid);
            let exit = exited.recv().map_err(io::Error::other)?;
            (exit, true)
        }
        Err(RecvTimeoutError::Disconnected) => {
            return Err(io::Error::other("the reaper stopped"));
        }
    };
    children.sweep_if_idle();
    let _ = done.recv_timeout(DRAIN);
    let hits = Counters::read().since(before);

    let capture = mem::replace(
        &mut *capture.lock().unwrap_or_else(PoisonError::into_inner),
        Capture::new(0),
    );
    let (output, truncated) = capture.finish();
    let (exit_code, signal) = match exit {
        Exit::Code(code) if !timed_out => (Some(code), None),
        Exit::Code(_) => (None, None),
        Exit::Signal(signal) => (None, Some(signal)),
    };
    Ok(Finished {
        id: req.id.clone(),
        exit_code,
        signal,
        output,
        truncated,
        timed_out,
        oom_kills: hits.oom_kills,
        pids_max_hits: hits.pids_max,
        elapsed_ms: u64::try_from(started.elapsed().as_millis()).unwrap_or(u64::MAX),
    })
}

/// Makes the command's processes start under `RLIMIT_CPU = cpu_secs` and the rlimits in
/// `limits`, never above the current hard limits (which only a privileged process may
/// raise).
#[expect(
    unsafe_code,
    reason = "a pre_exec hook is the only way to set a child's rlimits before it runs"
)]
fn install_rlimits(
    command: &mut Command,
    cpu_secs: Option<u64>,
    limits: &Limits,
) -> io::Result<()> {
    let mut wanted = Vec::new();
    if let Some(secs) = cpu_secs {
        wanted.push((Resource::RLIMIT_CPU, secs, secs.saturating_add(1)));
    }
    if let Some(bytes) = limits.data_bytes {
        wanted.push((Resource::RLIMIT_DATA, bytes, bytes));
    }
    if let Some(n) = limits.nproc {
        wanted.push((Resource::RLIMIT_NPROC, n, n));
    }
    if wanted.is_empty() {
        return Ok(());
    }
    let rlimits = wanted
        .into_iter()
        .map(|(resource, soft, hard)| {
            let (_, current) = getrlimit(resource).map_err(io::Error::from)?;
            Ok((resource, soft.min(current), hard.min(current)))
        })
        .collect::<io::Result<Vec<_>>>()?;
    // SAFETY: the hook runs in the forked child of a multi-threaded process, where only
    // async-signal-safe calls are allowed: setrlimit(2) on values prepared before the
    // fork, and errors built from raw errno values, which do not allocate.
    unsafe {
        command.pre_exec(move || {
            for &(resource, soft, hard) in &rlimits {
                setrlimit(resource, soft, hard).map_err(io::Error::from)?;
            }
            Ok(())
        });
    }
    Ok(())
}
