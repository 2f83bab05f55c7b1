//! The two backends as the benchmarks open them: `local` (bubblewrap kept per run with the
//! static helper, checked like `toren` checks it) and `docker` (the daemon at `DOCKER_HOST` or its default socket, the static
//! helper from `scripts/build-exec-helper`, the default image from
//! `scripts/build-sandbox-image`), each with the policy of a run with no network, no
//! approvals, no granted variables and the default limits. A missing piece fails with the
//! script that makes it.

use std::path::{Path, PathBuf};

use anyhow::{Context as _, ensure};
use toren_protocol::{ApprovalPolicy, ResolvedPolicy, ResourceLimits};
use toren_sandbox::{LocalBackend, LocalSettings};
use toren_sandbox_docker::{DEFAULT_IMAGE, DockerBackend, DockerSettings};

/// The local backend over `sandbox_root` as `toren` runs it — one kept bubblewrap per run,
/// with the static helper as its PID 1 — after its startup check.
pub(crate) fn local(sandbox_root: &Path) -> anyhow::Result<LocalBackend> {
    let backend = LocalBackend::new(LocalSettings {
        sandbox_root: sandbox_root.to_owned(),
        bwrap: None,
    })
    .with_exec_helper(helper()?);
    backend
        .check()
        .context("the local backend cannot run here (is bubblewrap installed? scripts/setup)")?;
    Ok(backend)
}

/// The local backend without the helper: each command a fresh bubblewrap (what `toren`
/// falls back to where the helper is missing), after its startup check.
pub(crate) fn local_without_helper(sandbox_root: &Path) -> anyhow::Result<LocalBackend> {
    let backend = LocalBackend::new(LocalSettings {
        sandbox_root: sandbox_root.to_owned(),
        bwrap: None,
    });
    backend
        .check()
        .context("the local backend cannot run here (is bubblewrap installed? scripts/setup)")?;
    Ok(backend)
}

/// The bubblewrap binary the local backend runs (the first `bwrap` on `PATH`).
pub(crate) fn bwrap() -> PathBuf {
    std::env::var_os("PATH")
        .and_then(|path| {
            std::env::split_paths(&path)
                .map(|dir| dir.join("bwrap"))
                .find(|candidate| candidate.is_file())
        })
        .unwrap_or_else(|| PathBuf::from("/usr/bin/bwrap"))
}

/// The docker backend over `sandbox_root`, after its startup check, with the default image
/// present.
pub(crate) async fn docker(sandbox_root: &Path) -> anyhow::Result<DockerBackend> {
    let helper = helper()?;
    let backend = DockerBackend::connect(DockerSettings {
        sandbox_root: sandbox_root.to_owned(),
        default_image: DEFAULT_IMAGE.to_owned(),
        exec_helper: helper,
        instance: format!("bench-{}", std::process::id()),
        docker_host: std::env::var("DOCKER_HOST").ok(),
    })
    .await
    .context("the docker backend cannot reach the daemon")?;
    let status = backend.check().await?;
    ensure!(
        status.default_image_present,
        "the image {DEFAULT_IMAGE} is missing: build it with scripts/build-sandbox-image"
    );
    Ok(backend)
}

/// The static helper (both backends') where `scripts/build-exec-helper` puts it: `target/exec-helper/…`
/// beside this program's profile directory (`TOREN_EXEC_HELPER` overrides it).
fn helper() -> anyhow::Result<PathBuf> {
    if let Some(path) = std::env::var_os("TOREN_EXEC_HELPER") {
        return Ok(PathBuf::from(path));
    }
    let exe = std::env::current_exe().context("cannot tell where toren-bench runs from")?;
    let built = exe
        .parent()
        .context("toren-bench's own path has no directory")?
        .join("../exec-helper/x86_64-unknown-linux-gnu/release/toren-exec");
    ensure!(
        built.is_file(),
        "no static sandbox helper at {}: build it with scripts/build-exec-helper",
        built.display()
    );
    Ok(built)
}

/// A run's policy on `backend`: no network, no approvals, no granted variables, the
/// default limits (and, for docker, the default image).
pub(crate) fn policy(backend: &str) -> ResolvedPolicy {
    ResolvedPolicy {
        checkpoints: Default::default(),
        backend: backend.to_owned(),
        image: (backend == DockerBackend::NAME).then(|| DEFAULT_IMAGE.to_owned()),
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
