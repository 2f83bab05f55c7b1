//! `e2b`: how fast the e2b backend is against the local E2B server, in one run:
//! a new run's sandbox to its first command's output (create, `/workspace` made, `echo`),
//! a resumed run's (list by metadata, `connect`, `echo`), and a trivial command (`true`)
//! through envd's `process.Process/Start`, beside a plain `bash -c true` on the host. The
//! local server's "VM" is a bubblewrap sandbox per process, so these figures are Toren's
//! client and protocol cost plus a bubblewrap start, not E2B's: a deployment should expect
//! E2B's published create-to-first-output medians, 441–491 ms, which the table quotes
//! beside the first row. Correct when every command printed what it was given.

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::ensure;
use clap::Args;
use serde::Serialize;
use toren_protocol::{ResolvedPolicy, RunId};
use toren_sandbox::{ExecRequest, Sandbox, SandboxBackend};
use toren_sandbox_e2b::{E2bBackend, E2bSettings, Endpoints};
use toren_test_support::e2b::FakeE2b;

use crate::api_load::Verdict;
use crate::report::{Machine, Table};
use crate::stats::Spread;
use crate::tool_call::say;

const KEY: &str = "e2b_0123456789abcdef";
/// E2B's published create-to-first-output medians (ms).
const PUBLISHED_MS: (f64, f64) = (441.0, 491.0);

#[derive(Debug, Args)]
pub(crate) struct E2bArgs {
    /// Fresh sandboxes created (each also reconnected once) [default: 20; 3 with --quick].
    #[arg(long)]
    starts: Option<usize>,
    /// Trivial commands timed, and as many host `bash -c true` [default: 200; 10 with
    /// --quick].
    #[arg(long)]
    commands: Option<usize>,
    /// Where to write the figures as JSON [default: target/toren-bench/e2b.json, or
    /// e2b-quick.json with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
struct Figures {
    benchmark: &'static str,
    machine: Machine,
    quick: bool,
    create_to_first_output: Option<Spread>,
    reconnect_to_first_output: Option<Spread>,
    trivial_command: Option<Spread>,
    host_bash_true: Option<Spread>,
    published_create_to_first_output_ms: (f64, f64),
    correct: bool,
}

fn request(command: &str) -> ExecRequest {
    ExecRequest {
        command: command.to_owned(),
        timeout: Duration::from_secs(30),
        output_limit: 30_000,
    }
}

async fn first_output(sandbox: &dyn Sandbox, word: &str) -> anyhow::Result<bool> {
    let out = sandbox.exec(request(&format!("echo {word}"))).await?;
    Ok(out.output == format!("{word}\n") && out.exit_code == Some(0))
}

pub(crate) async fn run(args: E2bArgs, quick: bool) -> anyhow::Result<Verdict> {
    let starts = args.starts.unwrap_or(if quick { 3 } else { 20 }).max(1);
    let commands = args.commands.unwrap_or(if quick { 10 } else { 200 }).max(1);
    let fake = FakeE2b::start(KEY)?;
    let root = tempfile::tempdir()?;
    let backend = E2bBackend::new(E2bSettings {
        endpoints: Endpoints {
            api_key: KEY.to_owned(),
            api_url: fake.api_url(),
            sandbox_url: fake.sandbox_url(),
        },
        sandbox_root: root.path().to_owned(),
        default_template: toren_sandbox_e2b::DEFAULT_TEMPLATE.to_owned(),
        instance: "bench".to_owned(),
        lifetime: Duration::from_secs(600),
    })?;
    let policy: ResolvedPolicy = serde_json::from_value(serde_json::json!({
        "backend": "e2b", "network": false, "approval": "never", "env": [],
    }))?;

    say(&format!(
        "e2b: {starts} sandboxes created and reconnected on the local E2B server"
    ));
    let (mut created, mut reconnected) = (Vec::new(), Vec::new());
    let mut correct = true;
    let mut kept = None;
    for i in 0..starts {
        let run = RunId::new();
        let began = Instant::now();
        let opened = backend.open(&run, &policy, vec![]).await?;
        correct &= first_output(opened.as_ref(), "first").await?;
        created.push(began.elapsed());
        drop(opened);
        // Another worker's view: a backend with nothing in memory, finding it by metadata.
        let other = E2bBackend::new(backend.settings().clone())?;
        let began = Instant::now();
        let again = other.open(&run, &policy, vec![]).await?;
        correct &= first_output(again.as_ref(), "again").await?;
        reconnected.push(began.elapsed());
        if i + 1 == starts {
            kept = Some((run, again));
        } else {
            drop(again);
            other.finish(&run).await?;
        }
    }
    let (run, sandbox) = kept.ok_or_else(|| anyhow::anyhow!("no sandbox was made"))?;

    say(&format!(
        "e2b: {commands} trivial commands, and as many on the host"
    ));
    let mut trivial = Vec::with_capacity(commands);
    for _ in 0..commands {
        let began = Instant::now();
        let out = sandbox.exec(request("true")).await?;
        trivial.push(began.elapsed());
        correct &= out.exit_code == Some(0);
    }
    drop(sandbox);
    backend.finish(&run).await?;
    let mut host = Vec::with_capacity(commands);
    for _ in 0..commands {
        let began = Instant::now();
        let status = tokio::process::Command::new("bash")
            .args(["-c", "true"])
            .status()
            .await?;
        host.push(began.elapsed());
        ensure!(status.success(), "bash -c true failed on the host");
    }

    let figures = Figures {
        benchmark: "e2b",
        machine: Machine::this(),
        quick,
        create_to_first_output: Spread::of(&created),
        reconnect_to_first_output: Spread::of(&reconnected),
        trivial_command: Spread::of(&trivial),
        host_bash_true: Spread::of(&host),
        published_create_to_first_output_ms: PUBLISHED_MS,
        correct,
    };
    let spread = |s: &Option<Spread>| {
        s.map(|s| {
            format!(
                "p50 {:.1} ms, p99 {:.1} ms, max {:.1} ms",
                s.p50_ms, s.p99_ms, s.max_ms
            )
        })
        .unwrap_or_default()
    };
    let mut table = Table::default();
    table.row(
        "new run: create → first output",
        format!(
            "{} (E2B's published medians: {:.0}–{:.0} ms)",
            spread(&figures.create_to_first_output),
            PUBLISHED_MS.0,
            PUBLISHED_MS.1
        ),
    );
    table.row(
        "resumed run: list + connect → first output",
        spread(&figures.reconnect_to_first_output),
    );
    table.row(
        "trivial command (`true`) via Process/Start",
        spread(&figures.trivial_command),
    );
    table.row(
        "host `bash -c true` (floor)",
        spread(&figures.host_bash_true),
    );
    table.row("correct", if correct { "yes" } else { "NO" });
    table.print("toren-bench e2b (the local E2B server, not E2B)");
    let path = args.json.unwrap_or_else(|| {
        crate::toren_bin::default_output(if quick { "e2b-quick.json" } else { "e2b.json" })
    });
    crate::report::write_json(&path, &figures)?;
    say(&format!("e2b: figures written to {}", path.display()));
    Ok(if correct {
        Verdict::Correct
    } else {
        Verdict::Wrong
    })
}
