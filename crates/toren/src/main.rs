//! The `toren` command. `main` is synchronous: it parses arguments, builds the Tokio
//! runtime, runs one command and maps its result to an exit status. Which concrete
//! backends a command uses is decided in [`wiring`] and nowhere else, and only `wiring`
//! reads the environment (the diagnostics filter included).

// Shadow std's printing macros for every module below: a closed pipe must not panic
// (see `out`). Defined before the modules so that their textual scope covers them all.
macro_rules! print {
    ($($arg:tt)*) => {
        $crate::out::stdout(::std::format_args!($($arg)*))
    };
}
macro_rules! println {
    () => {
        $crate::out::stdout(::std::format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::stdout(::std::format_args!("{}\n", ::std::format_args!($($arg)*)))
    };
}
macro_rules! eprint {
    ($($arg:tt)*) => {
        $crate::out::stderr(::std::format_args!($($arg)*))
    };
}
macro_rules! eprintln {
    () => {
        $crate::out::stderr(::std::format_args!("\n"))
    };
    ($($arg:tt)*) => {
        $crate::out::stderr(::std::format_args!("{}\n", ::std::format_args!($($arg)*)))
    };
}

mod cli;
mod commands;
mod exit;
mod out;
mod printer;
mod wiring;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{
    Cli, Command, LogFormat, RunsCommand, SandboxCommand, SessionsCommand, WorkersCommand,
};
use crate::exit::Failure;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let format = match &cli.command {
        Command::Telegram(args) => Some(args.log_format),
        Command::Serve(args) => Some(args.log_format),
        Command::Worker(args) => Some(args.log_format),
        _ => None,
    };
    let filter = match wiring::log_filter(format.is_some()) {
        Ok(filter) => filter,
        Err(failure) => return failure.report(),
    };
    let logs = tracing_subscriber::fmt()
        .with_env_filter(filter)
        .with_writer(printer::LogWriter)
        .with_ansi(false);
    if format == Some(LogFormat::Json) {
        // One object per line, with the fields of the spans it is in (run_id, call_id).
        logs.json()
            .with_current_span(true)
            .with_span_list(true)
            .init();
    } else {
        logs.init();
    }
    let runtime = match tokio::runtime::Builder::new_multi_thread()
        .enable_all()
        .build()
    {
        Ok(runtime) => runtime,
        Err(e) => {
            return Failure::failed(anyhow::anyhow!("cannot start the async runtime: {e}"))
                .report();
        }
    };
    let result = runtime.block_on(dispatch(cli.command));
    // Do not wait for stray tasks (e.g. a blocked stdin reader) on the way out.
    runtime.shutdown_background();
    match result {
        Ok(code) => ExitCode::from(code),
        Err(failure) => failure.report(),
    }
}

async fn dispatch(command: Command) -> Result<u8, Failure> {
    match command {
        Command::Run(args) => commands::run::run(args).await,
        Command::Resume(args) => commands::resume::resume(args).await,
        Command::Chat(args) => commands::chat::chat(args).await,
        Command::Sessions(SessionsCommand::List { json }) => commands::sessions::list(json).await,
        Command::Sessions(SessionsCommand::Show { name, json }) => {
            commands::sessions::show(&name, json).await
        }
        Command::Sessions(SessionsCommand::Rm {
            name,
            delete_workspace,
        }) => commands::sessions::rm(&name, delete_workspace).await,
        Command::Runs(RunsCommand::List { json, limit }) => commands::runs::list(json, limit).await,
        Command::Runs(RunsCommand::Show { run, json }) => commands::runs::show(&run, json).await,
        Command::Events(args) => commands::events::events(&args).await,
        Command::Diff(args) => commands::diff::diff(&args).await,
        Command::Export(args) => commands::diff::export(&args).await,
        Command::Rewind(args) => commands::rewind::rewind(&args).await,
        Command::Approve(args) => commands::approve::decide(&args, true, None).await,
        Command::Deny(args) => commands::approve::decide(&args.target, false, args.reason).await,
        Command::Cancel(args) => commands::approve::cancel(&args).await,
        Command::Budget(args) => commands::budget::budget(&args).await,
        Command::Telegram(args) => commands::telegram::telegram(&args).await,
        Command::Serve(args) => commands::serve::serve(&args).await,
        Command::Worker(args) => commands::worker::worker(&args).await,
        Command::Workers(WorkersCommand::List { json }) => commands::worker::list(json).await,
        Command::DeployAws(args) => commands::deploy_aws::deploy_aws(&args).await,
        Command::Check(args) => commands::check::check(&args.paths),
        Command::Sandbox(SandboxCommand::List { json }) => commands::sandbox::list(json).await,
        Command::Sandbox(SandboxCommand::Reap { dry_run }) => {
            commands::sandbox::reap(dry_run).await
        }
    }
}
