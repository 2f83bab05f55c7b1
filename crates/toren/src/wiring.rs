//! The one place that reads the process environment and picks concrete backends: the
//! settings (the diagnostics filter among them), the store (SQLite or Postgres), the
//! sandbox backend and the model provider. Everything below receives resolved values.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use anyhow::anyhow;
use toren_config::{SandboxChoice, Settings};
use toren_model::ProviderSettings;
use toren_protocol::{AgentSpec, ResolvedPolicy};
use toren_runtime::{PolicySettings, RunService, ServiceSettings};
use toren_sandbox::{LocalBackend, LocalSettings, SandboxBackend};
use toren_sandbox_docker::{DEFAULT_IMAGE, DockerBackend, DockerSettings};
use toren_sandbox_e2b::{DEFAULT_LIFETIME, DEFAULT_TEMPLATE, E2bBackend, E2bSettings, Endpoints};
use toren_store::{ChatStore, EventLog, SessionStore, SqliteStore, WorkerRegistry};
use toren_store_postgres::{OpenError, PostgresOptions, PostgresStore};
use toren_worker::ModelFactory as _;
use tracing_subscriber::EnvFilter;

use crate::exit::Failure;

/// Resolves settings from the environment; a bad value is a usage error (exit 2).
pub(crate) fn settings() -> Result<Settings, Failure> {
    Settings::from_lookup(process_env).map_err(Failure::usage)
}

/// The Telegram bot's settings from the environment; a bad value is a usage error.
pub(crate) fn telegram_settings() -> Result<toren_config::TelegramSettings, Failure> {
    toren_config::TelegramSettings::from_lookup(process_env).map_err(Failure::usage)
}

/// The run service with sessions, and the bot's chat state, over one store.
pub(crate) async fn service_and_chats(
    settings: &Settings,
) -> Result<(RunService, Arc<dyn ChatStore>), Failure> {
    let store = open_store(settings).await?;
    let service = service_with(settings, store.clone())
        .with_sessions(store.clone())
        .with_workers(store.clone());
    Ok((service, store))
}

/// The diagnostics filter (`TOREN_LOG`), resolved before any command so that every command
/// logs, those failing on the other settings too. Filters that do not parse are a usage
/// error (exit 2), not silently replaced.
pub(crate) fn log_filter(server: bool) -> Result<EnvFilter, Failure> {
    // A server says what it does (requests, runs claimed and stopped) unless told otherwise.
    let default = if server {
        SERVER_LOG
    } else {
        toren_config::env_vars::TOREN_LOG.default.unwrap_or("warn")
    };
    let directives = Settings::log_filter_or(process_env, &format!("{default},{QUIET_BY_DEFAULT}"));
    EnvFilter::try_new(&directives).map_err(|e| {
        Failure::usage(anyhow!(
            "{}={directives} is not valid: expected tracing filter directives such as `warn`, \
             `info` or `warn,toren_sandbox=info` ({e})",
            toren_config::env_vars::TOREN_LOG.name
        ))
    })
}

/// `toren serve`'s filter when `TOREN_LOG` is unset.
const SERVER_LOG: &str = "info";

/// Added to the default filter: the AWS SDK warns, with the `Debug` form of each error,
/// about every credential provider that finds nothing, and `toren deploy-aws` says in
/// one line why it cannot go on. `TOREN_LOG` set brings them back.
const QUIET_BY_DEFAULT: &str = "aws_config=error";

/// A variable of this process's environment, as the settings registry reads it.
fn process_env(name: &str) -> Option<String> {
    std::env::var(name).ok()
}

/// Looks a variable up in this process's environment (for granted sandbox variables).
pub(crate) fn env_lookup(name: &str) -> Option<String> {
    // The bot token is the runtime's credential: never granted to a sandbox.
    if name == toren_config::TELEGRAM_BOT_TOKEN.name {
        return None;
    }
    std::env::var(name).ok().filter(|v| !v.is_empty())
}

/// This process's environment as the run service sees it: values of granted and injected
/// variables (the bot token never). `drives_runs`: the process drives the runs it creates,
/// so a run or session whose injected secret is unset here is refused up front (exit 2,
/// 422 from the API), naming the variable; an API that leaves its runs to other
/// processes' workers cannot see their environment and does not check.
pub(crate) fn with_env(service: RunService, drives_runs: bool) -> RunService {
    service.with_env(Arc::new(env_lookup), drives_runs)
}

/// A store as the binary uses it: the event log, the sessions and the worker registry,
/// whichever backend holds them.
pub(crate) trait Store: EventLog + SessionStore + WorkerRegistry + ChatStore {}
impl<T: EventLog + SessionStore + WorkerRegistry + ChatStore> Store for T {}

/// Opens the store `TOREN_DATABASE_URL` names: a `postgres://` (or `postgresql://`) URL
/// the Postgres store, with a pool of `TOREN_DATABASE_POOL_SIZE` connections, anything
/// else the SQLite file. A Postgres server that does not answer fails within seconds
/// (exit 1), naming its host and port, never the URL (it may hold a password).
pub(crate) async fn open_store(settings: &Settings) -> Result<Arc<dyn Store>, Failure> {
    let url = settings.database_url.expose();
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Ok(open_sqlite(settings).await?);
    }
    let options = PostgresOptions {
        pool_size: settings.database_pool_size,
        ..PostgresOptions::default()
    };
    let store = PostgresStore::open(url, &options).await.map_err(|e| {
        let unreachable = matches!(e, OpenError::Unreachable { .. });
        let e = anyhow!(e).context("cannot open the event log (TOREN_DATABASE_URL)");
        if unreachable {
            Failure::failed(e)
        } else {
            Failure::usage(e)
        }
    })?;
    Ok(Arc::new(store))
}

/// Opens the event log named by `TOREN_DATABASE_URL`. The store creates missing
/// directories (`TOREN_HOME` for the default database) mode 0700 and the database 0600; an
/// existing `TOREN_HOME` that others may enter is the operator's to tighten, so it is only
/// warned about (its database and workspaces are private either way).
async fn open_sqlite(settings: &Settings) -> Result<Arc<SqliteStore>, Failure> {
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
    backend_named(&policy.backend, settings).await
}

/// The backend the operator chose with `TOREN_SANDBOX`, checked; `None` when sandboxes are
/// disabled.
pub(crate) async fn configured_backend(settings: &Settings) -> Result<Option<Backend>, Failure> {
    let name = match settings.sandbox {
        SandboxChoice::Local => LocalBackend::NAME,
        SandboxChoice::Docker => DockerBackend::NAME,
        SandboxChoice::E2b => E2bBackend::NAME,
        SandboxChoice::None => return Ok(None),
    };
    backend_named(name, settings).await.map(Some)
}

async fn backend_named(name: &str, settings: &Settings) -> Result<Backend, Failure> {
    match name {
        LocalBackend::NAME => {
            // The helper is found as for docker; without it each command starts a fresh
            // bubblewrap.
            let backend = LocalBackend::new(LocalSettings {
                sandbox_root: settings.sandbox_root.clone(),
                bwrap: None,
            })
            .with_exec_helper(exec_helper(settings));
            let backend = match egress_resolver(settings)? {
                Some(resolver) => backend.with_egress_resolver(resolver),
                None => backend,
            };
            let backend = match egress_upstream(settings)? {
                Some(trust) => backend.with_egress_upstream(trust),
                None => backend,
            };
            backend.check().map_err(Failure::usage)?;
            Ok(Backend {
                seam: Arc::new(backend),
                docker: None,
            })
        }
        DockerBackend::NAME => {
            let backend = docker(settings).await?;
            Ok(Backend {
                seam: Arc::new(backend.clone()),
                docker: Some(backend),
            })
        }
        E2bBackend::NAME => {
            let backend = e2b(settings).await?;
            Ok(Backend {
                seam: Arc::new(backend),
                docker: None,
            })
        }
        other => Err(Failure::usage(anyhow!(
            "this run's sandbox backend `{other}` is not available in this version of toren; \
             use a toren that provides it"
        ))),
    }
}

/// The e2b backend from `E2B_API_KEY`, `E2B_API_URL`, `E2B_SANDBOX_URL` (or `E2B_DOMAIN`),
/// checked: the key has E2B's shape, and E2B answers and takes it.
pub(crate) async fn e2b(settings: &Settings) -> Result<E2bBackend, Failure> {
    let api_key = settings
        .e2b_api_key
        .as_ref()
        .map(|key| key.expose().to_owned())
        .unwrap_or_default();
    let backend = E2bBackend::new(E2bSettings {
        endpoints: Endpoints {
            api_key,
            api_url: settings.e2b_api_url.clone(),
            sandbox_url: settings.e2b_sandbox_url.clone(),
        },
        sandbox_root: settings.sandbox_root.clone(),
        default_template: DEFAULT_TEMPLATE.to_owned(),
        instance: instance(settings),
        lifetime: DEFAULT_LIFETIME,
    })
    .map_err(Failure::usage)?;
    let existing = backend.check().await.map_err(Failure::usage)?;
    tracing::info!(url = %settings.e2b_api_url, existing, "e2b backend ready");
    Ok(backend)
}

/// The docker backend's settings.
fn docker_settings(settings: &Settings) -> DockerSettings {
    DockerSettings {
        sandbox_root: settings.sandbox_root.clone(),
        default_image: DEFAULT_IMAGE.to_owned(),
        exec_helper: exec_helper(settings),
        instance: instance(settings),
        docker_host: settings.docker_host.clone(),
    }
}

/// Connects to the docker daemon and checks the backend can work: daemon reachable,
/// helper present and static. A missing default image is only a warning here (runs that
/// name their own image do not need it); a run that needs it fails naming the fix.
pub(crate) async fn docker(settings: &Settings) -> Result<DockerBackend, Failure> {
    let backend = DockerBackend::connect(docker_settings(settings))
        .await
        .map_err(Failure::usage)?;
    let backend = match egress_resolver(settings)? {
        Some(resolver) => backend.with_egress_resolver(resolver),
        None => backend,
    };
    let backend = match egress_upstream(settings)? {
        Some(trust) => backend.with_egress_upstream(trust),
        None => backend,
    };
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

/// What the egress proxies verify the hosts that get secrets against: the system's roots
/// (`None`), unless the test-only `TOREN_TEST_EGRESS_CA` names a PEM file (the trust
/// suite's TLS test server plays such a host with a certificate of its own CA).
fn egress_upstream(
    settings: &Settings,
) -> Result<Option<toren_sandbox::egress::UpstreamTrust>, Failure> {
    let Some(path) = &settings.test_egress_ca else {
        return Ok(None);
    };
    let pem = std::fs::read(path).map_err(|e| {
        Failure::usage(anyhow!(
            "TOREN_TEST_EGRESS_CA: cannot read `{}`: {e}",
            path.display()
        ))
    })?;
    tracing::warn!(
        "TOREN_TEST_EGRESS_CA is set: secret hosts are verified against it (tests only)"
    );
    Ok(Some(toren_sandbox::egress::UpstreamTrust::Only(pem)))
}

/// How the egress proxies (runs with `network: [hosts…]`) resolve names: the system's
/// resolver (`None`), unless the test-only `TOREN_TEST_EGRESS_HOSTS` maps names to fixed
/// addresses (the trust suite's test servers). The mapping changes nothing else: the
/// proxy's refusal of loopback, private and metadata addresses applies to what it gives.
fn egress_resolver(
    settings: &Settings,
) -> Result<Option<Arc<toren_sandbox::egress::MappedResolver>>, Failure> {
    let Some(text) = &settings.test_egress_hosts else {
        return Ok(None);
    };
    let resolver = toren_sandbox::egress::MappedResolver::parse(text)
        .map_err(|why| Failure::usage(anyhow!("TOREN_TEST_EGRESS_HOSTS is not valid: {why}")))?;
    tracing::warn!("TOREN_TEST_EGRESS_HOSTS is set: egress names resolve from it (tests only)");
    Ok(Some(Arc::new(resolver)))
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

/// The run service over `store`, with the operator's choice of sandbox backend.
fn service_with(settings: &Settings, store: Arc<dyn EventLog>) -> RunService {
    let backend = match settings.sandbox {
        SandboxChoice::Local => Some(LocalBackend::NAME.to_owned()),
        SandboxChoice::Docker => Some(DockerBackend::NAME.to_owned()),
        SandboxChoice::E2b => Some(E2bBackend::NAME.to_owned()),
        SandboxChoice::None => None,
    };
    let service = RunService::new(
        store,
        ServiceSettings {
            policy: PolicySettings {
                backend,
                sandbox_root: settings.sandbox_root.clone(),
                // Local and docker keep the workspace on this machine's disk; e2b's
                // runs carry none (any worker may drive them).
                volume: matches!(
                    settings.sandbox,
                    SandboxChoice::Local | SandboxChoice::Docker
                )
                .then(|| workspace_volume(settings)),
                // Only Toren's own egress proxy (local, docker) can hold a connection while
                // a person decides on a host.
                asks_hosts: !matches!(settings.sandbox, SandboxChoice::E2b),
            },
            lease_ttl: settings.lease_ttl,
            follow_poll: settings.approval_poll,
            streams: Some(settings.home.join("streams")),
        },
    );
    let service = service.with_backends(Arc::new(RewindBackends(settings.clone())));
    // Every front door but an API that leaves its runs to other processes drives its runs.
    with_env(service, true)
}

/// The backends a rewind ends a run's leftover processes through, made when one is due:
/// for docker a client of the daemon (its container outlives a killed driver, and is
/// removed), which must answer, else the rewind is refused and its restore stays due.
struct RewindBackends(Settings);

#[async_trait::async_trait]
impl toren_worker::Backends for RewindBackends {
    async fn named(&self, name: &str) -> Result<Option<Arc<dyn SandboxBackend>>, String> {
        let settings = &self.0;
        match name {
            DockerBackend::NAME => {
                let backend = DockerBackend::connect(docker_settings(settings))
                    .await
                    .map_err(|e| e.to_string())?;
                Ok(Some(Arc::new(backend)))
            }
            LocalBackend::NAME => Ok(Some(Arc::new(LocalBackend::new(LocalSettings {
                sandbox_root: settings.sandbox_root.clone(),
                bwrap: None,
            })))),
            // Other backends' workspaces are not on this host and have no checkpoints.
            _ => Ok(None),
        }
    }
}

/// The run service over the event log `settings` name, sessions included.
pub(crate) async fn service_for(settings: &Settings) -> Result<RunService, Failure> {
    let store = open_store(settings).await?;
    Ok(service_with(settings, store.clone())
        .with_sessions(store.clone())
        .with_workers(store))
}

/// The workspace volume this process serves and pins new runs to: `TOREN_WORKSPACE_VOLUME`,
/// else this machine — its host name and the start of its machine id (which stays the same
/// across reboots and differs between machines that share a host name).
pub(crate) fn workspace_volume(settings: &Settings) -> String {
    if let Some(volume) = &settings.workspace_volume {
        return volume.clone();
    }
    let machine = ["/etc/machine-id", "/var/lib/dbus/machine-id"]
        .iter()
        .find_map(|path| std::fs::read_to_string(path).ok())
        .map(|id| id.trim().chars().take(12).collect::<String>())
        .filter(|id| !id.is_empty());
    match machine {
        Some(id) => format!("{}-{id}", host_name()),
        None => host_name(),
    }
}

/// This machine's host name, for people (`unknown-host` when it cannot be read).
pub(crate) fn host_name() -> String {
    std::fs::read_to_string("/proc/sys/kernel/hostname")
        .ok()
        .map(|name| name.trim().to_owned())
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| "unknown-host".to_owned())
}

/// This worker's identity: `TOREN_WORKER_ID`, else the one kept in
/// `$TOREN_HOME/worker-id`, made once (host name + a random suffix) and reused by every
/// later process of that home, so a restarted worker keeps its name.
pub(crate) fn worker_id(settings: &Settings) -> Result<String, Failure> {
    let var = toren_config::env_vars::TOREN_WORKER_ID.name;
    if let Some(id) = &settings.worker_id {
        return check_worker_id(id)
            .map_err(|why| Failure::usage(anyhow!("{var}={id} is not valid: {why}")));
    }
    let path = settings.home.join("worker-id");
    let read = |path: &Path| -> Result<Option<String>, Failure> {
        match std::fs::read_to_string(path) {
            Ok(text) => {
                let id = text.trim().to_owned();
                check_worker_id(&id).map(Some).map_err(|why| {
                    Failure::usage(anyhow!(
                        "{} holds `{id}`, which is not a worker id: {why}; remove it to make a                          new one, or set {var}",
                        path.display()
                    ))
                })
            }
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
            Err(e) => Err(Failure::failed(anyhow!(
                "cannot read the worker id from {}: {e}",
                path.display()
            ))),
        }
    };
    if let Some(id) = read(&path)? {
        return Ok(id);
    }
    let suffix: String = toren_protocol::RunId::new()
        .as_str()
        .chars()
        .rev()
        .take(6)
        .collect::<String>()
        .to_lowercase();
    let id = format!("{}-{suffix}", host_name());
    let made = {
        use std::io::Write as _;
        use std::os::unix::fs::OpenOptionsExt as _;
        std::fs::create_dir_all(&settings.home).and_then(|()| {
            std::fs::OpenOptions::new()
                .write(true)
                .create_new(true)
                .mode(0o600)
                .open(&path)
                .and_then(|mut file| writeln!(file, "{id}"))
        })
    };
    match made {
        Ok(()) => Ok(id),
        // Another process made it first: its id is the one.
        Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
            read(&path)?.ok_or_else(|| Failure::failed(anyhow!("{} vanished", path.display())))
        }
        Err(e) => Err(Failure::failed(anyhow!(
            "cannot keep the worker id in {} ({e}); set {var}",
            path.display()
        ))),
    }
}

/// Why `id` cannot name a worker: it must be 1 to 128 printable characters without spaces,
/// `/` or `@` (a lease holder name is the id, `@`, then the process).
fn check_worker_id(id: &str) -> Result<String, String> {
    let ok = !id.is_empty()
        && id.len() <= 128
        && id
            .chars()
            .all(|c| c.is_ascii_graphic() && c != '/' && c != '@');
    if ok {
        Ok(id.to_owned())
    } else {
        Err("use 1 to 128 letters, digits or punctuation, without spaces, `/` or `@`".to_owned())
    }
}

/// The run service, from the environment's settings and store.
pub(crate) async fn service() -> Result<RunService, Failure> {
    service_for(&settings()?).await
}

/// The model providers every run's spec picks from, with the operator's keys and URLs.
pub(crate) fn models(settings: &Settings) -> ProviderSettings {
    ProviderSettings {
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
    }
}

/// Checks that `agent`'s model provider can be built here; a missing key is a usage error
/// naming the variable.
pub(crate) fn check_model(agent: &AgentSpec, settings: &Settings) -> Result<(), Failure> {
    models(settings)
        .model(agent)
        .map(drop)
        .map_err(|e| Failure::usage(anyhow!(e).context(format!("agent `{}`", agent.name))))
}

/// Removes the docker container kept under `key` (a removed session's), if docker is here;
/// what cannot be done is said, never fatal (the reaper collects leftovers).
pub(crate) async fn remove_container(settings: &Settings, key: &str) {
    let removed = match docker(settings).await {
        Ok(docker) => docker.remove_key(key).await.map_err(|e| e.to_string()),
        Err(e) => Err(format!("{:#}", e.error)),
    };
    if let Err(e) = removed {
        tracing::warn!("could not remove the session's container: {e}");
    }
}

/// Kills the E2B sandbox kept under `key` (a removed session's); what cannot be done is
/// said, never fatal.
pub(crate) async fn release_e2b(settings: &Settings, key: &str) {
    let released = match e2b(settings).await {
        Ok(backend) => SandboxBackend::release(&backend, key)
            .await
            .map_err(|e| e.to_string()),
        Err(e) => Err(format!("{:#}", e.error)),
    };
    if let Err(e) = released {
        tracing::warn!("could not kill the session's E2B sandbox: {e}");
    }
}

/// Where `toren deploy-aws` sends its AWS calls: `AWS_ENDPOINT_URL` (a local emulator)
/// and `AWS_REGION` (else `AWS_DEFAULT_REGION`) from the settings when set; the rest
/// (credentials, profile) the AWS SDK finds as the AWS tools do.
pub(crate) fn aws_target(settings: &Settings) -> toren_deploy_aws::Target {
    toren_deploy_aws::Target {
        endpoint: settings.aws_endpoint_url.clone(),
        region: settings.aws_region.clone(),
    }
}

/// The keys `toren deploy-aws` stores, from the settings.
pub(crate) fn deploy_keys(settings: &Settings) -> toren_deploy_aws::Keys {
    let value = |s: &Option<toren_config::Secret>| s.as_ref().map(|s| s.expose().to_owned());
    toren_deploy_aws::Keys {
        anthropic_api_key: value(&settings.anthropic_api_key),
        openai_api_key: value(&settings.openai_api_key),
        e2b_api_key: value(&settings.e2b_api_key),
        api_token: value(&settings.api_token),
    }
}

/// Whether this process runs inside a container: the files container engines put at the
/// root of every container they start (Docker's `/.dockerenv`, Podman's
/// `/run/.containerenv`). The compose worker uses it to refuse docker sandboxes.
pub(crate) fn in_container() -> bool {
    ["/.dockerenv", "/run/.containerenv"]
        .iter()
        .any(|path| Path::new(path).exists())
}
