//! What the docker tests share: the helper binary and the test images (built once per
//! test process by the project's scripts), a backend with an instance name of its own per
//! test (so tests never see each other's containers), and cleanup of that instance's
//! containers when the test ends.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::sync::{Arc, OnceLock};
use std::time::Duration;

use bollard::Docker;
use bollard::query_parameters::{ListContainersOptionsBuilder, RemoveContainerOptionsBuilder};
use tempfile::TempDir;
use toren_protocol::{ApprovalPolicy, ResolvedPolicy, ResourceLimits, RunId};
use toren_sandbox::{ExecOutput, ExecRequest, Sandbox};
use toren_sandbox_docker::{DEFAULT_IMAGE, DockerBackend, DockerSettings, LABEL_INSTANCE};

/// busybox as /bin/sh and nothing else (scripts/build-test-images).
pub(crate) const SH_IMAGE: &str = "toren-test-sh:latest";

const DAEMON_HINT: &str = "these tests need a running Docker daemon at /var/run/docker.sock \
     (start it with `sudo systemctl start docker`, or `dockerd &`)";

fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// Runs a script of the project and returns its last line of stdout.
fn script(name: &str) -> String {
    let out = Command::new(repo().join("scripts").join(name))
        .output()
        .unwrap_or_else(|e| panic!("cannot run scripts/{name}: {e}"));
    assert!(
        out.status.success(),
        "scripts/{name} failed ({}):\n{}\n{DAEMON_HINT}",
        out.status,
        String::from_utf8_lossy(&out.stderr)
    );
    let stdout = String::from_utf8(out.stdout).unwrap();
    stdout.lines().last().unwrap_or_default().trim().to_owned()
}

/// The static helper, built once.
pub(crate) fn helper() -> PathBuf {
    static HELPER: OnceLock<PathBuf> = OnceLock::new();
    HELPER
        .get_or_init(|| PathBuf::from(script("build-exec-helper")))
        .clone()
}

/// Builds the small test images (seconds) once.
pub(crate) fn test_images() {
    static BUILT: OnceLock<()> = OnceLock::new();
    BUILT.get_or_init(|| {
        script("build-test-images");
    });
}

/// Builds the default image (minutes the first time; cached afterwards) once.
pub(crate) fn default_image() -> &'static str {
    static BUILT: OnceLock<String> = OnceLock::new();
    BUILT.get_or_init(|| script("build-sandbox-image"))
}

/// A daemon client, failing loudly with the fix if there is no daemon.
pub(crate) async fn docker() -> Docker {
    let docker = Docker::connect_with_host("unix:///var/run/docker.sock")
        .unwrap_or_else(|e| panic!("{e}\n{DAEMON_HINT}"));
    docker
        .negotiate_version()
        .await
        .unwrap_or_else(|e| panic!("{e}\n{DAEMON_HINT}"))
}

/// One test's backend: its own sandbox root and instance name; removes the instance's
/// containers when dropped.
pub(crate) struct Env {
    pub(crate) root: TempDir,
    pub(crate) backend: DockerBackend,
    pub(crate) instance: String,
}

impl Env {
    pub(crate) async fn new() -> Self {
        Self::with_image(SH_IMAGE).await
    }

    /// A backend whose default image is `image`.
    pub(crate) async fn with_image(image: &str) -> Self {
        test_images();
        let root = tempfile::tempdir().unwrap();
        let instance = format!("test-{}", ulid::Ulid::generate().to_string().to_lowercase());
        let backend = DockerBackend::connect(settings(&root, &instance, image))
            .await
            .unwrap_or_else(|e| panic!("{e}\n{DAEMON_HINT}"));
        Self {
            root,
            backend,
            instance,
        }
    }

    /// Opens a sandbox for a new run.
    pub(crate) async fn open(&self, policy: &ResolvedPolicy) -> (RunId, Arc<dyn Sandbox>) {
        self.open_with_env(policy, Vec::new()).await
    }

    pub(crate) async fn open_with_env(
        &self,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
    ) -> (RunId, Arc<dyn Sandbox>) {
        let run = RunId::new();
        let sandbox = self.backend.open(&run, policy, env).await.unwrap();
        (run, sandbox)
    }

    /// Container ids of this test's instance.
    pub(crate) async fn containers(&self) -> Vec<String> {
        containers_of(&docker().await, &self.instance).await
    }
}

pub(crate) fn settings(root: &TempDir, instance: &str, image: &str) -> DockerSettings {
    DockerSettings {
        sandbox_root: root.path().join("sandboxes"),
        default_image: image.to_owned(),
        exec_helper: helper(),
        instance: instance.to_owned(),
        docker_host: None,
    }
}

impl Drop for Env {
    fn drop(&mut self) {
        let instance = self.instance.clone();
        let _ = std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_current_thread()
                .enable_all()
                .build()
                .unwrap();
            runtime.block_on(async {
                let docker = docker().await;
                for id in containers_of(&docker, &instance).await {
                    let options = RemoveContainerOptionsBuilder::new().force(true).build();
                    let _ = docker.remove_container(&id, Some(options)).await;
                }
            });
        })
        .join();
    }
}

pub(crate) async fn containers_of(docker: &Docker, instance: &str) -> Vec<String> {
    let filters = HashMap::from([("label", vec![format!("{LABEL_INSTANCE}={instance}")])]);
    let options = ListContainersOptionsBuilder::new()
        .all(true)
        .filters(&filters)
        .build();
    docker
        .list_containers(Some(options))
        .await
        .unwrap()
        .into_iter()
        .filter_map(|c| c.id)
        .collect()
}

pub(crate) fn policy() -> ResolvedPolicy {
    ResolvedPolicy {
        checkpoints: Default::default(),
        backend: DockerBackend::NAME.to_owned(),
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

pub(crate) fn with_image(image: &str) -> ResolvedPolicy {
    ResolvedPolicy {
        checkpoints: Default::default(),
        image: Some(image.to_owned()),
        ..policy()
    }
}

pub(crate) async fn run_for(sandbox: &dyn Sandbox, command: &str, timeout: Duration) -> ExecOutput {
    sandbox
        .exec(ExecRequest {
            command: command.to_owned(),
            timeout,
            output_limit: 30_000,
        })
        .await
        .unwrap()
}

pub(crate) async fn run(sandbox: &dyn Sandbox, command: &str) -> ExecOutput {
    run_for(sandbox, command, Duration::from_secs(30)).await
}

/// `DEFAULT_IMAGE`, built if needed.
pub(crate) fn bookworm() -> &'static str {
    let image = default_image();
    assert_eq!(image, DEFAULT_IMAGE);
    image
}
