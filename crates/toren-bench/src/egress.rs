//! `egress`: what the egress proxy adds to a connection, on loopback. An echo server stands
//! in for the host a sandbox reaches; each sample is a new connection plus one round trip
//! of one byte, made directly, through the proxy's unix socket (`CONNECT`, the proxy's
//! resolution, its address check and upstream connection), and through the whole path a
//! sandbox with a host list takes (TCP to the in-sandbox relay, `toren_exec::forward`, then
//! the proxy's socket). Then one round trip on an open connection, direct against an open
//! tunnel (relay + proxy). Correct when every sample echoed its byte through a tunnel the
//! proxy answered with 200.
//!
//! The echo server is on 127.0.0.1, which the proxy refuses: exactly its address is put in
//! `ProxyConfig::permit`, the exemption only tests and benchmarks set (the binary never
//! does).

use std::io::{BufRead as _, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::ensure;
use clap::Args;
use serde::Serialize;
use tokio_util::sync::CancellationToken;
use toren_egress::{DenyAll, Proxy, ProxyConfig};
use toren_protocol::{EgressPolicy, HostPattern};
use toren_sandbox::egress::{LogRecorder, MappedResolver};

use crate::api_load::Verdict;
use crate::report::{Machine, Table};
use crate::stats::{Spread, percentile};
use crate::tool_call::say;

#[derive(Debug, Args)]
pub(crate) struct EgressArgs {
    /// New connections timed per path [default: 3000; 200 with --quick].
    #[arg(long)]
    connections: Option<usize>,
    /// Round trips timed on each open connection [default: 20000; 500 with --quick].
    #[arg(long)]
    messages: Option<usize>,
    /// Where to write the figures as JSON [default: target/toren-bench/egress.json, or
    /// egress-quick.json with --quick].
    #[arg(long)]
    json: Option<PathBuf>,
}

#[derive(Debug, Serialize)]
struct Figures {
    benchmark: &'static str,
    machine: Machine,
    quick: bool,
    connections: usize,
    messages: usize,
    /// A new connection and one round trip, straight to the echo server.
    new_direct: Option<Spread>,
    /// … through the proxy's unix socket (`CONNECT`).
    new_proxy: Option<Spread>,
    /// … through the relay and the proxy: the sandbox's path.
    new_relay_proxy: Option<Spread>,
    /// One round trip on an open direct connection.
    rtt_direct: Option<Spread>,
    /// One round trip over an open tunnel (relay + proxy).
    rtt_tunnel: Option<Spread>,
    /// p50 of the sandbox's path minus p50 direct, in microseconds.
    added_per_connection_us: f64,
    added_per_round_trip_us: f64,
}

pub(crate) async fn run(args: EgressArgs, quick: bool) -> anyhow::Result<Verdict> {
    let connections = args
        .connections
        .unwrap_or(if quick { 200 } else { 3_000 })
        .max(1);
    let messages = args
        .messages
        .unwrap_or(if quick { 500 } else { 20_000 })
        .max(1);
    let json = args.json.unwrap_or_else(|| {
        crate::toren_bin::default_output(if quick {
            "egress-quick.json"
        } else {
            "egress.json"
        })
    });
    let origin = echo_server()?;
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("proxy.sock");
    let listener = tokio::net::UnixListener::bind(&socket)?;
    let proxy = Proxy::new(ProxyConfig {
        policy: EgressPolicy {
            allow: vec![HostPattern::parse("origin.test").map_err(anyhow::Error::msg)?],
            ask: false,
            secrets: Vec::new(),
        },
        resolver: Arc::new(
            MappedResolver::parse("origin.test=127.0.0.1").map_err(anyhow::Error::msg)?,
        ),
        approver: Arc::new(DenyAll),
        recorder: Arc::new(LogRecorder),
        permit: vec![origin],
    });
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move { proxy.serve_unix(listener, token).await });
    let relay = TcpListener::bind("127.0.0.1:0")?;
    let relay_addr = relay.local_addr()?;
    let target_socket = socket.clone();
    std::thread::spawn(move || toren_exec::forward(&relay, &target_socket));

    say(&format!(
        "egress: {connections} new connections and {messages} round trips per path"
    ));
    // The clients block (std sockets, as a sandboxed process's are); the proxy runs on the
    // runtime's other threads.
    let measured = tokio::task::spawn_blocking(move || {
        paths(origin, &socket, relay_addr, connections, messages)
    })
    .await;
    stop.cancel();
    let m = measured??;

    let p50 = |times: &[Duration]| {
        let mut sorted = times.to_vec();
        sorted.sort_unstable();
        percentile(&sorted, 50).unwrap_or_default()
    };
    let added = |path: &[Duration], direct: &[Duration]| {
        p50(path).saturating_sub(p50(direct)).as_secs_f64() * 1e6
    };
    let figures = Figures {
        benchmark: "egress",
        machine: Machine::this(),
        quick,
        connections,
        messages,
        new_direct: Spread::of(&m.new_direct),
        new_proxy: Spread::of(&m.new_proxy),
        new_relay_proxy: Spread::of(&m.new_relay_proxy),
        rtt_direct: Spread::of(&m.rtt_direct),
        rtt_tunnel: Spread::of(&m.rtt_tunnel),
        added_per_connection_us: added(&m.new_relay_proxy, &m.new_direct),
        added_per_round_trip_us: added(&m.rtt_tunnel, &m.rtt_direct),
    };
    let micros = |s: Option<Spread>| {
        s.map_or_else(
            || "–".to_owned(),
            |s| {
                format!(
                    "{:.0} / {:.0} / {:.0} µs",
                    s.p50_ms * 1e3,
                    s.p99_ms * 1e3,
                    s.max_ms * 1e3
                )
            },
        )
    };
    let mut table = Table::default();
    table.row(
        "new connections / round trips per path",
        format!("{connections} / {messages}"),
    );
    table.row("(p50 / p99 / max)", "");
    table.row(
        "new connection + 1 round trip, direct",
        micros(figures.new_direct),
    );
    table.row(
        "  … through the proxy's socket (CONNECT)",
        micros(figures.new_proxy),
    );
    table.row(
        "  … through relay + proxy (the sandbox's path)",
        micros(figures.new_relay_proxy),
    );
    table.row(
        "1 round trip on an open connection, direct",
        micros(figures.rtt_direct),
    );
    table.row(
        "  … over an open tunnel (relay + proxy)",
        micros(figures.rtt_tunnel),
    );
    table.row(
        "added by the sandbox's path, p50",
        format!(
            "{:.0} µs per new connection, {:.0} µs per round trip",
            figures.added_per_connection_us, figures.added_per_round_trip_us
        ),
    );
    table.print("toren-bench egress");
    crate::report::write_json(&json, &figures)?;
    say(&format!("egress: figures written to {}", json.display()));
    Ok(Verdict::Correct)
}

/// The samples of each path.
struct Measured {
    new_direct: Vec<Duration>,
    new_proxy: Vec<Duration>,
    new_relay_proxy: Vec<Duration>,
    rtt_direct: Vec<Duration>,
    rtt_tunnel: Vec<Duration>,
}

fn paths(
    origin: SocketAddr,
    socket: &Path,
    relay: SocketAddr,
    connections: usize,
    messages: usize,
) -> anyhow::Result<Measured> {
    let target = format!("origin.test:{}", origin.port());
    // Every path once, uncounted.
    direct(origin)?;
    proxied(socket, &target)?;
    relayed(relay, &target)?;
    let new_direct = measure(connections, || direct(origin))?;
    let new_proxy = measure(connections, || proxied(socket, &target))?;
    let new_relay_proxy = measure(connections, || relayed(relay, &target))?;
    let mut stream = TcpStream::connect(origin)?;
    stream.set_nodelay(true)?;
    let rtt_direct = measure(messages, || ping(&mut stream))?;
    let mut tunnel = TcpStream::connect(relay)?;
    tunnel.set_nodelay(true)?;
    connect(&mut tunnel, &target)?;
    let rtt_tunnel = measure(messages, || ping(&mut tunnel))?;
    Ok(Measured {
        new_direct,
        new_proxy,
        new_relay_proxy,
        rtt_direct,
        rtt_tunnel,
    })
}

/// An echo server on loopback (a thread per connection).
fn echo_server() -> anyhow::Result<SocketAddr> {
    let listener = TcpListener::bind("127.0.0.1:0")?;
    let address = listener.local_addr()?;
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            std::thread::spawn(move || {
                let _ = stream.set_nodelay(true);
                let mut reader = stream;
                let Ok(mut writer) = reader.try_clone() else {
                    return;
                };
                let _ = std::io::copy(&mut reader, &mut writer);
            });
        }
    });
    Ok(address)
}

fn direct(origin: SocketAddr) -> anyhow::Result<()> {
    let mut stream = TcpStream::connect(origin)?;
    stream.set_nodelay(true)?;
    ping(&mut stream)
}

fn proxied(socket: &Path, target: &str) -> anyhow::Result<()> {
    let mut stream = UnixStream::connect(socket)?;
    connect(&mut stream, target)?;
    ping(&mut stream)
}

fn relayed(relay: SocketAddr, target: &str) -> anyhow::Result<()> {
    let mut stream = TcpStream::connect(relay)?;
    stream.set_nodelay(true)?;
    connect(&mut stream, target)?;
    ping(&mut stream)
}

/// Sends `CONNECT target` and reads the proxy's answer head, which must be a 200.
fn connect<S: Read + Write>(stream: &mut S, target: &str) -> anyhow::Result<()> {
    write!(
        stream,
        "CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n"
    )?;
    let mut reader = BufReader::new(stream);
    let mut status = String::new();
    reader.read_line(&mut status)?;
    ensure!(
        status.starts_with("HTTP/1.1 200"),
        "the proxy said {status:?}"
    );
    loop {
        let mut line = String::new();
        reader.read_line(&mut line)?;
        if line == "\r\n" || line.is_empty() {
            break;
        }
    }
    ensure!(reader.buffer().is_empty(), "bytes after the proxy's answer");
    Ok(())
}

fn ping<S: Read + Write>(stream: &mut S) -> anyhow::Result<()> {
    stream.write_all(b"p")?;
    let mut byte = [0u8; 1];
    stream.read_exact(&mut byte)?;
    ensure!(&byte == b"p", "the echo answered {byte:?}");
    Ok(())
}

/// Times `n` calls of `once`, one after another.
fn measure(
    n: usize,
    mut once: impl FnMut() -> anyhow::Result<()>,
) -> anyhow::Result<Vec<Duration>> {
    let mut times = Vec::with_capacity(n);
    for _ in 0..n {
        let started = Instant::now();
        once()?;
        times.push(started.elapsed());
    }
    Ok(times)
}
