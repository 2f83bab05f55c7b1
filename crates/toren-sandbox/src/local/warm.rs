//! A run's kept bubblewrap sandbox: one bubblewrap per run, started at the first command,
//! with the `toren-exec` helper as its PID 1 inside the same namespaces, mounts and seccomp
//! filter a single command gets (see `argv`), and every command sent to it over its stdio
//! (`session`). Each command still gets exactly the granted environment, a process group of
//! its own that is killed whole at the timeout, head-and-tail output capping, its
//! `RLIMIT_CPU`, and its other limits: where cgroups are writable, the sandbox's cgroup
//! holds the run's process and memory limits for everything in the sandbox (the helper
//! gets [`HELPER_PIDS`] processes more), and a limit hit is reported to the command during
//! which the cgroup counted it; elsewhere the helper sets the same rlimits per command as
//! a command run on its own gets (`limits`). Between commands the helper, as PID 1, kills
//! whatever a command left running.
//!
//! What changes against a fresh bubblewrap per command (as in a container): the process
//! and memory limits bound commands that run at the same time together, not each; the
//! sandbox's `/tmp` and `/dev/shm` last for the run, and what they hold counts against
//! the memory limit of later commands, so they are smaller: half the memory limit for
//! `/tmp`, at most a quarter for `/dev/shm` (a command's own sandbox gets the whole limit
//! for `/tmp`), and a quarter is always left for the commands; a command running
//! alongside another may be told of a limit the other hit. The sandbox ends when it is dropped (the worker drops a run's
//! sandbox when it stops driving the run): every process in its cgroups is killed and its
//! input closed, which also ends a helper on a host without cgroups. If it dies (killed
//! from outside), the next command starts a fresh one; a command it took with it comes back
//! cut short, with a note.

use std::path::PathBuf;
use std::process::Stdio;
use std::sync::Arc;
use std::time::Duration;

use tokio::process::{Child, Command};
use toren_exec::protocol::{Finished, Limited, Request, Response};
use toren_protocol::ResourceLimits;

use super::argv::{BwrapSpec, HostLayout, Inside, bwrap_argv, sandbox_env};
use super::cgroup::{CallCgroup, Counters};
#[cfg(doc)]
use super::limits::HELPER_PIDS;
use super::limits::Limiter;
use super::session::{Lost, Session};
use crate::error::{Error, Result};
use crate::sandbox::{ExecOutput, ExecRequest, LimitHit};
use crate::workspace::SANDBOX_WORKDIR;

/// How long after a command's timeout its answer may take (the helper kills the group at
/// the deadline and drains its output for at most 2 s) before the helper counts as hung.
const ANSWER_GRACE: Duration = Duration::from_secs(10);

/// How long a new sandbox may take to start serving.
const START_TIMEOUT: Duration = Duration::from_secs(20);

/// Said when the sandbox died under a command.
const SANDBOX_LOST: &str = "[the sandbox stopped while this command ran (it was killed from \
     outside); the command was cut short. The workspace is intact, and the next command runs \
     in a fresh sandbox.]";

/// Said when the helper did not answer in time.
const HELPER_HUNG: &str = "[the sandbox did not answer within the command's timeout; it was \
     stopped, and the next command runs in a fresh one. The workspace is intact.]";

/// What a kept sandbox is made of; fixed for the run.
pub(crate) struct Setup {
    pub(crate) bwrap: PathBuf,
    pub(crate) helper: PathBuf,
    pub(crate) workspace: PathBuf,
    pub(crate) network: bool,
    pub(crate) layout: Arc<HostLayout>,
    pub(crate) limiter: Arc<Limiter>,
    pub(crate) limits: ResourceLimits,
    /// The host directory of the run's egress proxy socket, bound in (a host list).
    pub(crate) egress: Option<PathBuf>,
}

/// A run's kept sandbox, started at the first command and restarted when gone.
pub(crate) struct Warm {
    setup: Setup,
    current: tokio::sync::Mutex<Option<Arc<Instance>>>,
}

/// One running sandbox.
struct Instance {
    session: Session,
    /// bubblewrap itself (killed with the sandbox; reaped by the runtime).
    bwrap: std::sync::Mutex<Option<Child>>,
    cgroup: std::sync::Mutex<Option<CallCgroup>>,
}

impl Warm {
    pub(crate) fn new(setup: Setup) -> Self {
        Self {
            setup,
            current: tokio::sync::Mutex::new(None),
        }
    }

    /// Runs `req` with exactly `env` as its environment.
    pub(crate) async fn exec(
        &self,
        req: &ExecRequest,
        env: &[(String, String)],
    ) -> Result<ExecOutput> {
        let deadline = req.timeout + ANSWER_GRACE;
        let mut retried = false;
        loop {
            let instance = self.instance().await?;
            let limited = Limited {
                request: Request {
                    id: instance.session.next_id(),
                    command: req.command.clone(),
                    cwd: SANDBOX_WORKDIR.to_owned(),
                    env: env.to_vec(),
                    timeout_ms: u64::try_from(req.timeout.as_millis()).unwrap_or(u64::MAX),
                    output_limit: req.output_limit,
                    cpu_secs: Some(self.setup.limits.cpu_secs),
                },
                limits: self.setup.limiter.command_limits(&self.setup.limits),
            };
            let before = instance.counters();
            match tokio::time::timeout(deadline, instance.session.call(&limited)).await {
                Ok(Ok(Response::Finished(finished))) => {
                    let hits = instance.counters().since(before);
                    return Ok(self.output(finished, hits));
                }
                Ok(Ok(Response::Failed { error, .. })) => {
                    return Err(Error::io(
                        "the sandbox could not run the command",
                        std::io::Error::other(error),
                    ));
                }
                Ok(Err(Lost::Write(err))) if !retried => {
                    // The request never reached the helper, so the command did not run:
                    // start a fresh sandbox and send it there.
                    tracing::warn!(%err, "cannot reach the sandbox helper; restarting the sandbox");
                    self.discard(&instance).await;
                    retried = true;
                }
                Ok(Err(_)) => {
                    tracing::warn!("the sandbox went away during a command");
                    self.discard(&instance).await;
                    return Ok(cut_short(SANDBOX_LOST, false));
                }
                Err(_) => {
                    tracing::warn!("the sandbox helper did not answer in time");
                    self.discard(&instance).await;
                    return Ok(cut_short(HELPER_HUNG, true));
                }
            }
        }
    }

    /// The running sandbox, starting one if there is none.
    async fn instance(&self) -> Result<Arc<Instance>> {
        let mut current = self.current.lock().await;
        if let Some(instance) = current.as_ref().filter(|i| !i.session.is_closed()) {
            return Ok(Arc::clone(instance));
        }
        let instance = Arc::new(self.start().await?);
        *current = Some(Arc::clone(&instance));
        Ok(instance)
    }

    /// Starts bubblewrap with the helper and waits until the helper serves.
    async fn start(&self) -> Result<Instance> {
        let s = &self.setup;
        let prepared = s
            .limiter
            .prepare_sandbox(&s.limits)
            .map_err(|e| Error::io("cannot set up the sandbox's resource limits", e))?;
        let spec = BwrapSpec {
            workspace: &s.workspace,
            network: s.network,
            layout: &s.layout,
            tmp_size: s.limits.memory,
            seccomp_fd: prepared.setup.seccomp_fd(),
            inside: Inside::Helper(&s.helper),
            egress: s.egress.as_deref(),
        };
        let mut command = Command::new(&s.bwrap);
        command
            .args(bwrap_argv(&spec))
            .env_clear()
            // The helper's own environment: no granted value, which travel per command.
            .envs(sandbox_env(&[]))
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(true);
        prepared.setup.install(&mut command);
        let mut child = command
            .spawn()
            .map_err(|e| Error::io(format!("cannot start `{}`", s.bwrap.display()), e))?;
        drop(command);
        let (Some(stdin), Some(stdout), Some(stderr)) =
            (child.stdin.take(), child.stdout.take(), child.stderr.take())
        else {
            return Err(Error::io(
                "cannot talk to the sandbox",
                std::io::ErrorKind::BrokenPipe.into(),
            ));
        };
        let (session, ready) = Session::new(stdin, stdout, stderr);
        let instance = Instance {
            session,
            bwrap: std::sync::Mutex::new(Some(child)),
            cgroup: std::sync::Mutex::new(prepared.cgroup),
        };
        let ready = tokio::time::timeout(START_TIMEOUT, ready).await;
        if !matches!(ready, Ok(Ok(true))) {
            let said = instance.session.diagnostics();
            let said = if said.is_empty() {
                format!(
                    "it did not start serving within {} s",
                    START_TIMEOUT.as_secs()
                )
            } else {
                said
            };
            return Err(Error::HelperFailed {
                path: s.helper.display().to_string(),
                why: said,
            });
        }
        Ok(instance)
    }

    /// Ends the running sandbox, if any, and waits until its processes are reaped and its
    /// cgroup removed (dropping it does the same in the background).
    pub(crate) async fn close(&self) {
        let instance = self.current.lock().await.take();
        if let Some(instance) = instance {
            let (bwrap, cgroup) = instance.stop_now();
            if let Some(mut bwrap) = bwrap {
                let _ = bwrap.wait().await;
            }
            if let Some(cgroup) = cgroup {
                cgroup.finish().await;
            }
        }
    }

    /// Forgets `instance` (if still current); it ends when its last user lets go.
    async fn discard(&self, instance: &Arc<Instance>) {
        let mut current = self.current.lock().await;
        if current.as_ref().is_some_and(|c| Arc::ptr_eq(c, instance)) {
            *current = None;
        }
        drop(current);
        instance.stop();
    }

    fn output(&self, finished: Finished, hits: Counters) -> ExecOutput {
        let mut limits_hit = Vec::new();
        if hits.oom_kills > 0 {
            limits_hit.push(LimitHit::Memory {
                limit: self.setup.limits.memory,
            });
        }
        if hits.pids_max > 0 {
            limits_hit.push(LimitHit::Pids {
                limit: self.setup.limits.pids,
            });
        }
        // A shell killed by a signal is reported as a shell would report it (128 + the
        // signal), as a command run on its own under bubblewrap is.
        let exit_code = if finished.timed_out {
            None
        } else {
            finished
                .exit_code
                .or_else(|| finished.signal.map(|s| 128 + s))
        };
        ExecOutput {
            exit_code,
            output: finished.output,
            truncated: finished.truncated,
            timed_out: finished.timed_out,
            limits_hit,
        }
    }
}

impl Instance {
    /// The sandbox cgroup's counters of limit hits (zero without cgroups).
    fn counters(&self) -> Counters {
        self.cgroup
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .as_ref()
            .map(CallCgroup::counters)
            .unwrap_or_default()
    }

    /// Ends the sandbox now: every process in its cgroups is killed (the helper's death
    /// takes its pid namespace with it), its input closed (which ends a helper where there
    /// are no cgroups), bubblewrap killed; then its cgroups are removed, in the background
    /// when there is a runtime to wait in.
    fn stop(&self) {
        let (bwrap, cgroup) = self.stop_now();
        match (bwrap, cgroup, tokio::runtime::Handle::try_current()) {
            (Some(mut bwrap), Some(cgroup), Ok(runtime)) => {
                runtime.spawn(async move {
                    let _ = bwrap.wait().await;
                    cgroup.finish().await;
                });
            }
            // Dropped: bubblewrap is reaped by the runtime (`kill_on_drop`), one round of
            // removal now, the rest by a later probe.
            (bwrap, cgroup, _) => drop((bwrap, cgroup)),
        }
    }

    /// The part of [`Instance::stop`] that does not wait: the kills. Hands back what is
    /// left to reap and remove (nothing once stopped).
    fn stop_now(&self) -> (Option<Child>, Option<CallCgroup>) {
        self.session.close();
        let cgroup = self
            .cgroup
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(cgroup) = &cgroup {
            cgroup.kill();
        }
        let mut bwrap = self
            .bwrap
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner)
            .take();
        if let Some(bwrap) = &mut bwrap {
            let _ = bwrap.start_kill();
        }
        (bwrap, cgroup)
    }
}

impl Drop for Instance {
    fn drop(&mut self) {
        self.stop();
    }
}

fn cut_short(note: &str, timed_out: bool) -> ExecOutput {
    ExecOutput {
        exit_code: None,
        output: note.to_owned(),
        truncated: false,
        timed_out,
        limits_hit: Vec::new(),
    }
}
