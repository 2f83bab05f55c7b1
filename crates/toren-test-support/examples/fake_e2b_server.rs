//! The local E2B server ([`toren_test_support::e2b::FakeE2b`]) as a process of its own, for
//! tests that need it beside other processes or containers (the compose test,
//! `scripts/test-compose`, runs it as the stack's extra `e2b` service). The fake listens
//! on loopback ports of its own; this program forwards two given addresses to them, byte
//! for byte, and serves until it is killed.
//!
//! ```text
//! fake_e2b_server KEY CONTROL_ADDR ENVD_ADDR      e.g. e2b_00… 0.0.0.0:3000 0.0.0.0:3001
//! ```
//!
//! It prints `ready` on stdout once both addresses accept connections.

#![expect(
    clippy::print_stdout,
    reason = "`ready` on stdout is the signal its starter waits for"
)]

use std::net::SocketAddr;

use anyhow::{Context, bail};
use toren_test_support::e2b::FakeE2b;

fn main() -> anyhow::Result<()> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let [key, control, envd] = args.as_slice() else {
        bail!("usage: fake_e2b_server KEY CONTROL_ADDR ENVD_ADDR");
    };
    let control: SocketAddr = control.parse().context("CONTROL_ADDR")?;
    let envd: SocketAddr = envd.parse().context("ENVD_ADDR")?;
    let fake = FakeE2b::start(key)?;
    let to_control = target(&fake.api_url())?;
    let to_envd = target(&fake.sandbox_url())?;
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    runtime.block_on(async move {
        let a = tokio::net::TcpListener::bind(control).await?;
        let b = tokio::net::TcpListener::bind(envd).await?;
        println!("ready");
        tokio::select! {
            r = forward(a, to_control) => r,
            r = forward(b, to_envd) => r,
        }
    })?;
    drop(fake);
    Ok(())
}

/// The address of a `http://host:port` URL.
fn target(url: &str) -> anyhow::Result<SocketAddr> {
    url.trim_start_matches("http://")
        .trim_end_matches('/')
        .parse()
        .with_context(|| format!("the fake's address {url}"))
}

/// Accepts connections forever, each copied both ways to `to`.
async fn forward(listener: tokio::net::TcpListener, to: SocketAddr) -> anyhow::Result<()> {
    loop {
        let (mut inbound, _) = listener.accept().await?;
        tokio::spawn(async move {
            if let Ok(mut outbound) = tokio::net::TcpStream::connect(to).await {
                let _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound).await;
            }
        });
    }
}
