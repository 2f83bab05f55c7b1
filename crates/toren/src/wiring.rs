//! The one place that reads the process environment and picks concrete backends: the
//! settings, the SQLite event log, the sandbox backend and the model provider.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::anyhow;
use async_trait::async_trait;
use toren_config::{SandboxChoice, Settings};
use toren_model::{ModelProvider, ProviderSettings};
use toren_protocol::{AgentSpec, ResolvedPolicy, RunId};
use toren_sandbox::{LocalBackend, LocalSettings, Sandbox};
use toren_sandbox_docker::{DEFAULT_IMAGE, DockerBackend, DockerSettings};
use toren_store::{EventLog, SqliteStore};
use toren_worker::SandboxBackend;

use crate::exit::Failure;

/// Resolves settings from the environment; a bad value is a usage error (exit 2).
pub(crate) fn settings() -> Result<Settings, Failure> {
    Settings::from_lookup(|name| std::env::var(name).ok()).map_err(Failure::usage)
}

/// Looks a variable up in this process's environment (for granted sandbox variables).
pub(crate) fn env_lookup(name: &str) -> Option<String> {
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// Opens the event log named by `TOREN_DATABASE_URL`. The store creates missing
/// directories (`TOREN_HOME` for the default database) mode 0700 and the database 0600; an
/// existing `TOREN_HOME` that others may enter is the operator's to tighten, so it is only
/// warned about (its database and workspaces are private either way).
pub(crate) async fn store(settings: &Settings) -> Result<Arc<dyn EventLog>, Failure> {
    warn_if_shared(&settings.home);
    let store = SqliteStore::open(settings.database_url.expose())
        .await
        .map_err(|e| {
            Failure::usage(anyhow!(e).context("cannot open the event log (TOREN_DATABASE_URL)"))
        })?;
    Ok(Arc::new(store))
}

/// Warns when others may enter `home`.
fn warn_if_shared(home: &Path) {
    use std::os::unix::fs::PermissionsExt;
    let Ok(meta) = std::fs::metadata(home) else {
        return;
    };
    let mode = meta.permissions().mode() & 0o777;
    if mode & 0o077 != 0 {
        tracing::warn!(
            "TOREN_HOME `{}` is open to other users (mode {mode:o}); Toren keeps its database \
             and workspaces private inside it; `chmod 700` it so that others cannot even list it",
            home.display()
        );
    }
}

/// A sandbox backend ready for the worker, and the docker client when it is docker (for
/// the reaper).
pub(crate) struct Backend {
    pub(crate) seam: Arc<dyn SandboxBackend>,
    pub(crate) docker: Option<DockerBackend>,
}

/// The sandbox backend a run's pinned policy names, checked once: a backend that cannot
/// work here fails now, naming the fix. A resumed run gets the backend it was created
/// with, whatever `TOREN_SANDBOX` says today (I-4).
pub(crate) async fn sandbox_backend(
    policy: &ResolvedPolicy,
    settings: &Settings,
) -> Result<Backend, Failure> {
    match policy.backend.as_str() {
        LocalBackend::NAME => {
            let backend = LocalBackend::new(LocalSettings {
                sandbox_root: settings.sandbox_root.clone(),
                bwrap: None,
            });
            backend.check().map_err(Failure::usage)?;
            Ok(Backend {
                seam: Arc::new(Local(backend)),
                docker: None,
            })
        }
        DockerBackend::NAME => {
            let backend = docker(settings).await?;
            Ok(Backend {
                seam: Arc::new(Docker(backend.clone())),
                docker: Some(backend),
            })
        }
        other => Err(Failure::usage(anyhow!(
            "this run's sandbox backend `{other}` is not available in this version of toren; \
             use a toren that provides it"
        ))),
    }
}

/// Connects to the docker daemon and checks the backend can work: daemon reachable,
/// helper present and static. A missing default image is only a warning here (runs that
/// name their own image do not need it); a run that needs it fails naming the fix.
pub(crate) async fn docker(settings: &Settings) -> Result<DockerBackend, Failure> {
    let backend = DockerBackend::connect(DockerSettings {
        sandbox_root: settings.sandbox_root.clone(),
        default_image: DEFAULT_IMAGE.to_owned(),
        exec_helper: exec_helper(settings),
        instance: instance(settings),
        docker_host: settings.docker_host.clone(),
    })
    .await
    .map_err(Failure::usage)?;
    let status = backend.check().await.map_err(Failure::usage)?;
    tracing::info!(
        server = %status.server_version,
        api = %status.api_version,
        "docker backend ready"
    );
    if !status.default_image_present {
        tracing::warn!(
            "the default sandbox image {DEFAULT_IMAGE} is missing; build it with scripts/build-sandbox-image"
        );
    }
    Ok(backend)
}

/// The `toren-exec` helper: `TOREN_EXEC_HELPER`, else where `scripts/build-exec-helper`
/// puts the static build in the tree this binary came from, else beside this binary (an
/// installed copy). A plain `cargo build` also leaves a dynamic `toren-exec` beside the
/// binary; the static build wins over it.
fn exec_helper(settings: &Settings) -> PathBuf {
    if let Some(path) = &settings.exec_helper {
        return path.clone();
    }
    let dir = std::env::current_exe()
        .ok()
        .and_then(|exe| exe.parent().map(Path::to_path_buf))
        .unwrap_or_default();
    let beside = dir.join("toren-exec");
    let built = dir.join("../exec-helper/x86_64-unknown-linux-gnu/release/toren-exec");
    if built.exists() { built } else { beside }
}

/// This installation's name in container labels: stable for one event log, different for
/// two, so one installation's reaper never touches another's containers.
pub(crate) fn instance(settings: &Settings) -> String {
    // FNV-1a: stable across releases and platforms, unlike std's hasher.
    let hash = settings
        .database_url
        .expose()
        .bytes()
        .fold(0xcbf2_9ce4_8422_2325_u64, |h, b| {
            (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3)
        });
    format!("toren-{hash:016x}")
}

/// The policy a new run of `agent` is pinned to, or a usage error if the agent needs a
/// sandbox this process cannot give it.
pub(crate) fn resolve_policy(
    agent: &AgentSpec,
    settings: &Settings,
) -> Result<Option<ResolvedPolicy>, Failure> {
    let Some(sandbox) = &agent.sandbox else {
        return Ok(None);
    };
    let backend = match settings.sandbox {
        SandboxChoice::Local => LocalBackend::NAME,
        SandboxChoice::Docker => DockerBackend::NAME,
        SandboxChoice::None => {
            return Err(Failure::usage(anyhow!(
                "agent `{}` has a sandbox, but sandboxes are disabled (TOREN_SANDBOX=none); set TOREN_SANDBOX=local to run it on this machine with bubblewrap",
                agent.name
            )));
        }
    };
    Ok(Some(ResolvedPolicy {
        backend: backend.to_owned(),
        image: sandbox.image.clone(),
        network: sandbox.network,
        approval: sandbox.approval,
        env: sandbox.env.clone(),
        limits: sandbox.limits,
        workspace: None,
        on_interrupt: sandbox.on_interrupt,
    }))
}

/// The model provider for `agent`; a missing key is a usage error naming the variable.
pub(crate) fn model(
    agent: &AgentSpec,
    settings: &Settings,
) -> Result<Arc<dyn ModelProvider>, Failure> {
    let provider_settings = ProviderSettings {
        anthropic_api_key: settings
            .anthropic_api_key
            .as_ref()
            .map(|k| k.expose().to_owned()),
        anthropic_base_url: settings.anthropic_base_url.clone(),
        openai_api_key: settings
            .openai_api_key
            .as_ref()
            .map(|k| k.expose().to_owned()),
        openai_base_url: settings.openai_base_url.clone(),
        ollama_host: settings.ollama_host.clone(),
    };
    let agent_dir = agent
        .source
        .as_deref()
        .map(Path::new)
        .and_then(Path::parent);
    toren_model::build_provider(&agent.model, agent_dir, &provider_settings)
        .map_err(|e| Failure::usage(anyhow!(e).context(format!("agent `{}`", agent.name))))
}

/// The docker backend behind the worker's backend seam.
struct Docker(DockerBackend);

#[async_trait]
impl SandboxBackend for Docker {
    fn name(&self) -> &'static str {
        DockerBackend::NAME
    }

    async fn open(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
    ) -> Result<Arc<dyn Sandbox>, toren_sandbox::Error> {
        self.0.open(run, policy, env).await.map_err(Into::into)
    }

    async fn finish(&self, run: &RunId) -> Result<(), toren_sandbox::Error> {
        self.0.remove_run(run).await.map(drop).map_err(Into::into)
    }
}

/// The local (bubblewrap) backend behind the worker's backend seam.
struct Local(LocalBackend);

#[async_trait]
impl SandboxBackend for Local {
    fn name(&self) -> &'static str {
        "local"
    }

    async fn open(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
    ) -> Result<Arc<dyn Sandbox>, toren_sandbox::Error> {
        self.0.open(run, policy, env).await
    }
}
