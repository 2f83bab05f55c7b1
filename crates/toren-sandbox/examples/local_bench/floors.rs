//! The floors a sandboxed trivial command is held against, and the pieces of the local
//! backend's cost: `bash -c true` spawned directly (the host floor), `bwrap` spawned with
//! exactly the backend's arguments (the local floor) and that command line with one piece
//! taken out at a time (the seccomp filter, the network namespace, the shell), and the
//! backend's own `exec` (which adds its cgroups, rlimits and output capture, or a warm
//! sandbox's round trip). Each function runs its command `iterations` times after a short
//! warm-up and returns the latencies' summary.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use tokio::process::Command;
use toren_protocol::{ApprovalPolicy, ResolvedPolicy, ResourceLimits, RunId};
use toren_sandbox::{
    BwrapSpec, ExecRequest, HostLayout, LocalBackend, LocalSettings, bwrap_argv, sandbox_env,
    seccomp_filter,
};

use crate::stats::Summary;

/// Runs before every measurement and is not counted.
const WARM_UP: usize = 10;

/// `bash -c true` spawned from Tokio with its output collected: the physical floor.
pub(crate) async fn host_floor(iterations: usize) -> anyhow::Result<Summary> {
    measure(iterations, || async {
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
    })
    .await
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
) -> anyhow::Result<Summary> {
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
            command: "true",
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

/// The local backend's `exec` of `true` in one run's sandbox (opened once, before the
/// warm-up): what the bash tool pays per call.
pub(crate) async fn local_exec(
    settings: LocalSettings,
    iterations: usize,
) -> anyhow::Result<Summary> {
    let backend = LocalBackend::new(settings);
    backend.check()?;
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
    settings: LocalSettings,
    iterations: usize,
) -> anyhow::Result<Summary> {
    let backend = LocalBackend::new(settings);
    backend.check()?;
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
        backend: LocalBackend::NAME.to_owned(),
        image: None,
        network: false,
        approval: ApprovalPolicy::Never,
        env: Vec::new(),
        limits: ResourceLimits::default(),
        workspace: None,
        on_interrupt: Default::default(),
        sandbox_key: None,
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

/// Times `iterations` calls of `one` after [`WARM_UP`] uncounted ones.
async fn measure<F, Fut>(iterations: usize, mut one: F) -> anyhow::Result<Summary>
where
    F: FnMut() -> Fut,
    Fut: std::future::Future<Output = anyhow::Result<()>>,
{
    for _ in 0..WARM_UP {
        one().await?;
    }
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let t = Instant::now();
        one().await?;
        samples.push(t.elapsed());
    }
    Summary::of(samples).context("no iterations")
}
