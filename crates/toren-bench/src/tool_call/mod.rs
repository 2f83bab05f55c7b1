//! `tool-call`: the trivial tool call (`bash: true`) end to end, per
//! backend, against its floors. For each backend a [`Worker`](toren_worker::Worker) drives
//! one run over a real SQLite store whose scripted model asks for `bash: true` again and
//! again; each call is timed from `model_responded` committed to `tool_completed` committed
//! ([`worker`]). Beside it: the backend's own `exec` of `true` (no journal, no worker; for
//! `local` also without the helper, a fresh bubblewrap per command, what `toren` falls back
//! to where the helper is missing), and the floors ([`floors`]): `bash -c true` spawned directly
//! (host, and with the sandbox's environment), `bwrap` with the local backend's exact
//! arguments (local) and with one piece left out at a time, and `docker exec` in a running
//! container (what most runtimes do). Every ratio is of p50s measured in this one run.

mod backends;
mod figures;
mod floors;
mod worker;

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use anyhow::ensure;
use clap::{Args, ValueEnum};
use toren_sandbox::{ExecRequest, Sandbox, SandboxBackend};
use toren_sandbox_docker::DockerBackend;

use crate::api_load::Verdict;

pub(crate) use backends::{docker as docker_backend, local as local_backend, policy};
pub(crate) use floors::measure;

/// A sandbox backend under measurement.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum, serde::Serialize)]
#[serde(rename_all = "snake_case")]
pub(crate) enum Backend {
    /// bubblewrap, one sandbox kept per run with the static helper as its PID 1 (as
    /// `toren` runs it; the `bwrap` floor is a fresh sandbox per command).
    Local,
    /// A container per run, commands through the `toren-exec` helper.
    Docker,
}

impl Backend {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Docker => "docker",
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct ToolCallArgs {
    /// Measured calls of each kind [default: 300; 10 with --quick].
    #[arg(long)]
    iterations: Option<usize>,
    /// The backends to measure.
    #[arg(long, value_enum, value_delimiter = ',', default_values_t = [Backend::Local, Backend::Docker])]
    backend: Vec<Backend>,
    /// Where to write the figures as JSON [default: target/toren-bench/tool-call.json, or
    /// tool-call-quick.json with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
}

pub(crate) async fn run(args: ToolCallArgs, quick: bool) -> anyhow::Result<Verdict> {
    let iterations = args
        .iterations
        .unwrap_or(if quick { 10 } else { 300 })
        .max(1);
    let dir = tempfile::tempdir()?;
    let root = dir.path().join("sandboxes");
    say(&format!(
        "tool-call: {iterations} calls of each kind, backends {}",
        args.backend
            .iter()
            .map(|b| b.as_str())
            .collect::<Vec<_>>()
            .join(", ")
    ));

    let host = floors::host(iterations).await?;
    let host_env = floors::host_with_sandbox_env(iterations).await?;
    let floor_ws = dir.path().join("floor-workspace");
    std::fs::create_dir_all(&floor_ws)?;
    let bwrap_bin = backends::bwrap();
    let bwrap = floors::bwrap(&bwrap_bin, &floor_ws, floors::Bwrap::Exact, iterations).await?;
    let mut bwrap_without = Vec::new();
    for variant in [
        floors::Bwrap::NoSeccomp,
        floors::Bwrap::SharedNet,
        floors::Bwrap::NoShell,
    ] {
        bwrap_without.push((
            variant,
            floors::bwrap(&bwrap_bin, &floor_ws, variant, iterations).await?,
        ));
    }
    let mut measured = figures::Measured {
        iterations,
        quick,
        host,
        host_env,
        bwrap,
        bwrap_without,
        docker_exec: None,
        local_fresh_exec: None,
        backends: Vec::new(),
    };
    for backend in &args.backend {
        say(&format!("tool-call: the {} backend", backend.as_str()));
        let times = match backend {
            Backend::Local => {
                let local: Arc<dyn SandboxBackend> = Arc::new(backends::local(&root)?);
                let exec = backend_exec(&*local, *backend, &root, iterations).await?.0;
                let fresh = backends::local_without_helper(&root)?;
                measured.local_fresh_exec =
                    Some(backend_exec(&fresh, *backend, &root, iterations).await?.0);
                let calls = worker::tool_calls(local, policy("local"), &root, iterations).await?;
                (exec, calls)
            }
            Backend::Docker => {
                let docker = backends::docker(&root).await?;
                let (exec, shell, container, run) =
                    docker_exec_pair(&docker, &root, iterations).await?;
                measured.docker_exec = Some(
                    floors::docker_exec(docker.client(), &container, &shell, iterations).await?,
                );
                docker.remove_run(&run).await?;
                let calls = worker::tool_calls(
                    Arc::new(docker),
                    policy(DockerBackend::NAME),
                    &root,
                    iterations,
                )
                .await?;
                (exec, calls)
            }
        };
        measured.backends.push(figures::BackendTimes {
            backend: *backend,
            exec: times.0,
            calls: times.1,
        });
    }

    let (outcome, table) = figures::report(&measured);
    table.print("toren-bench tool-call");
    let path = args.json.unwrap_or_else(|| {
        crate::toren_bin::default_output(if quick {
            "tool-call-quick.json"
        } else {
            "tool-call.json"
        })
    });
    crate::report::write_json(&path, &outcome)?;
    say(&format!("tool-call: figures written to {}", path.display()));
    Ok(Verdict::Correct)
}

/// The backend's own `exec` of `true` in one opened sandbox, timed; also the sandbox.
async fn backend_exec(
    backend: &dyn SandboxBackend,
    kind: Backend,
    root: &Path,
    iterations: usize,
) -> anyhow::Result<(Vec<Duration>, Arc<dyn Sandbox>, toren_protocol::RunId)> {
    let run = toren_protocol::RunId::new();
    let mut policy = policy(kind.as_str());
    let workspace = toren_sandbox::Workspace::create(root, run.as_str())?;
    policy.workspace = Some(workspace.path().display().to_string());
    let sandbox = backend.open(&run, &policy, Vec::new()).await?;
    let times = measure(iterations, || async {
        exec(&*sandbox, "true").await.map(drop)
    })
    .await?;
    Ok((times, sandbox, run))
}

/// The docker backend's exec of `true` through its helper, and what `docker exec` needs to
/// run the same shell in the same container: the shell, the container id and the run.
async fn docker_exec_pair(
    docker: &DockerBackend,
    root: &Path,
    iterations: usize,
) -> anyhow::Result<(Vec<Duration>, String, String, toren_protocol::RunId)> {
    let (times, sandbox, run) = backend_exec(docker, Backend::Docker, root, iterations).await?;
    let shell = exec(
        &*sandbox,
        "test -x /bin/bash && echo /bin/bash || echo /bin/sh",
    )
    .await?;
    Ok((times, shell.trim().to_owned(), sandbox.instance_id(), run))
}

/// Runs `command` in `sandbox` and returns its output; a non-zero exit is an error.
pub(crate) async fn exec(sandbox: &dyn Sandbox, command: &str) -> anyhow::Result<String> {
    let out = sandbox
        .exec(ExecRequest {
            command: command.to_owned(),
            timeout: Duration::from_secs(30),
            output_limit: 30_000,
        })
        .await?;
    ensure!(out.exit_code == Some(0), "`{command}` failed: {out:?}");
    Ok(out.output)
}

#[expect(clippy::print_stderr, reason = "progress is for people, on stderr")]
pub(crate) fn say(message: &str) {
    eprintln!("{message}");
}
