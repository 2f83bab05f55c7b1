//! A proxy on a loopback port with a test resolver, a recorder and a scripted approver,
//! and an origin server that plays the allowed host.
//!
//! How the test reaches loopback: the resolver maps `*.test` names to the origin's
//! loopback address, and that exact address (ip and port) is put in
//! `ProxyConfig::permit`. Every other loopback address, including the origin's IP on
//! another port, stays refused, as does everything the system resolver returns.

use std::collections::HashMap;
use std::io;
use std::net::SocketAddr;
use std::sync::{Arc, Mutex};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::{mpsc, oneshot};
use tokio_util::sync::CancellationToken;
use toren_egress::{Approver, AskRequest, Decision, Proxy, ProxyConfig, Recorder, Resolver};
use toren_protocol::{EgressPolicy, HostPattern};

pub(crate) struct MapResolver(pub(crate) HashMap<String, Vec<SocketAddr>>);

#[async_trait::async_trait]
impl Resolver for MapResolver {
    async fn resolve(&self, host: &str, _port: u16) -> io::Result<Vec<SocketAddr>> {
        match self.0.get(host) {
            Some(addresses) => Ok(addresses.clone()),
            // Names the test did not map go to the real resolver (e.g. `localhost`).
            None => toren_egress::SystemResolver.resolve(host, _port).await,
        }
    }
}

#[derive(Default)]
pub(crate) struct Log(pub(crate) Mutex<Vec<Decision>>);

impl Recorder for Log {
    fn record(&self, decision: Decision) {
        self.0.lock().unwrap().push(decision);
    }
}

/// Hands each ask to the test, which answers through the oneshot.
pub(crate) struct Asker(pub(crate) mpsc::UnboundedSender<(AskRequest, oneshot::Sender<bool>)>);

#[async_trait::async_trait]
impl Approver for Asker {
    async fn approve(&self, request: AskRequest) -> bool {
        let (tx, rx) = oneshot::channel();
        if self.0.send((request, tx)).is_err() {
            return false;
        }
        rx.await.unwrap_or(false)
    }
}

/// An origin that answers every request with `hello from origin`, and reports each
/// request head it saw.
pub(crate) async fn origin() -> (SocketAddr, mpsc::UnboundedReceiver<String>) {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            let tx = tx.clone();
            tokio::spawn(async move {
                let head = read_head(&mut stream).await;
                let _ = tx.send(head);
                let body = "hello from origin";
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(reply.as_bytes()).await;
            });
        }
    });
    (address, rx)
}

pub(crate) async fn read_head<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> String {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte).await {
            Ok(0) | Err(_) => break,
            Ok(_) => head.push(byte[0]),
        }
    }
    String::from_utf8_lossy(&head).into_owned()
}

pub(crate) async fn read_all<S: tokio::io::AsyncRead + Unpin>(stream: &mut S) -> String {
    let mut out = Vec::new();
    let _ = stream.read_to_end(&mut out).await;
    String::from_utf8_lossy(&out).into_owned()
}

pub(crate) struct Harness {
    pub(crate) proxy: SocketAddr,
    pub(crate) origin: SocketAddr,
    pub(crate) seen: mpsc::UnboundedReceiver<String>,
    pub(crate) log: Arc<Log>,
    pub(crate) asks: mpsc::UnboundedReceiver<(AskRequest, oneshot::Sender<bool>)>,
    pub(crate) handle: Proxy,
    _shutdown: tokio_util::sync::DropGuard,
}

pub(crate) fn policy(allow: &[&str], ask: bool) -> EgressPolicy {
    EgressPolicy {
        allow: allow
            .iter()
            .map(|h| HostPattern::parse(h).unwrap())
            .collect(),
        ask,
        secrets: Vec::new(),
    }
}

/// A proxy for `policy`; `allowed.test`, `other.test` and `api.github.test` resolve to
/// the origin (permitted), `sneaky.test` to the origin's IP on port 9 (not permitted).
pub(crate) async fn harness(policy: EgressPolicy) -> Harness {
    let (origin, seen) = origin().await;
    let mut names = HashMap::new();
    for name in ["allowed.test", "other.test", "api.github.test"] {
        names.insert(name.to_owned(), vec![origin]);
    }
    names.insert(
        "sneaky.test".to_owned(),
        vec![SocketAddr::new(origin.ip(), 9)],
    );
    let log = Arc::new(Log::default());
    let (ask_tx, asks) = mpsc::unbounded_channel();
    let handle = Proxy::new(ProxyConfig {
        policy,
        resolver: Arc::new(MapResolver(names)),
        approver: Arc::new(Asker(ask_tx)),
        recorder: log.clone(),
        permit: vec![origin],
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let proxy = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let serving = handle.clone();
    let token = shutdown.clone();
    tokio::spawn(async move { serving.serve_tcp(listener, token).await });
    Harness {
        proxy,
        origin,
        seen,
        log,
        asks,
        handle,
        _shutdown: shutdown.drop_guard(),
    }
}

/// Sends `CONNECT target` and returns the stream and the response head.
pub(crate) async fn connect(proxy: SocketAddr, target: &str) -> (TcpStream, String) {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    let request = format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n");
    stream.write_all(request.as_bytes()).await.unwrap();
    let head = read_head(&mut stream).await;
    (stream, head)
}
