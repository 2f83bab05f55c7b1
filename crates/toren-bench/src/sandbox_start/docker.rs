//! Where a docker sandbox's start spends its time: the backend's start path replayed call
//! by call against the daemon, each Engine API call timed on its own — the image check
//! (`open`), the inspect that finds no container yet, create, attach, start — and then the
//! first request to the helper (PID 1) until its answer arrives, which covers the helper
//! becoming ready. The container is built by the backend's own pure `container_body`, so it
//! is the container a run gets; it is removed after each sample (timed too, off the path).

use std::os::unix::fs::MetadataExt as _;
use std::path::Path;
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail, ensure};
use bollard::Docker;
use bollard::container::LogOutput;
use bollard::models::ContainerCreateBody;
use bollard::query_parameters::{
    AttachContainerOptionsBuilder, CreateContainerOptionsBuilder, InspectContainerOptions,
    RemoveContainerOptionsBuilder, StartContainerOptions,
};
use futures::StreamExt as _;
use tokio::io::AsyncWriteExt as _;
use toren_exec::protocol::Response;
use toren_protocol::ResourceLimits;
use toren_sandbox::SANDBOX_WORKDIR;
use toren_sandbox_docker::{ContainerSpec, DEFAULT_IMAGE, base_env, container_body};

/// One container start, step by step.
#[derive(Clone, Debug, Default)]
pub(crate) struct Steps {
    pub(crate) inspect_image: Duration,
    pub(crate) inspect_container: Duration,
    pub(crate) create: Duration,
    pub(crate) attach: Duration,
    pub(crate) start: Duration,
    pub(crate) first_exec: Duration,
    /// The sum of the above: open to first output.
    pub(crate) total: Duration,
    /// Removing the container afterwards (not on the start path).
    pub(crate) remove: Duration,
}

/// Starts `samples` containers as the backend does and times each step.
pub(crate) async fn breakdown(
    docker: &Docker,
    helper: &Path,
    root: &Path,
    samples: usize,
) -> anyhow::Result<Vec<Steps>> {
    let mut all = Vec::with_capacity(samples);
    for i in 0..samples + 1 {
        let steps = one(docker, helper, root, i).await?;
        // The first is a warm-up (the daemon's caches, the helper's page cache).
        if i > 0 {
            all.push(steps);
        }
    }
    Ok(all)
}

async fn one(docker: &Docker, helper: &Path, root: &Path, i: usize) -> anyhow::Result<Steps> {
    let run = format!("breakdown-{}-{i}", std::process::id());
    let name = format!("toren-bench-{run}");
    let workspace = root.join(&run);
    std::fs::create_dir_all(&workspace)?;
    let meta = std::fs::metadata(&workspace)?;
    let instance = format!("bench-{}", std::process::id());
    let spec = ContainerSpec {
        image: DEFAULT_IMAGE,
        run: &run,
        instance: &instance,
        workspace: &workspace,
        helper,
        user: (meta.uid(), meta.gid()),
        network: false,
        limits: ResourceLimits::default(),
        created: jiff::Timestamp::now(),
        egress: None,
    };
    let mut steps = Steps::default();
    let began = Instant::now();

    let t = Instant::now();
    docker
        .inspect_image(DEFAULT_IMAGE)
        .await
        .context("inspect the image")?;
    steps.inspect_image = t.elapsed();

    let t = Instant::now();
    let found = docker
        .inspect_container(&name, None::<InspectContainerOptions>)
        .await;
    steps.inspect_container = t.elapsed();
    ensure!(found.is_err(), "the container {name} exists already");

    let t = Instant::now();
    let options = CreateContainerOptionsBuilder::new().name(&name).build();
    let created = docker
        .create_container(Some(options), container_body(&spec))
        .await
        .context("create the container")?;
    steps.create = t.elapsed();

    let t = Instant::now();
    let options = AttachContainerOptionsBuilder::new()
        .stream(true)
        .stdin(true)
        .stdout(true)
        .stderr(true)
        .logs(false)
        .build();
    let mut attached = docker
        .attach_container(&created.id, Some(options))
        .await
        .context("attach to the container")?;
    steps.attach = t.elapsed();

    let t = Instant::now();
    docker
        .start_container(&created.id, None::<StartContainerOptions>)
        .await
        .context("start the container")?;
    steps.start = t.elapsed();

    let t = Instant::now();
    // Written as the wire format, so fields the helper may learn later keep their defaults.
    let request = serde_json::json!({
        "id": "first",
        "command": "echo ready",
        "cwd": SANDBOX_WORKDIR,
        "env": base_env(),
        "timeout_ms": 30_000,
        "output_limit": 30_000,
        "cpu_secs": ResourceLimits::default().cpu_secs,
    });
    let mut line = serde_json::to_vec(&request)?;
    line.push(b'\n');
    attached.input.write_all(&line).await?;
    attached.input.flush().await?;
    let response = first_response(&mut attached.output).await?;
    steps.first_exec = t.elapsed();
    steps.total = began.elapsed();
    match response {
        Response::Finished(f) if f.output == "ready\n" && f.exit_code == Some(0) => {}
        other => bail!("unexpected first answer from the helper: {other:?}"),
    }

    drop(attached);
    let t = Instant::now();
    let options = RemoveContainerOptionsBuilder::new()
        .force(true)
        .v(true)
        .build();
    docker
        .remove_container(&created.id, Some(options))
        .await
        .context("remove the container")?;
    steps.remove = t.elapsed();
    Ok(steps)
}

/// Starts of a plain container of the default image running `true` with no options at all
/// (created beforehand, untimed), attached, until it exits: the daemon's and runc's own
/// cost of starting any container on this machine, for comparison.
pub(crate) async fn plain_starts(docker: &Docker, samples: usize) -> anyhow::Result<Vec<Duration>> {
    let mut times = Vec::with_capacity(samples);
    for i in 0..samples + 1 {
        let name = format!("toren-bench-plain-{}-{i}", std::process::id());
        let options = CreateContainerOptionsBuilder::new().name(&name).build();
        let body = ContainerCreateBody {
            image: Some(DEFAULT_IMAGE.to_owned()),
            cmd: Some(vec!["true".to_owned()]),
            ..Default::default()
        };
        let created = docker
            .create_container(Some(options), body)
            .await
            .context("create a plain container")?;
        let t = Instant::now();
        let options = AttachContainerOptionsBuilder::new()
            .stream(true)
            .stdout(true)
            .stderr(true)
            .build();
        let mut attached = docker
            .attach_container(&created.id, Some(options))
            .await
            .context("attach to a plain container")?;
        docker
            .start_container(&created.id, None::<StartContainerOptions>)
            .await
            .context("start a plain container")?;
        while let Some(item) = attached.output.next().await {
            item.context("a plain container's output")?;
        }
        let took = t.elapsed();
        let options = RemoveContainerOptionsBuilder::new()
            .force(true)
            .v(true)
            .build();
        docker
            .remove_container(&created.id, Some(options))
            .await
            .context("remove a plain container")?;
        if i > 0 {
            times.push(took);
        }
    }
    Ok(times)
}

type Output = std::pin::Pin<
    Box<dyn futures::Stream<Item = Result<LogOutput, bollard::errors::Error>> + Send>,
>;

/// Reads the container's stdout until one whole line, and decodes it as the answer.
async fn first_response(output: &mut Output) -> anyhow::Result<Response> {
    let mut stdout = Vec::new();
    let deadline = tokio::time::Instant::now() + Duration::from_secs(30);
    loop {
        let item = tokio::time::timeout_at(deadline, output.next())
            .await
            .context("the helper did not answer within 30 s")?;
        match item {
            Some(Ok(LogOutput::StdOut { message } | LogOutput::Console { message })) => {
                stdout.extend_from_slice(&message);
                if let Some(end) = stdout.iter().position(|b| *b == b'\n') {
                    return serde_json::from_slice(&stdout[..end])
                        .context("the helper's answer is not a response");
                }
            }
            Some(Ok(_)) => {}
            Some(Err(e)) => return Err(e).context("the attach stream failed"),
            None => bail!("the container's output ended before the helper answered"),
        }
    }
}
