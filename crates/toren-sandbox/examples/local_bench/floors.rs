//! The floors a sandboxed trivial command is held against, and the pieces of the local
//! backend's cost: `bash -c true` spawned directly (the host floor), `bwrap` spawned with
//! exactly the backend's arguments (the local floor) and that command line with one piece
//! taken out at a time (the seccomp filter, the network namespace, the shell), and the
//! backend's own `exec` (which adds its cgroups, rlimits and output capture, or a warm
//! sandbox's round trip). Each function runs its command `iterations` times after a short
//! warm-up, each time followed by the host floor, and returns both summaries
//! ([`Paired`]): the machines this runs on are shared and noisy, and a ratio of samples
//! taken side by side holds up where figures taken minutes apart do not.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::process::Command;
use toren_protocol::{ApprovalPolicy, ResolvedPolicy, ResourceLimits, RunId};
use toren_sandbox::{
    BwrapSpec, ExecRequest, HostLayout, Inside, LocalBackend, LocalSettings, bwrap_argv,
    sandbox_env, seccomp_filter,
};

use crate::stats::{Paired, Summary};

/// Runs before every measurement and is not counted.
const WARM_UP: usize = 10;

/// `bash -c true` spawned from Tokio with its output collected: the physical floor.
pub(crate) async fn host_floor(iterations: usize) -> anyhow::Result<Paired> {
    measure(iterations, bash_true).await
}

/// `bash -c true` on the host with the sandbox's environment (`PATH`, `HOME`, `LANG`):
/// `LANG=C.UTF-8` alone makes bash load the locale, a share of what any sandboxed command
/// pays.
pub(crate) async fn host_with_sandbox_env(iterations: usize) -> anyhow::Result<Paired> {
    measure(iterations, || async {
        let out = Command::new("/bin/bash")
            .args(["-c", "true"])
            .env_clear()
            .envs(sandbox_env(&[]))
            .current_dir("/")
            .stdin(Stdio::null())
            .output()
            .await
            .context("cannot run bash")?;
        if !out.status.success() {
            bail!("bash -c true failed: {}", out.status);
        }
        Ok(())
    })
    .await
}

/// One `bash -c true`, as the host floor runs it.
pub(crate) async fn bash_true() -> anyhow::Result<()> {
    let out = Command::new("/bin/bash")
        .args(["-c", "true"])
        .env_clear()
        .stdin(Stdio::null())
        .output()
        .await
        .context("cannot run bash")?;
    if !out.status.success() {
        bail!("bash -c true failed: {}", out.status);
    }
    Ok(())
}

/// One piece left out of the backend's bubblewrap command line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Bwrap {
    /// Exactly the backend's arguments, seccomp filter included: the local floor.
    Exact,
    /// Without `--seccomp`.
    NoSeccomp,
    /// With `--share-net`: no network namespace to create and tear down.
    SharedNet,
    /// `/usr/bin/true` itself instead of `bash -c true`.
    NoShell,
}

impl Bwrap {
    pub(crate) fn label(self) -> &'static str {
        match self {
            Self::Exact => "bwrap <backend's args> bash -c true",
            Self::NoSeccomp => "  … without the seccomp filter",
            Self::SharedNet => "  … without a network namespace",
            Self::NoShell => "  … running true without bash",
        }
    }
}

/// `bwrap` with the backend's command line for `true` over `workspace`, as `variant` says.
pub(crate) async fn bwrap_floor(
    bwrap: &Path,
    workspace: &Path,
    variant: Bwrap,
    iterations: usize,
) -> anyhow::Result<Paired> {
    let layout = HostLayout::probe();
    let filter = if variant == Bwrap::NoSeccomp {
        None
    } else {
        seccomp_filter()
    };
    measure(iterations, || async {
        let seccomp = filter.as_deref().map(inheritable_pipe).transpose()?;
        let spec = BwrapSpec {
            workspace,
            network: variant == Bwrap::SharedNet,
            layout: &layout,
            tmp_size: ResourceLimits::default().memory,
            seccomp_fd: seccomp.as_ref().map(AsRawFd::as_raw_fd),
            inside: Inside::Command("true"),
            egress: None,
        };
        let mut argv = bwrap_argv(&spec);
        if variant == Bwrap::NoShell {
            argv.truncate(argv.len() - 3);
            argv.push(OsString::from("/usr/bin/true"));
        }
        let out = Command::new(bwrap)
            .args(argv)
            .env_clear()
            .envs(sandbox_env(&[]))
            .stdin(Stdio::null())
            .output()
            .await
            .context("cannot run bwrap")?;
        drop(seccomp);
        if !out.status.success() {
            bail!(
                "bwrap failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr)
            );
        }
        Ok(())
    })
    .await
}

/// The local backend over `settings`, keeping a sandbox per run with `helper` if given,
/// checked.
pub(crate) fn backend(
    settings: LocalSettings,
    helper: Option<PathBuf>,
) -> anyhow::Result<LocalBackend> {
    let backend = LocalBackend::new(settings);
    let backend = match helper {
        Some(helper) => backend.with_exec_helper(helper),
        None => backend,
    };
    backend.check()?;
    Ok(backend)
}

/// The local backend's `exec` of `true` in one run's sandbox (opened once, before the
/// warm-up): what the bash tool pays per call.
pub(crate) async fn local_exec(
    backend: anyhow::Result<LocalBackend>,
    iterations: usize,
) -> anyhow::Result<Paired> {
    let backend = backend?;
    let sandbox = backend
        .open(&RunId::new(), &local_policy(), Vec::new())
        .await?;
    let summary = measure(iterations, || async {
        let out = sandbox
            .exec(ExecRequest {
                command: "true".to_owned(),
                timeout: Duration::from_secs(30),
                output_limit: 30_000,
            })
            .await?;
        if out.exit_code != Some(0) {
            bail!("true failed in the sandbox: {out:?}");
        }
        Ok(())
    })
    .await?;
    drop(sandbox);
    Ok(summary)
}

/// `LocalBackend::open` and the first `exec` of `true`, each time in a new run's sandbox:
/// what a run's first command pays.
pub(crate) async fn local_first_exec(
    backend: anyhow::Result<LocalBackend>,
    iterations: usize,
) -> anyhow::Result<Paired> {
    let backend = backend?;
    measure(iterations, || async {
        let sandbox = backend
            .open(&RunId::new(), &local_policy(), Vec::new())
            .await?;
        let out = sandbox
            .exec(ExecRequest {
                command: "true".to_owned(),
                timeout: Duration::from_secs(30),
                output_limit: 30_000,
            })
            .await?;
        if out.exit_code != Some(0) {
            bail!("true failed in the sandbox: {out:?}");
        }
        Ok(())
    })
    .await
}

/// The policy of a run with no network, no approvals, no granted variables and the
/// default limits.
pub(crate) fn local_policy() -> ResolvedPolicy {
    ResolvedPolicy {
        checkpoints: Default::default(),
        backend: LocalBackend::NAME.to_owned(),
        image: None,
        network: false,
        egress: None,
        approval: ApprovalPolicy::Never,
        env: Vec::new(),
        limits: ResourceLimits::default(),
        workspace: None,
        on_interrupt: Default::default(),
        sandbox_key: None,
        volume: None,
    }
}

/// A pipe holding `bytes` whose read end a child inherits (as bwrap's `--seccomp FD`).
fn inheritable_pipe(bytes: &[u8]) -> anyhow::Result<OwnedFd> {
    let (reader, writer) = nix::unistd::pipe()?;
    let written = nix::unistd::write(&writer, bytes)?;
    if written != bytes.len() {
        bail!("short write of the seccomp filter");
    }
    Ok(reader)
}

/// Times `iterations` calls of `one` after [`WARM_UP`] uncounted ones, each followed by
/// a timed `bash -c true`.
async fn measure<F, Fut>(iterations: usize, mut one: F) -> anyhow::Result<Paired>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    for _ in 0..WARM_UP {
        one().await?;
    }
    let mut samples = Vec::with_capacity(iterations);
    let mut host = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        one().await?;
        samples.push(t.elapsed());
        let t = Instant::now();
        bash_true().await?;
        host.push(t.elapsed());
    }
    Ok(Paired {
        it: Summary::of(samples).context("no iterations")?,
        host: Summary::of(host).context("no iterations")?,
    })
}
