//! How fast the e2b backend is against the local E2B server, in one run: a new run's
//! sandbox to its first command's output (create, `/workspace` made, `echo`), a resumed
//! run's (list by metadata, connect, `echo`), and a trivial command (`true`) through
//! envd's `process.Process/Start`, beside a plain `bash -c true` on the host. The local
//! server's "VM" is a bubblewrap sandbox per process, so these figures are Toren's client
//! and protocol cost plus a bwrap start, not E2B's: a deployment should expect E2B's
//! published create-to-first-output medians (441–491 ms) instead of the first row.
//!
//! ```text
//! cargo run --release -p toren-sandbox-e2b --example e2b_bench [-- ITERATIONS]
//! ```

use std::time::{Duration, Instant};

use toren_protocol::{ResolvedPolicy, RunId};
use toren_sandbox::ExecRequest;
use toren_sandbox_e2b::{E2bBackend, E2bSettings, Endpoints};
use toren_test_support::e2b::FakeE2b;

const KEY: &str = "e2b_0123456789abcdef";
/// Fresh sandboxes measured for create-to-first-output.
const STARTS: usize = 10;

fn policy() -> anyhow::Result<ResolvedPolicy> {
    Ok(serde_json::from_value(serde_json::json!({
        "backend": "e2b", "network": false, "approval": "never", "env": [],
    }))?)
}

fn request(command: &str) -> ExecRequest {
    ExecRequest {
        command: command.to_owned(),
        timeout: Duration::from_secs(30),
        output_limit: 30_000,
    }
}

fn row(name: &str, mut times: Vec<Duration>) {
    times.sort();
    let at = |q: f64| {
        let i = ((times.len() as f64 - 1.0) * q).round() as usize;
        times[i].as_secs_f64() * 1000.0
    };
    #[expect(clippy::print_stdout, reason = "the benchmark's table is its output")]
    {
        println!(
            "| {name} | {} | {:.1} | {:.1} | {:.1} |",
            times.len(),
            at(0.5),
            at(0.9),
            at(1.0)
        );
    }
}

#[tokio::main]
async fn main() -> anyhow::Result<()> {
    let iterations: usize = std::env::args()
        .nth(1)
        .map(|n| n.parse())
        .transpose()?
        .unwrap_or(200);
    let fake = FakeE2b::start(KEY)?;
    let root = tempfile::tempdir()?;
    let backend = E2bBackend::new(E2bSettings {
        endpoints: Endpoints {
            api_key: KEY.to_owned(),
            api_url: fake.api_url(),
            sandbox_url: fake.sandbox_url(),
        },
        sandbox_root: root.path().to_owned(),
        default_template: "base".to_owned(),
        instance: "bench".to_owned(),
        lifetime: Duration::from_secs(600),
    })?;
    let policy = policy()?;

    let (mut created, mut reconnected) = (Vec::new(), Vec::new());
    let mut sandbox = None;
    for _ in 0..STARTS {
        let run = RunId::new();
        let started = Instant::now();
        let opened = backend.open(&run, &policy, vec![]).await?;
        let out = opened.exec(request("echo first")).await?;
        created.push(started.elapsed());
        anyhow::ensure!(
            out.output == "first\n",
            "unexpected output {:?}",
            out.output
        );
        // Another worker's view: a new backend value reconnecting by metadata.
        let started = Instant::now();
        let again = backend.open(&run, &policy, vec![]).await?;
        again.exec(request("echo again")).await?;
        reconnected.push(started.elapsed());
        sandbox = Some(again);
    }
    let sandbox = sandbox.ok_or_else(|| anyhow::anyhow!("no sandbox"))?;

    let mut trivial = Vec::new();
    for _ in 0..iterations {
        let started = Instant::now();
        let out = sandbox.exec(request("true")).await?;
        trivial.push(started.elapsed());
        anyhow::ensure!(out.exit_code == Some(0));
    }
    let mut host = Vec::new();
    for _ in 0..iterations {
        let started = Instant::now();
        tokio::process::Command::new("bash")
            .args(["-c", "true"])
            .status()
            .await?;
        host.push(started.elapsed());
    }
    #[expect(clippy::print_stdout, reason = "the benchmark's table is its output")]
    {
        println!("| e2b against the local E2B server | n | p50 ms | p90 ms | max ms |");
        println!("|---|---|---|---|---|");
    }
    row("new run: create → first output", created);
    row("resumed run: list + connect → first output", reconnected);
    row("trivial command (`true`) via Process/Start", trivial);
    row("host `bash -c true` (floor)", host);
    Ok(())
}
