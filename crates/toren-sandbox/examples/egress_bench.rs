//! What the egress proxy adds to a connection (issue 18), on loopback: a new connection plus
//! one round trip to an echo server, directly and through the path a sandbox with a host
//! list takes (TCP to the in-sandbox relay, `toren_exec::forward`, then the proxy's unix
//! socket, `CONNECT`, the proxy's resolution, address check and upstream connection), and
//! the round trip of one message over an open tunnel against an open direct connection.
//! Prints figures; asserts nothing about them.
//!
//! `cargo run --release -p toren-sandbox --example egress_bench [-- --quick]`
//!
//! The origin is on 127.0.0.1, which the proxy refuses; the bench puts exactly its address
//! in `ProxyConfig::permit`, the test-only exemption (the binary never sets it).

#![expect(clippy::print_stdout, reason = "a benchmark prints its figures")]

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use toren_egress::{DenyAll, Proxy, ProxyConfig};
use toren_protocol::{EgressPolicy, HostPattern};
use toren_sandbox::egress::{LogRecorder, MappedResolver};

fn main() -> anyhow::Result<()> {
    let quick = std::env::args().any(|a| a == "--quick");
    let (connections, messages) = if quick { (200, 500) } else { (3000, 20000) };
    let runtime = tokio::runtime::Builder::new_multi_thread()
        .worker_threads(2)
        .enable_all()
        .build()?;
    let origin = echo_server()?;
    let dir = tempfile::tempdir()?;
    let socket = dir.path().join("proxy.sock");
    let stop = CancellationToken::new();
    {
        let _entered = runtime.enter();
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
        let token = stop.clone();
        runtime.spawn(async move { proxy.serve_unix(listener, token).await });
    }
    let relay = TcpListener::bind("127.0.0.1:0")?;
    let relay_addr = relay.local_addr()?;
    let target = socket.clone();
    std::thread::spawn(move || toren_exec::forward(&relay, &target));

    let target = format!("origin.test:{}", origin.port());
    // Warm up every path once.
    direct(origin)?;
    proxied(&socket, &target)?;
    relayed(relay_addr, &target)?;

    println!(
        "egress proxy latency on loopback ({connections} connections, {messages} messages per path)"
    );
    println!("{:<46} {:>9} {:>9} {:>9}", "", "p50 µs", "p90 µs", "p99 µs");
    let direct_new = measure(connections, || direct(origin))?;
    row("new connection + 1 round trip, direct", &direct_new);
    let proxy_new = measure(connections, || proxied(&socket, &target))?;
    row("… through the proxy's socket (CONNECT)", &proxy_new);
    let relay_new = measure(connections, || relayed(relay_addr, &target))?;
    row("… through relay + proxy (the sandbox's path)", &relay_new);
    let mut stream = TcpStream::connect(origin)?;
    stream.set_nodelay(true)?;
    let direct_rtt = measure(messages, || ping(&mut stream))?;
    row("1 round trip on an open connection, direct", &direct_rtt);
    let mut tunnel = TcpStream::connect(relay_addr)?;
    tunnel.set_nodelay(true)?;
    connect(&mut tunnel, &target)?;
    let tunnel_rtt = measure(messages, || ping(&mut tunnel))?;
    row("… over an open tunnel (relay + proxy)", &tunnel_rtt);
    println!(
        "added by the proxy path: {} µs per new connection, {} µs per round trip (p50)",
        micros(relay_new[relay_new.len() / 2].saturating_sub(direct_new[direct_new.len() / 2])),
        micros(tunnel_rtt[tunnel_rtt.len() / 2].saturating_sub(direct_rtt[direct_rtt.len() / 2])),
    );
    stop.cancel();
    Ok(())
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
    anyhow::ensure!(
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
    anyhow::ensure!(reader.buffer().is_empty(), "bytes after the proxy's answer");
    Ok(())
}

fn ping<S: Read + Write>(stream: &mut S) -> anyhow::Result<()> {
    stream.write_all(b"p")?;
    let mut byte = [0u8; 1];
    stream.read_exact(&mut byte)?;
    anyhow::ensure!(&byte == b"p", "echo answered {byte:?}");
    Ok(())
}

/// Times `n` runs of `once`, sorted.
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
    times.sort();
    Ok(times)
}

fn row(label: &str, sorted: &[Duration]) {
    let at = |q: f64| {
        let index = ((sorted.len() as f64 * q) as usize).min(sorted.len() - 1);
        micros(sorted[index])
    };
    println!("{label:<46} {:>9} {:>9} {:>9}", at(0.5), at(0.9), at(0.99));
}

fn micros(d: Duration) -> String {
    format!("{:.0}", d.as_secs_f64() * 1e6)
}
