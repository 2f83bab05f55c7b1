//! The floors a sandboxed trivial command is held against: `bash -c true` spawned directly
//! (the host floor), and with the sandbox's environment (`LANG=C.UTF-8` alone makes bash
//! load the locale, a share of what any sandboxed command pays); `bwrap` spawned with
//! exactly the local backend's arguments (the local floor: its seccomp filter, namespaces
//! and mounts), built from the backend's public pieces (`bwrap_argv`, `sandbox_env`,
//! `seccomp_filter`), and that command line with one piece left out at a time, to show
//! where bubblewrap's time goes; and `docker exec` of the same shell in a running container
//! (what most agent runtimes do per command). Also [`measure`], which every latency here
//! goes through.

use std::ffi::OsString;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::Path;
use std::process::Stdio;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecResults};
use futures::StreamExt as _;
use tokio::process::Command;
use toren_protocol::ResourceLimits;
use toren_sandbox::{BwrapSpec, HostLayout, Inside, bwrap_argv, sandbox_env, seccomp_filter};

/// Uncounted calls before every measurement (page cache, the daemon's caches, the store).
pub(crate) const WARM_UP: usize = 5;

/// `bash -c true` spawned from Tokio with its output collected: the physical floor.
pub(crate) async fn host(iterations: usize) -> anyhow::Result<Vec<Duration>> {
    measure(iterations, || async {
        let out = Command::new("/bin/bash")
            .args(["-c", "true"])
            .env_clear()
            .stdin(Stdio::null())
            .output()
            .await
            .context("cannot run bash")?;
        ensure!(out.status.success(), "bash -c true failed: {}", out.status);
        Ok(())
    })
    .await
}

/// `bash -c true` on the host with the sandbox's environment (`PATH`, `HOME`, `LANG`).
pub(crate) async fn host_with_sandbox_env(iterations: usize) -> anyhow::Result<Vec<Duration>> {
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
        ensure!(out.status.success(), "bash -c true failed: {}", out.status);
        Ok(())
    })
    .await
}

/// The local backend's bubblewrap command line, whole or with one piece left out.
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

/// `bwrap` with the local backend's command line for `true` over `workspace`, as `variant`
/// says; exactly: the seccomp filter on a pipe, no network, the default `/tmp` size,
/// `bash -c true` inside.
pub(crate) async fn bwrap(
    bwrap: &Path,
    workspace: &Path,
    variant: Bwrap,
    iterations: usize,
) -> anyhow::Result<Vec<Duration>> {
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
            // The command line ends in `bash -c true`.
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

/// `docker exec <container> <shell> -c true` through the Engine API as bollard (and most
/// runtimes) do it: create the exec, start it attached, read its output to the end, then
/// inspect it until it reports its exit code.
pub(crate) async fn docker_exec(
    docker: &Docker,
    container: &str,
    shell: &str,
    iterations: usize,
) -> anyhow::Result<Vec<Duration>> {
    measure(iterations, || one_docker_exec(docker, container, shell)).await
}

async fn one_docker_exec(docker: &Docker, container: &str, shell: &str) -> anyhow::Result<()> {
    let created = docker
        .create_exec(
            container,
            CreateExecOptions {
                cmd: Some(vec![shell, "-c", "true"]),
                env: Some(vec![
                    "PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                ]),
                working_dir: Some("/workspace"),
                attach_stdout: Some(true),
                attach_stderr: Some(true),
                tty: Some(false),
                ..Default::default()
            },
        )
        .await?;
    if let StartExecResults::Attached { mut output, .. } =
        docker.start_exec(&created.id, None).await?
    {
        while let Some(chunk) = output.next().await {
            chunk?;
        }
    }
    loop {
        let inspected = docker.inspect_exec(&created.id).await?;
        if inspected.running != Some(true) {
            ensure!(
                inspected.exit_code == Some(0),
                "docker exec failed: {inspected:?}"
            );
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// A pipe holding `bytes` whose read end a child inherits (as bwrap's `--seccomp FD`).
fn inheritable_pipe(bytes: &[u8]) -> anyhow::Result<OwnedFd> {
    let (reader, writer) = nix::unistd::pipe()?;
    let written = nix::unistd::write(&writer, bytes)?;
    ensure!(written == bytes.len(), "short write of the seccomp filter");
    Ok(reader)
}

/// Times `iterations` calls of `one`, one after another, after [`WARM_UP`] uncounted ones.
pub(crate) async fn measure<F, Fut>(iterations: usize, mut one: F) -> anyhow::Result<Vec<Duration>>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    for _ in 0..WARM_UP {
        one().await?;
    }
    let mut samples = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let began = Instant::now();
        one().await?;
        samples.push(began.elapsed());
    }
    Ok(samples)
}
