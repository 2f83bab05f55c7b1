//! The one registry of environment variables Toren reads, as data.
//!
//! Every variable [`crate::Settings::from_lookup`] consults is declared here with its
//! default and a description, so documentation can be generated from (and checked against)
//! [`ENV_VARS`], and so agent files can be refused when they try to grant one of Toren's own
//! credentials to a sandbox. No code reads the process environment; the binary passes a
//! lookup function.

/// One environment variable Toren reads.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct EnvVar {
    pub name: &'static str,
    /// The value used when the variable is unset or empty, as documented; `$VAR` stands for
    /// another variable's resolved value. `None`: no default (the feature is off).
    pub default: Option<&'static str>,
    pub description: &'static str,
    /// A credential: never printed, never granted to a sandbox.
    pub secret: bool,
}

pub const TOREN_HOME: EnvVar = EnvVar {
    name: "TOREN_HOME",
    default: Some("$HOME/.toren"),
    description: "Directory for Toren's own data: the default database and sandbox workspaces.",
    secret: false,
};

pub const TOREN_AGENTS: EnvVar = EnvVar {
    name: "TOREN_AGENTS",
    default: Some("./agents"),
    description: "Directory searched for agents given by name: NAME.yaml, NAME.yml or \
                  NAME/agent.yaml.",
    secret: false,
};

pub const TOREN_DATABASE_URL: EnvVar = EnvVar {
    name: "TOREN_DATABASE_URL",
    default: Some("sqlite://$TOREN_HOME/toren.db"),
    description: "The event log and run queue database (sqlite://PATH or postgres://...).",
    secret: true,
};

pub const TOREN_DATABASE_POOL_SIZE: EnvVar = EnvVar {
    name: "TOREN_DATABASE_POOL_SIZE",
    default: Some("10"),
    description: "With a Postgres TOREN_DATABASE_URL: at most this many connections each \
                  process opens to it (one more listens for other processes' writes), a whole \
                  number from 1 to 1000.",
    secret: false,
};

pub const TOREN_SANDBOX: EnvVar = EnvVar {
    name: "TOREN_SANDBOX",
    default: Some("auto"),
    description: "Sandbox backend: `auto` (E2B if E2B_API_KEY is set, else docker), `docker` \
                  (a container per run), `e2b` (an E2B microVM per run; needs E2B_API_KEY), \
                  `local` (bubblewrap, no daemon), `none` (sandbox agents fail fast).",
    secret: false,
};

pub const TOREN_SANDBOX_ROOT: EnvVar = EnvVar {
    name: "TOREN_SANDBOX_ROOT",
    default: Some("$TOREN_HOME/sandboxes"),
    description: "Directory holding one workspace per run or session. Toren never deletes \
                  a workspace.",
    secret: false,
};

pub const TOREN_DOWNLOADS: EnvVar = EnvVar {
    name: "TOREN_DOWNLOADS",
    default: Some("$HOME/Downloads/toren"),
    description: "Where files an agent sends in a chat (`send_to_channel`) arrive: one \
                  directory per session (0700), files 0600, never overwritten (`report.pdf`, \
                  `report-1.pdf`, …). Without HOME, `$TOREN_HOME/downloads`.",
    secret: false,
};

pub const TOREN_EXEC_HELPER: EnvVar = EnvVar {
    name: "TOREN_EXEC_HELPER",
    default: Some("the static build of this tree, else toren-exec beside the toren binary"),
    description: "The static `toren-exec` helper: PID 1 of each docker container and of the \
                  local backend's kept sandboxes (`scripts/build-exec-helper` builds it and \
                  prints its path; without it the local backend starts a fresh bubblewrap per \
                  command).",
    secret: false,
};

pub const TOREN_LEASE_TTL: EnvVar = EnvVar {
    name: "TOREN_LEASE_TTL",
    default: Some("30s"),
    description: "How long a run's lease outlives its holder's last heartbeat (renewed every \
                  third of it): a run whose host vanished is resumable after this long. A \
                  duration such as `30s`, `2m` or `1h`, from 1s to 24h.",
    secret: false,
};

pub const TOREN_MAX_TOKENS: EnvVar = EnvVar {
    name: "TOREN_MAX_TOKENS",
    default: Some("8192"),
    description: "The most tokens a model may answer with per call (`max_tokens`), a whole \
                  number from 1 to 1000000.",
    secret: false,
};

pub const TOREN_APPROVAL_POLL: EnvVar = EnvVar {
    name: "TOREN_APPROVAL_POLL",
    default: Some("200ms"),
    description: "How often a process looks in the log for what another process did there: a \
                  decision for a run waiting for approval (`toren approve`), a cancel \
                  (`toren cancel`), new events (`toren events --follow`). A duration such as \
                  `200ms` or `1s`, from 10ms to 60s.",
    secret: false,
};

pub const TOREN_LOG: EnvVar = EnvVar {
    name: "TOREN_LOG",
    default: Some("warn"),
    description: "Which diagnostics reach stderr: tracing filter directives, e.g. `info`, \
                  `toren_sandbox=info` or `warn,toren_worker=debug`. A value that does not \
                  parse fails at startup.",
    secret: false,
};

pub const DOCKER_HOST: EnvVar = EnvVar {
    name: "DOCKER_HOST",
    default: Some("unix:///var/run/docker.sock"),
    description: "The docker daemon the docker backend talks to.",
    secret: false,
};

pub const E2B_API_KEY: EnvVar = EnvVar {
    name: "E2B_API_KEY",
    default: None,
    description: "E2B key; with TOREN_SANDBOX=auto its presence selects the e2b backend.",
    secret: true,
};

pub const E2B_DOMAIN: EnvVar = EnvVar {
    name: "E2B_DOMAIN",
    default: Some("e2b.app"),
    description: "The E2B domain (a self-hosted E2B's); the control plane is \
                  `https://api.<domain>` and the sandboxes `https://sandbox.<domain>` unless \
                  E2B_API_URL / E2B_SANDBOX_URL say otherwise.",
    secret: false,
};

pub const E2B_API_URL: EnvVar = EnvVar {
    name: "E2B_API_URL",
    default: Some("https://api.$E2B_DOMAIN"),
    description: "E2B's control plane (create, connect, pause, kill sandboxes).",
    secret: false,
};

pub const E2B_SANDBOX_URL: EnvVar = EnvVar {
    name: "E2B_SANDBOX_URL",
    default: Some("https://sandbox.$E2B_DOMAIN"),
    description: "E2B's data plane (envd in each sandbox, picked by the E2b-Sandbox-Id \
                  header).",
    secret: false,
};

pub const ANTHROPIC_API_KEY: EnvVar = EnvVar {
    name: "ANTHROPIC_API_KEY",
    default: None,
    description: "API key for `anthropic/...` models.",
    secret: true,
};

pub const ANTHROPIC_BASE_URL: EnvVar = EnvVar {
    name: "ANTHROPIC_BASE_URL",
    default: Some("https://api.anthropic.com"),
    description: "Base URL of the Anthropic Messages API.",
    secret: false,
};

pub const OPENAI_API_KEY: EnvVar = EnvVar {
    name: "OPENAI_API_KEY",
    default: None,
    description: "API key for `openai/...` models (and OpenAI-compatible servers).",
    secret: true,
};

pub const OPENAI_BASE_URL: EnvVar = EnvVar {
    name: "OPENAI_BASE_URL",
    default: Some("https://api.openai.com/v1"),
    description: "Base URL of the OpenAI Chat Completions API or a compatible server.",
    secret: false,
};

pub const OLLAMA_HOST: EnvVar = EnvVar {
    name: "OLLAMA_HOST",
    default: Some("http://localhost:11434"),
    description: "Address of the Ollama server for `ollama/...` models (`http://` is assumed \
                  when no scheme is given).",
    secret: false,
};

pub const HOME: EnvVar = EnvVar {
    name: "HOME",
    default: None,
    description: "The user's home: the defaults of `TOREN_HOME` and `TOREN_DOWNLOADS`.",
    secret: false,
};

pub const TOREN_API_ADDR: EnvVar = EnvVar {
    name: "TOREN_API_ADDR",
    default: Some("127.0.0.1:7420"),
    description: "The address `toren serve` listens on (IP:PORT). A non-loopback address \
                  needs TOREN_API_TOKEN.",
    secret: false,
};

pub const TOREN_API_TOKEN: EnvVar = EnvVar {
    name: "TOREN_API_TOKEN",
    default: None,
    description: "The bearer token the HTTP API requires (`Authorization: Bearer ...`); \
                  requests made with it act as `api`.",
    secret: true,
};

pub const TOREN_API_TOKENS_FILE: EnvVar = EnvVar {
    name: "TOREN_API_TOKENS_FILE",
    default: None,
    description: "A file of API tokens, one `name:token` per line (`#` comments), so that \
                  decisions record who made them; used beside TOREN_API_TOKEN.",
    secret: false,
};

pub const TOREN_QUEUE: EnvVar = EnvVar {
    name: "TOREN_QUEUE",
    default: Some("local"),
    description: "Where runs wait for a worker: `local` (the store's own queue, claimed by \
                  `toren serve`'s and `toren worker`'s workers) or `postgres` (the same, on a \
                  Postgres TOREN_DATABASE_URL, which it requires: claims with `FOR UPDATE \
                  SKIP LOCKED`, workers woken by `LISTEN/NOTIFY`).",
    secret: false,
};

pub const TOREN_WORKER_ID: EnvVar = EnvVar {
    name: "TOREN_WORKER_ID",
    default: Some("host name + a suffix kept in $TOREN_HOME/worker-id"),
    description: "The identity of a `toren worker` (and of `toren serve`'s pool) in \
                  `toren workers list`, kept across restarts; each process adds its own \
                  part to its lease holder name, so a restarted worker is never taken for \
                  the process it replaced.",
    secret: false,
};

pub const TOREN_WORKSPACE_VOLUME: EnvVar = EnvVar {
    name: "TOREN_WORKSPACE_VOLUME",
    default: Some("this machine (host name + machine id)"),
    description: "The workspace volume this process serves: new runs of the local and \
                  docker backends are pinned to it, and workers claim only runs of the \
                  volume they serve (runs without one, e.g. no sandbox, go to any worker). \
                  Hosts sharing one filesystem for TOREN_SANDBOX_ROOT set the same name.",
    secret: false,
};

pub const TOREN_AGENT_CONCURRENCY: EnvVar = EnvVar {
    name: "TOREN_AGENT_CONCURRENCY",
    default: Some("unlimited"),
    description: "At most this many runs of one agent are driven at once across all \
                  workers sharing the database (a whole number from 1 to 100000, or \
                  `unlimited`); the others wait while other agents' runs go first.",
    secret: false,
};

pub const TOREN_TEST_EGRESS_CA: EnvVar = EnvVar {
    name: "TOREN_TEST_EGRESS_CA",
    default: None,
    description: "TESTS ONLY: a PEM file of the certificates the egress proxy verifies the \
                  hosts it injects secrets for against, instead of the system's roots (how \
                  the trust suite's TLS test server plays such a host). Leave it unset in \
                  production.",
    secret: false,
};

pub const TOREN_TEST_EGRESS_HOSTS: EnvVar = EnvVar {
    name: "TOREN_TEST_EGRESS_HOSTS",
    default: None,
    description: "TESTS ONLY: `name=ip,…` pairs the egress proxy resolves to those addresses \
                  instead of asking the system's resolver (how the trust suite reaches its \
                  test servers by name). It changes only name resolution: loopback, private \
                  and metadata addresses stay refused. Leave it unset in production.",
    secret: false,
};

pub const AWS_ENDPOINT_URL: EnvVar = EnvVar {
    name: "AWS_ENDPOINT_URL",
    default: None,
    description: "Where `toren deploy-aws` sends its AWS calls (e.g. a local emulator); \
                  unset: AWS's own endpoints. Credentials and profile the AWS SDK finds as \
                  the AWS tools do.",
    secret: false,
};

pub const AWS_REGION: EnvVar = EnvVar {
    name: "AWS_REGION",
    default: Some("$AWS_DEFAULT_REGION"),
    description: "The AWS region `toren deploy-aws` deploys to; unset (and no \
                  AWS_DEFAULT_REGION): the AWS SDK's own choice (profile).",
    secret: false,
};

pub const AWS_DEFAULT_REGION: EnvVar = EnvVar {
    name: "AWS_DEFAULT_REGION",
    default: None,
    description: "The AWS region of `toren deploy-aws`; only used when `AWS_REGION` is unset.",
    secret: false,
};

pub const USER: EnvVar = EnvVar {
    name: "USER",
    default: Some("$LOGNAME, else unnamed (no USER or LOGNAME)"),
    description: "Who decides, as recorded in `approval_decided` when a person approves or \
                  denies from this process (`toren approve`, `toren deny`, the terminal \
                  prompt).",
    secret: false,
};

pub const LOGNAME: EnvVar = EnvVar {
    name: "LOGNAME",
    default: None,
    description: "The user's login name; only used when `USER` is unset.",
    secret: false,
};

/// Every variable Toren reads, in documentation order.
pub const ENV_VARS: &[EnvVar] = &[
    TOREN_HOME,
    TOREN_AGENTS,
    TOREN_DATABASE_URL,
    TOREN_DATABASE_POOL_SIZE,
    TOREN_SANDBOX,
    TOREN_SANDBOX_ROOT,
    TOREN_DOWNLOADS,
    TOREN_EXEC_HELPER,
    TOREN_LEASE_TTL,
    TOREN_MAX_TOKENS,
    TOREN_APPROVAL_POLL,
    TOREN_LOG,
    TOREN_API_ADDR,
    TOREN_API_TOKEN,
    TOREN_API_TOKENS_FILE,
    TOREN_QUEUE,
    TOREN_WORKER_ID,
    TOREN_WORKSPACE_VOLUME,
    TOREN_AGENT_CONCURRENCY,
    TOREN_TEST_EGRESS_HOSTS,
    TOREN_TEST_EGRESS_CA,
    DOCKER_HOST,
    E2B_API_KEY,
    E2B_DOMAIN,
    E2B_API_URL,
    E2B_SANDBOX_URL,
    ANTHROPIC_API_KEY,
    ANTHROPIC_BASE_URL,
    OPENAI_API_KEY,
    OPENAI_BASE_URL,
    OLLAMA_HOST,
    AWS_ENDPOINT_URL,
    AWS_REGION,
    AWS_DEFAULT_REGION,
    HOME,
    USER,
    LOGNAME,
    crate::telegram::TELEGRAM_BOT_TOKEN,
    crate::telegram::TELEGRAM_API_URL,
    crate::telegram::TOREN_TELEGRAM_USERS,
    crate::telegram::TOREN_TELEGRAM_GROUPS,
    crate::telegram::TOREN_TELEGRAM_AGENT,
];

/// The registered variable called `name`.
pub fn lookup(name: &str) -> Option<&'static EnvVar> {
    ENV_VARS.iter().find(|var| var.name == name)
}

/// Whether `name` is one of Toren's own credentials.
pub fn is_secret(name: &str) -> bool {
    lookup(name).is_some_and(|var| var.secret) || OTHER_CREDENTIALS.contains(&name)
}

/// Credentials of Toren's planned backends, API and channels: not read by this version,
/// but Toren's own all the same, so never granted to a sandbox (I-7).
pub const OTHER_CREDENTIALS: [&str; 1] = ["TELEGRAM_BOT_TOKEN"];

/// Whether `name` belongs to Toren (a credential, or any `TOREN_*` variable) and so may
/// never be granted to a sandbox.
pub fn is_reserved(name: &str) -> bool {
    is_secret(name) || name.starts_with("TOREN_")
}

/// A Markdown table of [`ENV_VARS`] for the documentation (`| Variable | Default | ... |`).
pub fn markdown_table() -> String {
    let mut table = String::from("| Variable | Default | Description |\n|---|---|---|\n");
    for var in ENV_VARS {
        let default = var
            .default
            .map_or_else(|| "(unset)".to_owned(), |d| format!("`{d}`"));
        let description = var
            .description
            .split_whitespace()
            .collect::<Vec<_>>()
            .join(" ");
        table.push_str(&format!("| `{}` | {default} | {description} |\n", var.name));
    }
    table
}
