//! `toren-bench`: Toren's benchmark programs. Each one drives the real thing (today: the
//! release `toren` binary serving its HTTP API), prints its figures on stdout as a table
//! and writes them as JSON; people's messages go to stderr. They are programs, not timed
//! tests: they check that what they measured went right (every run completed with a correct
//! log) and exit 1 when it did not, but no figure is ever asserted. `--quick` runs a small
//! load so the test command can check that every benchmark still runs.
//!
//! `main` is synchronous: it parses the arguments, builds the Tokio runtime, runs one
//! benchmark and maps its outcome to an exit status (0 correct, 1 something went wrong
//! under load, 2 it could not start).

mod all;
mod api_load;
mod checkpoint;
mod cli;
mod concurrency;
mod e2b;
mod egress;
mod fleet;
mod journal;
mod model;
mod replay;
mod report;
mod sandbox_start;
mod sse;
mod stats;
mod tool_call;
mod toren_bin;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command};

/// Something went wrong under load (a run failed, a log was wrong, the server misbehaved).
pub(crate) const WRONG: u8 = 1;
/// The benchmark could not start (no `toren` binary, the server did not come up).
const SETUP: u8 = 2;

fn main() -> ExitCode {
    let cli = Cli::parse();
    // reqwest is built with rustls and no provider: install ring before any client.
    let _ = rustls::crypto::ring::default_provider().install_default();
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            return fail(
                SETUP,
                &anyhow::anyhow!("cannot start the async runtime: {e}"),
            );
        }
    };
    let outcome = runtime.block_on(run(cli.command, cli.quick));
    runtime.shutdown_background();
    match outcome {
        Ok(api_load::Verdict::Correct) => ExitCode::SUCCESS,
        Ok(api_load::Verdict::Wrong) => ExitCode::from(WRONG),
        Err(e) => fail(SETUP, &e),
    }
}

/// Runs one benchmark; `all` runs each of the others through here in turn.
pub(crate) async fn run(command: Command, quick: bool) -> anyhow::Result<api_load::Verdict> {
    match command {
        Command::ApiLoad(args) => api_load::run(args.resolve(quick)).await,
        Command::Journal(args) => journal::run(args, quick).await,
        Command::Concurrency(args) => concurrency::run(args.resolve(quick))
            .await
            .map(concurrency::verdict),
        Command::Sse(args) => sse::run(args.resolve(quick))
            .await
            .map(concurrency::verdict),
        Command::Model(args) => model::run(args.resolve(quick))
            .await
            .map(concurrency::verdict),
        Command::Replay(args) => replay::run(args, quick).await,
        Command::ToolCall(args) => tool_call::run(args, quick).await,
        Command::SandboxStart(args) => sandbox_start::run(args, quick).await,
        Command::E2b(args) => e2b::run(args, quick).await,
        Command::Fleet(args) => fleet::run(args, quick).await,
        Command::Checkpoint(args) => checkpoint::run(args, quick).await,
        Command::Egress(args) => egress::run(args, quick).await,
        Command::All(args) => all::run(args, quick).await,
    }
}

#[expect(
    clippy::print_stderr,
    reason = "the one place that reports a failed start"
)]
fn fail(code: u8, error: &anyhow::Error) -> ExitCode {
    eprintln!("toren-bench: error: {error:#}");
    ExitCode::from(code)
}
