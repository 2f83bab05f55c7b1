//! How fast the docker backend is, in one run: container start to first command output,
//! and the overhead of a trivial command (`true`) through the helper, through `docker
//! exec` (the Engine API's create/start/inspect exec, as bollard does it), and as a plain
//! `bash -c true` on the host, with the ratio of `docker exec` to the helper.
//!
//! ```text
//! cargo run --release -p toren-sandbox-docker --example exec_bench [-- ITERATIONS [IMAGE]]
//! ```
//!
//! Defaults: 200 iterations, the default image (built by `scripts/build-sandbox-image`).
//! Needs the helper (`scripts/build-exec-helper`, run by this program) and a Docker daemon.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, bail};
use bollard::Docker;
use bollard::exec::{CreateExecOptions, StartExecResults};
use futures::StreamExt;
use toren_protocol::{ApprovalPolicy, ResolvedPolicy, ResourceLimits, RunId};
use toren_sandbox::{ExecRequest, Sandbox};
use toren_sandbox_docker::{DEFAULT_IMAGE, DockerBackend, DockerSettings};

/// Fresh containers measured for start-to-first-output.
const STARTS: usize = 5;

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let mut args = std::env::args().skip(1);
    let iterations: usize = match args.next() {
        Some(n) => n.parse().context("ITERATIONS must be a number")?,
        None => 200,
    };
    let image = args.next().unwrap_or_else(|| DEFAULT_IMAGE.to_owned());
    let repo = Path::new(env!("CARGO_MANIFEST_DIR")).join("../..");
    let helper = PathBuf::from(script(&repo, "build-exec-helper")?);
    if image == DEFAULT_IMAGE {
        script(&repo, "build-sandbox-image")?;
    }

    let root = tempfile::tempdir()?;
    let backend = DockerBackend::connect(DockerSettings {
        sandbox_root: root.path().join("sandboxes"),
        default_image: image.clone(),
        exec_helper: helper,
        instance: format!("bench-{}", std::process::id()),
        docker_host: None,
    })
    .await?;
    let status = backend.check().await?;
    let info = backend.client().info().await?;
    let policy = ResolvedPolicy {
        checkpoints: Default::default(),
        backend: DockerBackend::NAME.to_owned(),
        image: Some(image.clone()),
        network: false,
        egress: None,
        approval: ApprovalPolicy::Never,
        env: Vec::new(),
        limits: ResourceLimits::default(),
        workspace: None,
        on_interrupt: Default::default(),
        sandbox_key: None,
        volume: None,
    };

    // Container start to first output: open a run's sandbox and time its first command.
    let mut starts = Vec::new();
    let mut runs = Vec::new();
    for _ in 0..STARTS {
        let run = RunId::new();
        let sandbox = backend.open(&run, &policy, Vec::new()).await?;
        let began = Instant::now();
        let out = exec(&*sandbox, "echo ready").await?;
        starts.push(began.elapsed());
        if out != "ready\n" {
            bail!("unexpected first output {out:?}");
        }
        runs.push((run, sandbox));
    }
    let (run, sandbox) = runs.pop().context("no sandbox")?;
    for (earlier, _) in &runs {
        backend.remove_run(earlier).await?;
    }

    // A trivial command through the helper.
    exec(&*sandbox, "true").await?;
    let helper_times = measure(iterations, || async {
        exec(&*sandbox, "true").await.map(drop)
    })
    .await?;

    // The same command through `docker exec`, in the same container, with the same shell.
    let shell = exec(
        &*sandbox,
        "test -x /bin/bash && echo /bin/bash || echo /bin/sh",
    )
    .await?;
    let shell = shell.trim().to_owned();
    let container = sandbox.instance_id();
    let docker = backend.client().clone();
    let exec_times = measure(iterations, || docker_exec(&docker, &container, &shell)).await?;

    // A process spawn on the host.
    let host_times = measure(iterations, || async {
        let status = tokio::process::Command::new("bash")
            .args(["-c", "true"])
            .stdin(Stdio::null())
            .status()
            .await?;
        anyhow::ensure!(status.success(), "bash -c true failed");
        Ok(())
    })
    .await?;
    backend.remove_run(&run).await?;

    report(&Report {
        engine: format!(
            "Docker Engine {} (API {}), storage driver {}, cgroup {}",
            status.server_version,
            status.api_version,
            info.driver.unwrap_or_default(),
            info.cgroup_version
                .map(|v| v.to_string())
                .unwrap_or_default()
        ),
        image,
        shell,
        iterations,
        starts,
        helper: helper_times,
        exec: exec_times,
        host: host_times,
    });
    Ok(())
}

fn script(repo: &Path, name: &str) -> anyhow::Result<String> {
    let out = Command::new(repo.join("scripts").join(name))
        .stderr(Stdio::inherit())
        .output()
        .with_context(|| format!("cannot run scripts/{name}"))?;
    anyhow::ensure!(out.status.success(), "scripts/{name} failed");
    Ok(String::from_utf8(out.stdout)?.trim().to_owned())
}

async fn exec(sandbox: &dyn Sandbox, command: &str) -> anyhow::Result<String> {
    let out = sandbox
        .exec(ExecRequest {
            command: command.to_owned(),
            timeout: Duration::from_secs(30),
            output_limit: 10_000,
        })
        .await?;
    anyhow::ensure!(out.exit_code == Some(0), "`{command}` failed: {out:?}");
    Ok(out.output)
}

/// One `docker exec` of `shell -c true`, waited for to its exit code.
async fn docker_exec(docker: &Docker, container: &str, shell: &str) -> anyhow::Result<()> {
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
            anyhow::ensure!(
                inspected.exit_code == Some(0),
                "docker exec failed: {inspected:?}"
            );
            return Ok(());
        }
        tokio::time::sleep(Duration::from_millis(1)).await;
    }
}

/// Times `iterations` calls of `f`, after 5 unmeasured ones.
async fn measure<F, Fut>(iterations: usize, f: F) -> anyhow::Result<Vec<Duration>>
where
    F: Fn() -> Fut,
    Fut: Future<Output = anyhow::Result<()>>,
{
    for _ in 0..5 {
        f().await?;
    }
    let mut times = Vec::with_capacity(iterations);
    for _ in 0..iterations {
        let began = Instant::now();
        f().await?;
        times.push(began.elapsed());
    }
    Ok(times)
}

struct Report {
    engine: String,
    image: String,
    shell: String,
    iterations: usize,
    starts: Vec<Duration>,
    helper: Vec<Duration>,
    exec: Vec<Duration>,
    host: Vec<Duration>,
}

/// The value below which `p` of `times` fall.
fn percentile(times: &[Duration], p: f64) -> Duration {
    let mut sorted = times.to_vec();
    sorted.sort();
    #[expect(
        clippy::cast_possible_truncation,
        clippy::cast_sign_loss,
        clippy::cast_precision_loss,
        reason = "an index into a short list"
    )]
    let at = ((sorted.len() as f64 - 1.0) * p).round() as usize;
    sorted.get(at).copied().unwrap_or_default()
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[expect(
    clippy::print_stdout,
    reason = "the benchmark's figures are its output"
)]
fn report(r: &Report) {
    println!("{}", r.engine);
    println!("image {}, commands under {}", r.image, r.shell);
    println!();
    let starts: Vec<String> = r.starts.iter().map(|d| format!("{:.0}", ms(*d))).collect();
    let start = percentile(&r.starts, 0.5);
    println!(
        "container start to first output: median {:.0} ms over {} fresh containers ({} ms)",
        ms(start),
        r.starts.len(),
        starts.join(", ")
    );
    println!();
    println!("trivial command (`true`), {} iterations:", r.iterations);
    println!("  {:<28} {:>10} {:>10}", "", "median", "p90");
    for (label, times) in [
        ("through the helper", &r.helper),
        ("docker exec (Engine API)", &r.exec),
        ("bash -c true on the host", &r.host),
    ] {
        println!(
            "  {label:<28} {:>7.2} ms {:>7.2} ms",
            ms(percentile(times, 0.5)),
            ms(percentile(times, 0.9))
        );
    }
    let ratio = ms(percentile(&r.exec, 0.5)) / ms(percentile(&r.helper, 0.5));
    let over_host = ms(percentile(&r.helper, 0.5)) - ms(percentile(&r.host, 0.5));
    println!();
    println!("docker exec / helper (medians): {ratio:.1}x");
    println!("helper overhead over a host spawn (medians): {over_host:.2} ms");
    println!();
    let verdict = |ok: bool| if ok { "met" } else { "MISSED" };
    println!(
        "target: helper at least 5x faster than docker exec: {}",
        verdict(ratio >= 5.0)
    );
    println!(
        "target: container start to first output under 1 s: {}",
        verdict(start < Duration::from_secs(1))
    );
}
