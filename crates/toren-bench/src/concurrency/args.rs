//! `toren-bench [--quick] concurrency [options]`: how many runs of each kind, the pool's
//! size, and where the binary and the figures are.

use std::path::PathBuf;
use std::time::Duration;

use clap::Args;

#[derive(Debug, Args)]
pub(crate) struct ConcurrencyArgs {
    /// Runs that wait for approval [default: 500; 10 with --quick].
    #[arg(long)]
    waiting: Option<usize>,
    /// Runs that make a tool call at once [default: 500; 10 with --quick].
    #[arg(long)]
    tools: Option<usize>,
    /// `toren serve --workers N`.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// How many HTTP clients create, approve and read runs at the same time.
    #[arg(long, default_value_t = 16)]
    clients: usize,
    /// The `toren` binary [default: `toren` beside this program].
    #[arg(long)]
    toren: Option<PathBuf>,
    /// Where to write the figures [default: target/toren-bench/concurrency.json, or
    /// concurrency-quick.json with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
    /// How long the whole benchmark may take, in seconds.
    #[arg(long, default_value_t = 900)]
    timeout: u64,
}

/// [`ConcurrencyArgs`] with the defaults that depend on `--quick` filled in.
#[derive(Debug, Clone)]
pub(crate) struct Concurrency {
    pub(crate) quick: bool,
    pub(crate) waiting: usize,
    pub(crate) tools: usize,
    pub(crate) workers: usize,
    pub(crate) clients: usize,
    pub(crate) toren: Option<PathBuf>,
    pub(crate) json: Option<PathBuf>,
    pub(crate) timeout: Duration,
}

impl ConcurrencyArgs {
    pub(crate) fn resolve(self, quick: bool) -> Concurrency {
        let default = if quick { 10 } else { 500 };
        Concurrency {
            quick,
            waiting: self.waiting.unwrap_or(default).max(1),
            tools: self.tools.unwrap_or(default),
            workers: self.workers.max(1),
            clients: self.clients.max(1),
            toren: self.toren,
            json: self.json,
            timeout: Duration::from_secs(self.timeout),
        }
    }
}
