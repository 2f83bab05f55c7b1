//! `sandbox-start`: a new run's sandbox start to its first command's output, per backend:
//! `local` — `LocalBackend::open` (the workspace) and the first exec of `echo ready`;
//! `docker` — `DockerBackend::open` (image check, workspace) and the first exec, which
//! creates, attaches and starts the container and asks its helper. Each sample is a fresh
//! run. For docker, [`docker::breakdown`] replays the same start path one Engine
//! API call at a time to show what bounds it. Goals: `local` under 20 ms p50, `docker`
//! under 300 ms p50.

mod docker;
mod figures;

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::ensure;
use clap::Args;
use toren_protocol::RunId;
use toren_sandbox::SandboxBackend;

use crate::api_load::Verdict;
use crate::tool_call::{Backend, exec, say};

#[derive(Debug, Args)]
pub(crate) struct SandboxStartArgs {
    /// Fresh sandboxes started per backend [default: 100 local, 20 docker; 3 with --quick].
    #[arg(long)]
    samples: Option<usize>,
    /// The backends to measure.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Backend::Local, Backend::Docker])]
    backend: Vec<Backend>,
    /// Where to write the figures as JSON [default: target/toren-bench/sandbox-start.json,
    /// or sandbox-start-quick.json with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
}

pub(crate) async fn run(args: SandboxStartArgs, quick: bool) -> anyhow::Result<Verdict> {
    let samples = |default: usize| {
        args.samples
            .unwrap_or(if quick { 3 } else { default })
            .max(1)
    };
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("sandboxes");
    let mut measured = figures::Measured {
        quick,
        local: None,
        docker: None,
        breakdown: None,
        plain: None,
    };
    for backend in &args.backend {
        match backend {
            Backend::Local => {
                let n = samples(100);
                say(&format!("sandbox-start: {n} local sandboxes"));
                let local = crate::tool_call::local_backend(&root)?;
                measured.local = Some(starts(&local, Backend::Local, n).await?);
            }
            Backend::Docker => {
                let n = samples(20);
                say(&format!(
                    "sandbox-start: {n} docker containers through the backend"
                ));
                let backend = crate::tool_call::docker_backend(&root).await?;
                measured.docker = Some(starts(&backend, Backend::Docker, n).await?);
                say(&format!(
                    "sandbox-start: {n} docker containers call by call"
                ));
                let breakdown_root = dir.path().join("breakdown");
                measured.breakdown = Some(
                    docker::breakdown(
                        backend.client(),
                        &backend.settings().exec_helper,
                        &breakdown_root,
                        n,
                    )
                    .await?,
                );
                measured.plain = Some(docker::plain_starts(backend.client(), n).await?);
            }
        }
    }
    let (outcome, table) = figures::report(&measured);
    table.print("toren-bench sandbox-start");
    let path = args.json.unwrap_or_else(|| {
        crate::toren_bin::default_output(if quick {
            "sandbox-start-quick.json"
        } else {
            "sandbox-start.json"
        })
    });
    crate::report::write_json(&path, &outcome)?;
    say(&format!(
        "sandbox-start: figures written to {}",
        path.display()
    ));
    Ok(Verdict::Correct)
}

/// Open + first output of `samples` fresh runs' sandboxes (after one warm-up), each
/// finished afterwards (for docker, its container removed; not timed).
async fn starts(
    backend: &dyn SandboxBackend,
    kind: Backend,
    samples: usize,
) -> anyhow::Result<Vec<Duration>> {
    let policy = crate::tool_call::policy(kind.as_str());
    let mut times = Vec::with_capacity(samples);
    for i in 0..samples + 1 {
        let run = RunId::new();
        let began = Instant::now();
        let sandbox = backend.open(&run, &policy, Vec::new()).await?;
        let out = exec(&*sandbox, "echo ready").await;
        let took = began.elapsed();
        drop(sandbox);
        let finished = backend.finish(&run).await;
        let out = out?;
        finished?;
        ensure!(out == "ready\n", "unexpected first output {out:?}");
        if i > 0 {
            times.push(took);
        }
    }
    Ok(times)
}
