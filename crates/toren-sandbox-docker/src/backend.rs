//! [`DockerBackend`]: the connection to the daemon (API version negotiated once), the
//! startup check, and opening one run's sandbox — the workspace now, the container lazily
//! at its first command. Also removes a finished run's container. It is the worker's
//! [`SandboxBackend`] as it is (`open`, and `finish` removing the container). The reaper's
//! listing and sweeping live in `reaper`.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use async_trait::async_trait;
use bollard::Docker;
use toren_protocol::{ResolvedPolicy, RunId};
use toren_sandbox::egress::{self, EgressHooks, RunningProxy, SharedResolver};
use toren_sandbox::{Sandbox, SandboxBackend};

use crate::container;
use crate::error::{Error, Result};
use crate::sandbox::{DockerSandbox, Setup};
use crate::spec::{base_env, container_name};

/// Where the daemon listens when the settings name no host.
pub const DEFAULT_DOCKER_HOST: &str = "unix:///var/run/docker.sock";

/// Settings of the docker backend, resolved by the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DockerSettings {
    /// Workspaces live at `<sandbox_root>/<run id>/workspace`, bind-mounted into the containers.
    pub sandbox_root: PathBuf,
    /// The image for agents that name none (e.g. [`DEFAULT_IMAGE`](crate::DEFAULT_IMAGE)).
    pub default_image: String,
    /// The static `toren-exec` binary (`scripts/build-exec-helper` prints its path).
    pub exec_helper: PathBuf,
    /// Names this Toren installation in container labels: the reaper only ever touches
    /// containers of its own instance. Letters, digits, `_`, `.`, `-`.
    pub instance: String,
    /// The daemon's address (`unix:///…` or `tcp://…`); `None` means
    /// [`DEFAULT_DOCKER_HOST`]. The caller reads `DOCKER_HOST`.
    pub docker_host: Option<String>,
}

/// What [`DockerBackend::check`] found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct DockerStatus {
    /// The Engine's version, e.g. `20.10.24+dfsg1`.
    pub server_version: String,
    /// The API version spoken with it, after negotiation.
    pub api_version: String,
    /// Whether the default image is present (if not, runs without `sandbox.image` fail
    /// with the command that builds it).
    pub default_image_present: bool,
}

/// The docker backend.
#[derive(Clone, Debug)]
pub struct DockerBackend {
    settings: DockerSettings,
    docker: Docker,
    /// The container key of each run opened here that is not its own id (a session's
    /// turns share the session's container), so `finish` removes the right one.
    keys: Arc<std::sync::Mutex<std::collections::HashMap<RunId, String>>>,
    /// How the egress proxies of runs with a host list resolve names.
    resolver: SharedResolver,
    /// What the egress proxies verify the hosts that get secrets against.
    upstream: toren_egress::UpstreamTrust,
}

impl DockerBackend {
    /// The backend's name, as recorded in policies and events.
    pub const NAME: &'static str = "docker";

    /// Connects to the daemon and negotiates the API version (so old and new Engines both
    /// work). Fails, naming the fix, if the daemon cannot be reached.
    pub async fn connect(settings: DockerSettings) -> Result<Self> {
        check_instance(&settings.instance)?;
        let host = settings
            .docker_host
            .clone()
            .unwrap_or_else(|| DEFAULT_DOCKER_HOST.to_owned());
        let unreachable = |source| Error::DaemonUnreachable {
            host: host.clone(),
            source,
        };
        let docker = Docker::connect_with_host(&host).map_err(unreachable)?;
        let docker = docker.negotiate_version().await.map_err(unreachable)?;
        Ok(Self {
            settings,
            docker,
            keys: Arc::default(),
            resolver: SharedResolver::default(),
            upstream: toren_egress::UpstreamTrust::default(),
        })
    }

    /// The egress proxies of runs with a host list resolve names with `resolver` instead of
    /// the system's (the binary's test-only mapping). Whatever it answers, the proxy's
    /// address checks still refuse loopback, private and metadata addresses.
    #[must_use]
    pub fn with_egress_resolver(mut self, resolver: Arc<dyn toren_egress::Resolver>) -> Self {
        self.resolver = SharedResolver(resolver);
        self
    }

    /// The egress proxies verify the hosts that get secrets against `upstream` instead of
    /// the system's roots. Tests only: the binary sets it from a test-only setting.
    #[must_use]
    pub fn with_egress_upstream(mut self, upstream: toren_egress::UpstreamTrust) -> Self {
        self.upstream = upstream;
        self
    }

    pub fn settings(&self) -> &DockerSettings {
        &self.settings
    }

    /// The daemon client, with the negotiated API version.
    pub fn client(&self) -> &Docker {
        &self.docker
    }

    /// The startup check: the daemon answers, and the helper exists and is static. Says
    /// whether the default image is there (its absence only fails runs that need it).
    pub async fn check(&self) -> Result<DockerStatus> {
        let host = self
            .settings
            .docker_host
            .clone()
            .unwrap_or_else(|| DEFAULT_DOCKER_HOST.to_owned());
        let version = self
            .docker
            .version()
            .await
            .map_err(|source| Error::DaemonUnreachable { host, source })?;
        check_helper(&self.settings.exec_helper)?;
        let default_image_present =
            container::image_present(&self.docker, &self.settings.default_image).await?;
        Ok(DockerStatus {
            server_version: version.version.unwrap_or_default(),
            api_version: self.docker.client_version().to_string(),
            default_image_present,
        })
    }

    /// Creates (or reopens) the run's workspace and returns its sandbox. `env` holds the
    /// granted variables with their values; they travel with each command to the helper,
    /// never into the container's configuration or an argv. The container itself is made
    /// at the first command; the image is checked now, so a missing one fails at once.
    /// A host list gets an egress proxy with the default hooks ([`Self::open_with`]).
    pub async fn open(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
    ) -> Result<Arc<dyn Sandbox>> {
        self.open_with(run, policy, env, EgressHooks::default())
            .await
    }

    /// [`open`](Self::open), and with a host list in the policy, the run's egress proxy
    /// (`toren_sandbox::egress`) started with `hooks` on a socket beside the workspace,
    /// whose directory the container gets read-only; the container keeps
    /// `network_mode: none`, and its helper relays `127.0.0.1:3128` to the socket. The
    /// proxy stops when the sandbox is dropped.
    pub async fn open_with(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
        hooks: EgressHooks,
    ) -> Result<Arc<dyn Sandbox>> {
        for (name, value) in &env {
            check_env(name, value)?;
        }
        check_helper(&self.settings.exec_helper)?;
        let image = policy
            .image
            .clone()
            .unwrap_or_else(|| self.settings.default_image.clone());
        container::check_image(&self.docker, &image, &self.settings.default_image).await?;
        let workspace = toren_sandbox::pinned_workspace(&self.settings.sandbox_root, run, policy)?;
        let mut full_env = base_env();
        for (name, value) in env {
            full_env.retain(|(n, _)| *n != name);
            full_env.push((name, value));
        }
        let proxy = match egress::proxied(policy) {
            None => None,
            Some(hosts) => {
                let dir = egress::egress_dir(workspace.path());
                let proxy = RunningProxy::start(
                    &dir,
                    hosts,
                    Arc::clone(&self.resolver.0),
                    &self.upstream,
                    hooks,
                )?;
                proxy.add_env(&mut full_env);
                Some(proxy)
            }
        };
        // A session's turns share one container, named and labelled by the session.
        let key = policy
            .sandbox_key
            .clone()
            .unwrap_or_else(|| run.as_str().to_owned());
        if let Ok(mut keys) = self.keys.lock() {
            keys.insert(run.clone(), key.clone());
        }
        Ok(Arc::new(DockerSandbox::new(Setup {
            docker: self.docker.clone(),
            name: container_name(&self.settings.instance, &key),
            run: key,
            instance: self.settings.instance.clone(),
            image,
            default_image: self.settings.default_image.clone(),
            helper: self.settings.exec_helper.clone(),
            network: policy.network,
            limits: policy.limits,
            env: full_env,
            workspace,
            proxy,
        })))
    }

    /// Removes the container kept under `key` (a session's id). The workspace stays.
    /// Returns whether there was one.
    pub async fn remove_key(&self, key: &str) -> Result<bool> {
        container::remove(&self.docker, &container_name(&self.settings.instance, key)).await
    }

    /// Removes the container of `run` (when the run finished). The workspace stays.
    /// Returns whether there was one.
    pub async fn remove_run(&self, run: &RunId) -> Result<bool> {
        let key = self
            .keys
            .lock()
            .ok()
            .and_then(|mut keys| keys.remove(run))
            .unwrap_or_else(|| run.as_str().to_owned());
        let name = container_name(&self.settings.instance, &key);
        container::remove(&self.docker, &name).await
    }
}

#[async_trait]
impl SandboxBackend for DockerBackend {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    async fn open(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
    ) -> toren_sandbox::Result<Arc<dyn Sandbox>> {
        Ok(DockerBackend::open(self, run, policy, env).await?)
    }

    async fn open_with(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
        egress: EgressHooks,
    ) -> toren_sandbox::Result<Arc<dyn Sandbox>> {
        Ok(DockerBackend::open_with(self, run, policy, env, egress).await?)
    }

    async fn finish(&self, run: &RunId) -> toren_sandbox::Result<()> {
        self.remove_run(run).await?;
        Ok(())
    }

    async fn ready(&self) -> toren_sandbox::Result<()> {
        let host = self
            .settings
            .docker_host
            .clone()
            .unwrap_or_else(|| DEFAULT_DOCKER_HOST.to_owned());
        self.docker
            .ping()
            .await
            .map_err(|source| Error::DaemonUnreachable { host, source })?;
        Ok(())
    }

    async fn release(&self, key: &str) -> toren_sandbox::Result<()> {
        self.remove_key(key).await?;
        Ok(())
    }

    /// A container outlives the process that drove it, and a command that process was
    /// running in it runs on: the container is removed (its processes killed with it; the
    /// daemon answers once they are dead). Called before a rewind's restore and before a
    /// resuming driver runs an interrupted call again, so two attempts never run at once.
    async fn stop_processes(&self, key: &str) -> toren_sandbox::Result<()> {
        if self.remove_key(key).await? {
            tracing::info!(%key, "removed the sandbox container (before a restore or a re-run); the next command recreates it");
        }
        Ok(())
    }
}

fn check_instance(instance: &str) -> Result<()> {
    let valid = !instance.is_empty()
        && instance.len() <= 64
        && instance
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'.' | b'-'));
    if valid {
        Ok(())
    } else {
        Err(Error::InvalidInstance {
            instance: instance.to_owned(),
        })
    }
}

fn check_env(name: &str, value: &str) -> Result<()> {
    let why = if name.is_empty() {
        "the name is empty"
    } else if name.contains(['=', '\0']) {
        "the name contains `=` or a NUL byte"
    } else if value.contains('\0') {
        "the value contains a NUL byte"
    } else {
        return Ok(());
    };
    Err(toren_sandbox::Error::InvalidEnv {
        name: name.to_owned(),
        why,
    }
    .into())
}

/// The helper must exist and be statically linked (no ELF interpreter), or it would not
/// start in images without a matching libc.
fn check_helper(path: &Path) -> Result<()> {
    use std::io::Read;
    let display = || path.display().to_string();
    // The program headers sit right after the ELF header.
    let mut bytes = Vec::new();
    let read = std::fs::File::open(path).and_then(|f| f.take(64 * 1024).read_to_end(&mut bytes));
    match read {
        Ok(_) => {}
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            return Err(Error::HelperMissing { path: display() });
        }
        Err(e) => {
            return Err(Error::Io {
                context: format!("cannot read the sandbox helper `{}`", display()),
                source: e,
            });
        }
    }
    if has_interpreter(&bytes) != Some(false) {
        return Err(Error::HelperNotStatic { path: display() });
    }
    Ok(())
}

/// Whether a 64-bit little-endian ELF file asks for a dynamic loader (`PT_INTERP`);
/// `None` if it is not such a file.
fn has_interpreter(elf: &[u8]) -> Option<bool> {
    const PT_INTERP: u32 = 3;
    if elf.get(..6)? != b"\x7fELF\x02\x01" {
        return None;
    }
    let u16_at = |at: usize| Some(u16::from_le_bytes(elf.get(at..at + 2)?.try_into().ok()?));
    let u64_at = |at: usize| Some(u64::from_le_bytes(elf.get(at..at + 8)?.try_into().ok()?));
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let phentsize = usize::from(u16_at(0x36)?);
    let phnum = usize::from(u16_at(0x38)?);
    for i in 0..phnum {
        let at = phoff.checked_add(i.checked_mul(phentsize)?)?;
        let kind = u32::from_le_bytes(elf.get(at..at + 4)?.try_into().ok()?);
        if kind == PT_INTERP {
            return Some(true);
        }
    }
    Some(false)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_dynamic_executable_has_an_interpreter() {
        // Whatever runs this test was linked dynamically by default.
        let me = std::fs::read(std::env::current_exe().unwrap()).unwrap();
        assert_eq!(has_interpreter(&me), Some(true));
        assert_eq!(has_interpreter(b"#!/bin/sh\n"), None);
    }

    #[test]
    fn instance_names_are_label_and_name_safe() {
        assert!(check_instance("default").is_ok());
        assert!(check_instance("host-1.a_b").is_ok());
        for bad in ["", "a b", "a/b", &"x".repeat(65)] {
            assert!(check_instance(bad).is_err(), "{bad:?}");
        }
    }
}
