//! Runtime settings resolved from environment variables, through a lookup function.
//!
//! [`Settings::from_lookup`] reads only the variables declared in `env_vars` and turns them
//! into plain values with the documented defaults; a wrong value fails here, at startup,
//! with a message naming the fix. The binary passes the process environment; tests pass a
//! map. Credentials are held in [`Secret`] so `Debug` output never shows them. Durations
//! are written like `30s`, `2m` or `200ms` (jiff's friendly format; ISO 8601 `PT30S` too).

use std::fmt;
use std::path::PathBuf;
use std::str::FromStr;
use std::time::Duration;

use crate::env_vars::{self, EnvVar};
use crate::error::{Error, Result};

/// The settings every Toren process starts from.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Settings {
    /// `TOREN_HOME`: Toren's own data directory.
    pub home: PathBuf,
    /// `TOREN_AGENTS`: where agents given by name are looked up.
    pub agents_dir: PathBuf,
    /// `TOREN_DATABASE_URL`; a secret because a Postgres URL may carry a password.
    pub database_url: Secret,
    /// `TOREN_DATABASE_POOL_SIZE`: the Postgres store's pool size.
    pub database_pool_size: u32,
    /// `TOREN_SANDBOX`, with `auto` resolved.
    pub sandbox: SandboxChoice,
    /// Whether `sandbox` was resolved from `auto` (the default).
    pub sandbox_auto: bool,
    /// `TOREN_SANDBOX_ROOT`: parent of the per-run and per-session workspaces.
    pub sandbox_root: PathBuf,
    /// `TOREN_DOWNLOADS`: where files sent to the terminal channel arrive (one directory
    /// per session or run beneath it).
    pub downloads: PathBuf,
    /// `TOREN_EXEC_HELPER`: the docker backend's in-container helper; `None` means the
    /// binary decides (beside itself).
    pub exec_helper: Option<PathBuf>,
    /// `DOCKER_HOST`; `None` means the local socket.
    pub docker_host: Option<String>,
    /// `TOREN_TEST_EGRESS_HOSTS` (tests only): `name=ip,…` the egress proxies resolve
    /// so; parsed by the binary's wiring.
    pub test_egress_hosts: Option<String>,
    /// `TOREN_TEST_EGRESS_CA` (tests only): the PEM file the egress proxies verify the hosts
    /// that get secrets against; `None`: the system's roots.
    pub test_egress_ca: Option<PathBuf>,
    /// `E2B_API_KEY`: the e2b backend's credential (never granted to a sandbox).
    pub e2b_api_key: Option<Secret>,
    /// `E2B_API_URL`, else `https://api.<E2B_DOMAIN>`.
    pub e2b_api_url: String,
    /// `E2B_SANDBOX_URL`, else `https://sandbox.<E2B_DOMAIN>`.
    pub e2b_sandbox_url: String,
    pub anthropic_api_key: Option<Secret>,
    /// Without a trailing `/`.
    pub anthropic_base_url: String,
    pub openai_api_key: Option<Secret>,
    /// Without a trailing `/`.
    pub openai_base_url: String,
    /// With a scheme, without a trailing `/`.
    pub ollama_host: String,
    /// `AWS_ENDPOINT_URL`: where `toren deploy-aws` sends its AWS calls; `None`: AWS's own.
    pub aws_endpoint_url: Option<String>,
    /// `AWS_REGION`, else `AWS_DEFAULT_REGION`; `None`: the AWS SDK's own choice.
    pub aws_region: Option<String>,
    /// `TOREN_LEASE_TTL`: how long a run's lease outlives its holder's last heartbeat.
    pub lease_ttl: Duration,
    /// `TOREN_MAX_TOKENS`: `max_tokens` of each model call.
    pub max_tokens: u32,
    /// `TOREN_APPROVAL_POLL`: how often a process looks in the log for what another process
    /// did (an approval decision, a cancel, new events to follow).
    pub approval_poll: Duration,
    /// `TOREN_LOG`: tracing filter directives for diagnostics on stderr. The binary checks
    /// their syntax (this crate does not know tracing's).
    pub log: String,
    /// Who decides approvals made from this process: `USER`, else `LOGNAME`, else
    /// [`UNNAMED_USER`].
    pub user: String,
    /// `TOREN_API_ADDR`: where `toren serve` listens.
    pub api_addr: std::net::SocketAddr,
    /// `TOREN_API_TOKEN`: the HTTP API's bearer token (named `api`); `None`: no token.
    pub api_token: Option<Secret>,
    /// `TOREN_API_TOKENS_FILE`: more tokens, `name:token` per line.
    pub api_tokens_file: Option<PathBuf>,
    /// `TOREN_QUEUE`: where runs wait for a worker.
    pub queue: QueueChoice,
    /// `TOREN_WORKER_ID`; `None`: the binary makes one (host name + a kept suffix).
    pub worker_id: Option<String>,
    /// `TOREN_WORKSPACE_VOLUME`; `None`: the binary names this machine.
    pub workspace_volume: Option<String>,
    /// `TOREN_AGENT_CONCURRENCY`: at most this many live runs of one agent; `None`:
    /// unlimited.
    pub agent_concurrency: Option<u32>,
}

/// Who a decision made from this process is recorded as when neither `USER` nor `LOGNAME`
/// names the person: it says so (with the front door the decision names, `… via cli`)
/// rather than record a bare `unknown`.
pub const UNNAMED_USER: &str = "unnamed (no USER or LOGNAME)";

/// The bounds of `TOREN_LEASE_TTL`: under a second the heartbeat (every third of it) would
/// race the database; a day is already long to wait for a vanished host.
pub const LEASE_TTL_RANGE: (Duration, Duration) =
    (Duration::from_secs(1), Duration::from_secs(24 * 60 * 60));

/// The bounds of `TOREN_APPROVAL_POLL`.
pub const APPROVAL_POLL_RANGE: (Duration, Duration) =
    (Duration::from_millis(10), Duration::from_secs(60));

/// The bounds of `TOREN_AGENT_CONCURRENCY`.
pub const AGENT_CONCURRENCY_RANGE: (u32, u32) = (1, 100_000);

/// The bounds of `TOREN_MAX_TOKENS`.
pub const MAX_TOKENS_RANGE: (u32, u32) = (1, 1_000_000);

/// The bounds of `TOREN_DATABASE_POOL_SIZE`.
pub const DATABASE_POOL_SIZE_RANGE: (u32, u32) = (1, 1000);

impl Settings {
    /// Resolves the settings from `lookup` (a variable name → its value); empty values
    /// count as unset.
    pub fn from_lookup(lookup: impl Fn(&str) -> Option<String>) -> Result<Self> {
        let read = |var: &EnvVar| lookup(var.name).filter(|value| !value.is_empty());
        let default = |var: &EnvVar| var.default.unwrap_or_default().to_owned();

        let home = match read(&env_vars::TOREN_HOME) {
            Some(home) => PathBuf::from(home),
            None => match read(&env_vars::HOME) {
                Some(user_home) => PathBuf::from(user_home).join(".toren"),
                None => return Err(Error::NoHome),
            },
        };
        let database_url = read(&env_vars::TOREN_DATABASE_URL)
            .unwrap_or_else(|| format!("sqlite://{}", home.join("toren.db").display()));
        let e2b_key = read(&env_vars::E2B_API_KEY).is_some();
        let e2b_domain = read(&env_vars::E2B_DOMAIN)
            .map_or_else(|| default(&env_vars::E2B_DOMAIN), |d| d.trim().to_owned());
        let requested = read(&env_vars::TOREN_SANDBOX).unwrap_or_else(|| "auto".to_owned());
        let sandbox_auto = requested == "auto";
        let sandbox = if sandbox_auto {
            // The seed's rule: E2B when its key is set, else local docker.
            if e2b_key {
                SandboxChoice::E2b
            } else {
                SandboxChoice::Docker
            }
        } else {
            requested.parse()?
        };
        let sandbox_root = read(&env_vars::TOREN_SANDBOX_ROOT)
            .map_or_else(|| home.join("sandboxes"), PathBuf::from);
        let downloads = match (read(&env_vars::TOREN_DOWNLOADS), read(&env_vars::HOME)) {
            (Some(dir), _) => PathBuf::from(dir),
            (None, Some(user_home)) => PathBuf::from(user_home).join("Downloads").join("toren"),
            (None, None) => home.join("downloads"),
        };
        let queue: QueueChoice = read(&env_vars::TOREN_QUEUE)
            .unwrap_or_else(|| "local".to_owned())
            .parse()?;
        if queue == QueueChoice::Postgres && !is_postgres_url(&database_url) {
            return Err(Error::InvalidSetting {
                var: env_vars::TOREN_QUEUE.name,
                value: queue.as_str().to_owned(),
                expected: format!(
                    "a Postgres store for it: set {} to a `postgres://` URL (it is `{}`), or \
                     use TOREN_QUEUE=local",
                    env_vars::TOREN_DATABASE_URL.name,
                    url_scheme(&database_url)
                ),
            });
        }
        let agent_concurrency = match read(&env_vars::TOREN_AGENT_CONCURRENCY) {
            None => None,
            Some(text) if text.trim() == "unlimited" => None,
            Some(text) => Some(
                count(
                    &env_vars::TOREN_AGENT_CONCURRENCY,
                    Some(text),
                    AGENT_CONCURRENCY_RANGE,
                )
                .map_err(|_| Error::InvalidSetting {
                    var: env_vars::TOREN_AGENT_CONCURRENCY.name,
                    value: read(&env_vars::TOREN_AGENT_CONCURRENCY).unwrap_or_default(),
                    expected: format!(
                        "a whole number from {} to {}, or `unlimited`",
                        AGENT_CONCURRENCY_RANGE.0, AGENT_CONCURRENCY_RANGE.1
                    ),
                })?,
            ),
        };
        let ollama_host = read(&env_vars::OLLAMA_HOST).map_or_else(
            || default(&env_vars::OLLAMA_HOST),
            |host| {
                if host.contains("://") {
                    host
                } else {
                    format!("http://{host}")
                }
            },
        );

        Ok(Self {
            agents_dir: PathBuf::from(
                read(&env_vars::TOREN_AGENTS).unwrap_or_else(|| default(&env_vars::TOREN_AGENTS)),
            ),
            database_url: Secret::new(database_url),
            database_pool_size: count(
                &env_vars::TOREN_DATABASE_POOL_SIZE,
                read(&env_vars::TOREN_DATABASE_POOL_SIZE),
                DATABASE_POOL_SIZE_RANGE,
            )?,
            sandbox,
            sandbox_auto,
            sandbox_root,
            downloads,
            exec_helper: read(&env_vars::TOREN_EXEC_HELPER).map(PathBuf::from),
            docker_host: read(&env_vars::DOCKER_HOST),
            test_egress_hosts: read(&env_vars::TOREN_TEST_EGRESS_HOSTS),
            test_egress_ca: read(&env_vars::TOREN_TEST_EGRESS_CA).map(PathBuf::from),
            e2b_api_key: read(&env_vars::E2B_API_KEY).map(Secret::new),
            e2b_api_url: match read(&env_vars::E2B_API_URL) {
                Some(url) => http_url(&env_vars::E2B_API_URL, Some(url))?,
                None => format!("https://api.{e2b_domain}"),
            },
            e2b_sandbox_url: match read(&env_vars::E2B_SANDBOX_URL) {
                Some(url) => http_url(&env_vars::E2B_SANDBOX_URL, Some(url))?,
                None => format!("https://sandbox.{e2b_domain}"),
            },
            anthropic_api_key: read(&env_vars::ANTHROPIC_API_KEY).map(Secret::new),
            anthropic_base_url: http_url(
                &env_vars::ANTHROPIC_BASE_URL,
                read(&env_vars::ANTHROPIC_BASE_URL),
            )?,
            openai_api_key: read(&env_vars::OPENAI_API_KEY).map(Secret::new),
            openai_base_url: http_url(
                &env_vars::OPENAI_BASE_URL,
                read(&env_vars::OPENAI_BASE_URL),
            )?,
            ollama_host: http_url(&env_vars::OLLAMA_HOST, Some(ollama_host))?,
            aws_endpoint_url: read(&env_vars::AWS_ENDPOINT_URL),
            aws_region: read(&env_vars::AWS_REGION).or_else(|| read(&env_vars::AWS_DEFAULT_REGION)),
            lease_ttl: duration(
                &env_vars::TOREN_LEASE_TTL,
                read(&env_vars::TOREN_LEASE_TTL),
                LEASE_TTL_RANGE,
            )?,
            max_tokens: count(
                &env_vars::TOREN_MAX_TOKENS,
                read(&env_vars::TOREN_MAX_TOKENS),
                MAX_TOKENS_RANGE,
            )?,
            approval_poll: duration(
                &env_vars::TOREN_APPROVAL_POLL,
                read(&env_vars::TOREN_APPROVAL_POLL),
                APPROVAL_POLL_RANGE,
            )?,
            log: Self::log_filter(&lookup),
            user: read(&env_vars::USER)
                .or_else(|| read(&env_vars::LOGNAME))
                .unwrap_or_else(|| UNNAMED_USER.to_owned()),
            api_addr: socket_addr(&env_vars::TOREN_API_ADDR, read(&env_vars::TOREN_API_ADDR))?,
            api_token: read(&env_vars::TOREN_API_TOKEN).map(Secret::new),
            api_tokens_file: read(&env_vars::TOREN_API_TOKENS_FILE).map(PathBuf::from),
            queue,
            worker_id: read(&env_vars::TOREN_WORKER_ID).map(|id| id.trim().to_owned()),
            workspace_volume: read(&env_vars::TOREN_WORKSPACE_VOLUME)
                .map(|volume| volume.trim().to_owned()),
            agent_concurrency,
            home,
        })
    }

    /// `TOREN_LOG` alone (empty counts as unset), for the diagnostics writer that starts
    /// before the other settings are resolved: a command that fails on them still logs.
    pub fn log_filter(lookup: impl Fn(&str) -> Option<String>) -> String {
        let var = &env_vars::TOREN_LOG;
        Self::log_filter_or(lookup, var.default.unwrap_or_default())
    }

    /// `TOREN_LOG`, or `default` when it is unset (a long-lived server logs more by
    /// default than a command a person runs).
    pub fn log_filter_or(lookup: impl Fn(&str) -> Option<String>, default: &str) -> String {
        lookup(env_vars::TOREN_LOG.name)
            .filter(|value| !value.is_empty())
            .unwrap_or_else(|| default.to_owned())
    }
}

/// Whether `url` names a Postgres database.
fn is_postgres_url(url: &str) -> bool {
    url.starts_with("postgres://") || url.starts_with("postgresql://")
}

/// The scheme of a database URL (never the rest, which may hold a password).
fn url_scheme(url: &str) -> String {
    url.split_once("://").map_or_else(
        || "a URL without a scheme".to_owned(),
        |(scheme, _)| format!("{scheme}://…"),
    )
}

/// `value` (or the variable's default) as a duration within `range`.
fn duration(
    var: &'static EnvVar,
    value: Option<String>,
    (min, max): (Duration, Duration),
) -> Result<Duration> {
    let text = value.unwrap_or_else(|| var.default.unwrap_or_default().to_owned());
    let parsed = text
        .trim()
        .parse::<jiff::SignedDuration>()
        .ok()
        .and_then(|d| Duration::try_from(d).ok())
        .filter(|d| (min..=max).contains(d));
    parsed.ok_or_else(|| Error::InvalidSetting {
        var: var.name,
        value: text,
        expected: format!(
            "a duration from {} to {}, written with its unit (`ms`, `s`, `m` or `h`), e.g. `{}`",
            friendly(min),
            friendly(max),
            var.default.unwrap_or_default(),
        ),
    })
}

/// `value` (or the variable's default) as a whole number within `range`.
fn count(var: &'static EnvVar, value: Option<String>, (min, max): (u32, u32)) -> Result<u32> {
    let text = value.unwrap_or_else(|| var.default.unwrap_or_default().to_owned());
    text.trim()
        .parse::<u32>()
        .ok()
        .filter(|n| (min..=max).contains(n))
        .ok_or_else(|| Error::InvalidSetting {
            var: var.name,
            value: text,
            expected: format!("a whole number from {min} to {max}"),
        })
}

/// A duration as people write it: `1s`, `24h`, `10ms`.
fn friendly(duration: Duration) -> String {
    jiff::SignedDuration::try_from(duration)
        .map_or_else(|_| format!("{duration:?}"), |d| format!("{d:#}"))
}

/// `value` (or the variable's default) checked to be an http(s) URL, trailing `/` removed.
fn socket_addr(var: &'static EnvVar, value: Option<String>) -> Result<std::net::SocketAddr> {
    let addr = value.unwrap_or_else(|| var.default.unwrap_or_default().to_owned());
    addr.parse().map_err(|_| Error::InvalidSetting {
        var: var.name,
        value: addr,
        expected: "an IP address and a port, like 127.0.0.1:7420".to_owned(),
    })
}

fn http_url(var: &'static EnvVar, value: Option<String>) -> Result<String> {
    let url = value.unwrap_or_else(|| var.default.unwrap_or_default().to_owned());
    let rest = url
        .strip_prefix("https://")
        .or_else(|| url.strip_prefix("http://"));
    match rest {
        Some(host) if !host.is_empty() && !url.chars().any(char::is_whitespace) => {
            Ok(url.trim_end_matches('/').to_owned())
        }
        _ => Err(Error::InvalidSetting {
            var: var.name,
            value: url,
            expected: "an http:// or https:// URL".to_owned(),
        }),
    }
}

/// The sandbox backend picked with `TOREN_SANDBOX` (`auto` resolves to one of these).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum SandboxChoice {
    /// One docker container per run over the bind-mounted workspace.
    Docker,
    /// One E2B microVM per run, reconnected by its recorded id.
    E2b,
    /// bubblewrap namespaces over the workspace; no daemon.
    Local,
    /// No sandbox: agents that ask for one fail fast.
    None,
}

impl SandboxChoice {
    /// The accepted `TOREN_SANDBOX` values.
    pub const AVAILABLE: &[&str] = &["auto", "docker", "e2b", "local", "none"];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Docker => "docker",
            Self::E2b => "e2b",
            Self::Local => "local",
            Self::None => "none",
        }
    }
}

impl fmt::Display for SandboxChoice {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

impl FromStr for SandboxChoice {
    type Err = Error;

    fn from_str(value: &str) -> Result<Self> {
        match value {
            "docker" => Ok(Self::Docker),
            "e2b" => Ok(Self::E2b),
            "local" => Ok(Self::Local),
            "none" => Ok(Self::None),
            other => Err(Error::InvalidSetting {
                var: env_vars::TOREN_SANDBOX.name,
                value: other.to_owned(),
                expected: format!("one of: {}", Self::AVAILABLE.join(", ")),
            }),
        }
    }
}

/// The run queue picked with `TOREN_QUEUE`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum QueueChoice {
    /// The store's own queue: runs wait in the event log and workers claim them with
    /// leases.
    Local,
    /// The same queue on a Postgres store (which it requires): claims with `FOR UPDATE
    /// SKIP LOCKED`, workers woken by `LISTEN/NOTIFY`.
    Postgres,
}

impl QueueChoice {
    /// The accepted `TOREN_QUEUE` values.
    pub const AVAILABLE: &[&str] = &["local", "postgres"];

    pub const fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::Postgres => "postgres",
        }
    }
}

impl FromStr for QueueChoice {
    type Err = Error;

    fn from_str(value: &str) -> Result<Self> {
        match value.trim() {
            "local" => Ok(Self::Local),
            "postgres" => Ok(Self::Postgres),
            other => Err(Error::InvalidSetting {
                var: env_vars::TOREN_QUEUE.name,
                value: other.to_owned(),
                expected: "`local` (the store's own queue) or `postgres` (with a Postgres \
                           TOREN_DATABASE_URL)"
                    .to_owned(),
            }),
        }
    }
}

/// A credential. Its `Debug` prints `***`; read it with [`Secret::expose`].
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The secret value, for the one place that must send it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}
