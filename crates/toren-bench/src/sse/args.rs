//! `toren-bench [--quick] sse [options]`.

use std::path::PathBuf;

use clap::Args;

#[derive(Debug, Args)]
pub(crate) struct SseArgs {
    /// Runs created through `POST /runs` for its throughput [default: 500; 20 with --quick].
    #[arg(long)]
    runs: Option<usize>,
    /// How many clients post at the same time.
    #[arg(long, default_value_t = 16)]
    concurrency: usize,
    /// Clients following one run's events [default: 500; 20 with --quick].
    #[arg(long)]
    followers: Option<usize>,
    /// `toren serve --workers N`.
    #[arg(long, default_value_t = 4)]
    workers: usize,
    /// The `toren` binary [default: `toren` beside this program].
    #[arg(long)]
    toren: Option<PathBuf>,
    /// Where to write the figures [default: target/toren-bench/sse.json, or sse-quick.json
    /// with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
}

/// [`SseArgs`] with the defaults that depend on `--quick` filled in.
#[derive(Debug, Clone)]
pub(crate) struct Sse {
    pub(crate) quick: bool,
    pub(crate) runs: usize,
    pub(crate) concurrency: usize,
    pub(crate) followers: usize,
    pub(crate) workers: usize,
    pub(crate) toren: Option<PathBuf>,
    pub(crate) json: Option<PathBuf>,
}

impl SseArgs {
    pub(crate) fn resolve(self, quick: bool) -> Sse {
        let (runs, followers) = if quick { (20, 20) } else { (500, 500) };
        Sse {
            quick,
            runs: self.runs.unwrap_or(runs).max(1),
            concurrency: self.concurrency.max(1),
            followers: self.followers.unwrap_or(followers).max(1),
            workers: self.workers.max(1),
            toren: self.toren,
            json: self.json,
        }
    }
}
