//! The command line: `toren-bench [--quick] api-load [options]`. Each benchmark is a
//! subcommand; `--quick` shrinks every one to a load that only proves it still runs.

use std::path::PathBuf;
use std::time::Duration;

use clap::{Args, Parser, Subcommand, ValueEnum};

#[derive(Debug, Parser)]
#[command(name = "toren-bench", version, about = "Toren's benchmark programs")]
pub(crate) struct Cli {
    /// A small load that checks the benchmark runs (for the test command), not its figures.
    #[arg(long, global = true)]
    pub(crate) quick: bool,
    #[command(subcommand)]
    pub(crate) command: Command,
}

#[derive(Debug, Subcommand)]
pub(crate) enum Command {
    /// Creates runs of a scripted agent through `toren serve`'s HTTP API and measures
    /// `POST /runs`, the time until all have completed and the server's memory; checks
    /// every run's log.
    ApiLoad(ApiLoadArgs),
    /// What journaling costs: durable events per second for one run and for many at once,
    /// fsyncs per durable step (strace), and the latency a tool call's `tool_started` +
    /// `tool_completed` add against the same call with the store bypassed.
    Journal(crate::journal::JournalArgs),
    /// Many runs live at once in one `toren serve`: runs waiting for approval beside runs
    /// making tool calls; what a waiting run costs and holds; then all approved and checked.
    Concurrency(crate::concurrency::ConcurrencyArgs),
    /// `POST /runs` throughput and latency from this process, then many clients following
    /// one run's Server-Sent Events: delivery delay, exactly-once order, server resources.
    Sse(crate::sse::SseArgs),
    /// The time from a fake model server's last byte to the tool call starting, per
    /// provider (Anthropic, OpenAI) through a Worker, against the scripted provider.
    Model(crate::model::ModelArgs),
    /// Resuming a run: the time to its next new action for logs of 1,000 / 10,000 /
    /// 100,000 events, split into read, decode, fold and decide, and how it grows.
    Replay(crate::replay::ReplayArgs),
    /// The trivial tool call (`bash: true`) through a worker over a real SQLite store, per
    /// backend, against `bash -c true`, `bwrap … true` and `docker exec … true`.
    ToolCall(crate::tool_call::ToolCallArgs),
    /// A new run's sandbox start to its first command's output, per backend; for docker,
    /// each Engine API call of the start timed on its own.
    SandboxStart(crate::sandbox_start::SandboxStartArgs),
    /// The e2b backend against the local E2B server: create to first output, reconnect to
    /// first output, a trivial command; E2B's published medians quoted beside.
    E2b(crate::e2b::E2bArgs),
    /// `toren worker` fleets: runs/s and events/s for 1, 2 and 4 worker processes on
    /// Postgres and on SQLite (no-tool and one-bash agents), the claim latency from a run's
    /// creation to its first worker event, and each store's per-event commit cost.
    Fleet(crate::fleet::FleetArgs),
    /// The workspace checkpoint taken before each tool call, on a 20,000-file tree with
    /// one file changed per call; a checkpoint with nothing changed; a restore.
    Checkpoint(crate::checkpoint::CheckpointArgs),
    /// What the egress proxy adds on loopback: a new connection and one round trip
    /// directly, through the proxy's socket and through the sandbox's relay + proxy path;
    /// one round trip over an open tunnel against an open direct connection.
    Egress(crate::egress::EgressArgs),
    /// Every other benchmark in turn (their defaults, or small loads with --quick): each
    /// table printed, each JSON written, and a summary in target/toren-bench/all.json.
    All(crate::all::AllArgs),
}

/// Where a run's bash call runs (`TOREN_SANDBOX` of the server).
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub(crate) enum SandboxKind {
    /// bubblewrap: the agent's run makes one bash call, then answers.
    Local,
    /// No sandbox: the agent has no tools and only answers (the API, queue and journal
    /// without any process spawned).
    None,
}

impl SandboxKind {
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Self::Local => "local",
            Self::None => "none",
        }
    }
}

#[derive(Debug, Args)]
pub(crate) struct ApiLoadArgs {
    /// How many runs to create [default: 500; 20 with --quick].
    #[arg(long)]
    runs: Option<usize>,
    /// `toren serve --workers N`: how many runs the server drives at once.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// How many clients post runs at the same time.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// The server's sandbox backend.
    #[arg(long, value_enum, default_value_t = SandboxKind::Local)]
    sandbox: SandboxKind,
    /// The `toren` binary [default: `toren` beside this program, e.g. target/release/toren].
    #[arg(long)]
    toren: Option<PathBuf>,
    /// Where to write the figures as JSON [default: target/toren-bench/api-load.json, or
    /// api-load-quick.json with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
    /// How long all runs may take to end, in seconds, before the stuck ones are listed.
    #[arg(long, default_value_t = 600)]
    timeout: u64,
    /// How often the run list is polled for statuses, in milliseconds.
    #[arg(long, default_value_t = 250)]
    poll_ms: u64,
    /// Keep the temporary TOREN_HOME (its database and workspaces) and say where it is.
    #[arg(long)]
    keep_home: bool,
}

/// [`ApiLoadArgs`] with the defaults that depend on `--quick` filled in.
#[derive(Debug, Clone)]
pub(crate) struct ApiLoad {
    pub(crate) quick: bool,
    pub(crate) runs: usize,
    pub(crate) workers: usize,
    pub(crate) concurrency: usize,
    pub(crate) sandbox: SandboxKind,
    pub(crate) toren: Option<PathBuf>,
    pub(crate) json: Option<PathBuf>,
    pub(crate) timeout: Duration,
    pub(crate) poll: Duration,
    pub(crate) keep_home: bool,
}

impl ApiLoadArgs {
    pub(crate) fn resolve(self, quick: bool) -> ApiLoad {
        ApiLoad {
            quick,
            runs: self.runs.unwrap_or(if quick { 20 } else { 500 }),
            workers: self.workers,
            concurrency: self.concurrency.max(1),
            sandbox: self.sandbox,
            toren: self.toren,
            json: self.json,
            timeout: Duration::from_secs(self.timeout),
            poll: Duration::from_millis(self.poll_ms.max(1)),
            keep_home: self.keep_home,
        }
    }
}
