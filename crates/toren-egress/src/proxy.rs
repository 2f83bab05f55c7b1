//! The proxy itself: accepts connections on a unix socket or TCP listener, serves each
//! with hyper's HTTP/1.1 server, and for every request decides (policy → ask → resolve →
//! address check), records the [`Decision`], and tunnels (`CONNECT`) or forwards
//! (absolute-form HTTP) to exactly the address it checked.

use std::collections::HashMap;
use std::convert::Infallible;
use std::net::{IpAddr, SocketAddr};
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full, combinators::BoxBody};
use hyper::body::Incoming;
use hyper::header::{HOST, HeaderValue};
use hyper::{Method, Request, Response, StatusCode, Uri};
use hyper_util::rt::{TokioIo, TokioTimer};
use tokio::io::{AsyncRead, AsyncWrite, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream, UnixListener};
use tokio::sync::{OwnedSemaphorePermit, Semaphore};
use tokio_util::sync::CancellationToken;
use toren_protocol::{EgressPolicy, HostVerdict};

use crate::address::forbidden_reason;
use crate::counted::Counted;
use crate::intercept::{self, Interception};
use crate::{Answer, Approver, AskRequest, Decision, Error, Outcome, Recorder, Refusal, Resolver};

type Body = BoxBody<Bytes, hyper::Error>;

/// At most this many connections from the sandbox are open at once per proxy (one run),
/// tunnels included; one more is answered 503 and closed. Each costs the host a socket on
/// each side, and the proxy runs in a process that may drive other runs.
pub const MAX_CONNECTIONS: usize = 256;

/// What one proxy (one run) is built from.
pub struct ProxyConfig {
    pub policy: EgressPolicy,
    pub resolver: Arc<dyn Resolver>,
    pub approver: Arc<dyn Approver>,
    pub recorder: Arc<dyn Recorder>,
    /// Exact socket addresses exempt from the address refusal. Tests only: they put their
    /// loopback origin server here so a test name can reach it; the binary never sets it,
    /// and any other loopback or private address stays refused.
    pub permit: Vec<SocketAddr>,
}

/// A running proxy's shared state; cheap to clone.
#[derive(Clone)]
pub struct Proxy {
    inner: Arc<Inner>,
}

struct Inner {
    config: ProxyConfig,
    /// Answers already given on `ask` (allow or deny), by host (never held across an
    /// await).
    answers: Mutex<HashMap<String, bool>>,
    /// TLS termination for the hosts that get a secret (`intercept`); `None`: none.
    interception: Option<Arc<Interception>>,
    /// One permit per open connection from the sandbox ([`MAX_CONNECTIONS`]).
    connections: Arc<Semaphore>,
}

impl Proxy {
    pub fn new(config: ProxyConfig) -> Self {
        Self::with_interception(config, None)
    }

    /// A proxy that also injects the policy's secrets through `interception` (see
    /// `intercept`). A `CONNECT` to a host some secret is for is refused when
    /// `interception` does not cover it: the proxy never lets such a request out without
    /// its secret, nor tunnels it blind.
    pub fn with_interception(config: ProxyConfig, interception: Option<Interception>) -> Self {
        Self {
            inner: Arc::new(Inner {
                config,
                answers: Mutex::new(HashMap::new()),
                interception: interception.map(Arc::new),
                connections: Arc::new(Semaphore::new(MAX_CONNECTIONS)),
            }),
        }
    }

    /// Serves connections from `listener` until `shutdown` is cancelled.
    pub async fn serve_unix(
        &self,
        listener: UnixListener,
        shutdown: CancellationToken,
    ) -> Result<(), Error> {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                accepted = listener.accept() => {
                    let (stream, _) = accepted.map_err(Error::Accept)?;
                    self.spawn_connection(stream, shutdown.clone());
                }
            }
        }
    }

    /// Serves connections from `listener` (loopback) until `shutdown` is cancelled.
    pub async fn serve_tcp(
        &self,
        listener: TcpListener,
        shutdown: CancellationToken,
    ) -> Result<(), Error> {
        loop {
            tokio::select! {
                () = shutdown.cancelled() => return Ok(()),
                accepted = listener.accept() => {
                    let (stream, _) = accepted.map_err(Error::Accept)?;
                    self.spawn_connection(stream, shutdown.clone());
                }
            }
        }
    }

    fn spawn_connection<S>(&self, stream: S, shutdown: CancellationToken)
    where
        S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
    {
        let Ok(permit) = Arc::clone(&self.inner.connections).try_acquire_owned() else {
            tokio::spawn(async move {
                let mut stream = stream;
                let body = "toren egress: too many open connections for this run\n";
                let answer = format!(
                    "HTTP/1.1 503 Service Unavailable\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = stream.write_all(answer.as_bytes()).await;
                let _ = stream.shutdown().await;
            });
            return;
        };
        // The permit lives with the stream, so a tunnel (which takes the stream over
        // after the upgrade) keeps holding it until it ends.
        let stream = Held {
            stream,
            _permit: permit,
        };
        let proxy = self.clone();
        tokio::spawn(async move {
            let token = shutdown.clone();
            let service = hyper::service::service_fn(move |request| {
                let proxy = proxy.clone();
                let token = token.clone();
                async move { Ok::<_, Infallible>(proxy.handle(request, token).await) }
            });
            // The timer gives hyper's header read timeout (30 s) effect: a client that
            // trickles a request head in does not hold its connection for ever.
            let connection = hyper::server::conn::http1::Builder::new()
                .timer(TokioTimer::new())
                .serve_connection(TokioIo::new(stream), service)
                .with_upgrades();
            tokio::select! {
                () = shutdown.cancelled() => {}
                result = connection => {
                    if let Err(error) = result {
                        tracing::debug!(%error, "egress proxy connection ended");
                    }
                }
            }
        });
    }

    async fn handle(
        &self,
        request: Request<Incoming>,
        shutdown: CancellationToken,
    ) -> Response<Body> {
        let method = request.method().to_string();
        let target = match target(&request) {
            Ok(target) => target,
            Err(why) => return refused(Refusal::BadRequest(why)),
        };
        let (host, port) = target;
        // A host some secret is for: TLS is terminated here, or the request refused.
        let intercepted =
            request.method() == Method::CONNECT && self.inner.config.policy.intercepts(&host);
        let interception = (self.inner.interception.as_ref())
            .filter(|i| intercepted && i.covers(&host))
            .map(|i| (Arc::clone(i), host.clone()));
        let outcome = self.admit(&host, port).await;
        let (stream, outcome) = match outcome {
            Ok((stream, address, approved)) => {
                (Some(stream), Outcome::Allowed { address, approved })
            }
            Err(refusal) => (None, Outcome::Refused(refusal)),
        };
        let decision = Decision {
            host,
            port,
            method,
            outcome: outcome.clone(),
        };
        let recorder = Arc::clone(&self.inner.config.recorder);
        recorder.record(decision.clone());
        // The upstream side counts what it carries and reports once it is dropped.
        let stream = stream.map(|stream| Counted::new(stream, recorder, decision));
        match (stream, outcome) {
            (Some(stream), _) if intercepted => match interception {
                Some((interception, host)) => {
                    intercept::tunnel(request, stream, host, port, interception, shutdown)
                }
                None => refused(Refusal::Unreachable(
                    "this host gets a secret, and the proxy was given no value for it".to_owned(),
                )),
            },
            (Some(stream), _) if request.method() == Method::CONNECT => {
                tunnel(request, stream, shutdown)
            }
            (Some(stream), _) => forward(request, stream).await,
            (None, Outcome::Refused(refusal)) => refused(refusal),
            (None, Outcome::Allowed { .. }) => {
                refused(Refusal::Unreachable("no stream".to_owned()))
            }
        }
    }

    /// Policy, then ask, then resolution and the address check, then the connection.
    async fn admit(&self, host: &str, port: u16) -> Result<(TcpStream, SocketAddr, bool), Refusal> {
        let config = &self.inner.config;
        let literal = host.parse::<IpAddr>().ok();
        let approved = match (literal, config.policy.decide(host)) {
            // Patterns never name an IP; a literal is judged by its address below only
            // when the policy asks.
            (None, HostVerdict::Allow) => false,
            (_, HostVerdict::Deny) | (Some(_), HostVerdict::Allow) => {
                return Err(Refusal::NotListed);
            }
            (_, HostVerdict::Ask) => {
                if let Some(literal) = literal
                    && let Some(reason) = forbidden_reason(literal)
                {
                    return Err(Refusal::ForbiddenAddress {
                        address: SocketAddr::new(literal, port),
                        reason: reason.to_owned(),
                    });
                }
                match self.ask(host, port).await {
                    Answer::Allow => true,
                    Answer::Deny => return Err(Refusal::DeniedOnAsk),
                    Answer::Unanswered(why) => return Err(Refusal::Unanswered(why)),
                }
            }
        };
        let addresses = match literal {
            Some(ip) => vec![SocketAddr::new(ip, port)],
            None => config
                .resolver
                .resolve(host, port)
                .await
                .map_err(|error| Refusal::Unresolved(error.to_string()))?,
        };
        if addresses.is_empty() {
            return Err(Refusal::Unresolved("no addresses".to_owned()));
        }
        // Every address must pass, so a name cannot smuggle a private address among
        // public ones; the connection goes to a checked address, never re-resolved.
        for address in &addresses {
            if config.permit.contains(address) {
                continue;
            }
            if let Some(reason) = forbidden_reason(address.ip()) {
                return Err(Refusal::ForbiddenAddress {
                    address: *address,
                    reason: reason.to_owned(),
                });
            }
        }
        let mut last = String::new();
        for address in addresses {
            match TcpStream::connect(address).await {
                Ok(stream) => return Ok((stream, address, approved)),
                Err(error) => last = format!("{address}: {error}"),
            }
        }
        Err(Refusal::Unreachable(last))
    }

    /// The remembered answer for `host`, or the approver's (the lock is not held across
    /// it). An unanswered ask is not remembered: the next connection asks again.
    async fn ask(&self, host: &str, port: u16) -> Answer {
        let known = self
            .inner
            .answers
            .lock()
            .map(|answers| answers.get(host).copied())
            .unwrap_or(None);
        if let Some(answer) = known {
            return if answer { Answer::Allow } else { Answer::Deny };
        }
        let answer = self
            .inner
            .config
            .approver
            .answer(AskRequest {
                host: host.to_owned(),
                port,
            })
            .await;
        let given = match answer {
            Answer::Allow => true,
            Answer::Deny => false,
            Answer::Unanswered(_) => return answer,
        };
        // First answer wins when two connections asked at once.
        let kept = match self.inner.answers.lock() {
            Ok(mut answers) => *answers.entry(host.to_owned()).or_insert(given),
            Err(_) => given,
        };
        if kept { Answer::Allow } else { Answer::Deny }
    }
}

/// The host (lower-cased, unbracketed) and port a request is for.
fn target(request: &Request<Incoming>) -> Result<(String, u16), String> {
    let uri = request.uri();
    let authority = uri.authority().ok_or_else(|| {
        "a proxy request names its target: `CONNECT host:port` or `GET http://host/…`".to_owned()
    })?;
    let host = authority
        .host()
        .trim_start_matches('[')
        .trim_end_matches(']')
        .trim_end_matches('.')
        .to_ascii_lowercase();
    if request.method() == Method::CONNECT {
        let port = authority
            .port_u16()
            .ok_or_else(|| "CONNECT needs host:port".to_owned())?;
        return Ok((host, port));
    }
    if uri.scheme_str() != Some("http") {
        return Err("only http:// is forwarded; use CONNECT for https".to_owned());
    }
    // Every `Host` header, not only the first: the request is sent on with one `Host`,
    // the URI's, and one that named two hosts is not judged on either alone.
    let agrees = request.headers().get_all(HOST).iter().all(|header| {
        header
            .to_str()
            .is_ok_and(|value| value.eq_ignore_ascii_case(authority.as_str()))
    });
    if !agrees {
        return Err("a Host header does not match the request's URI".to_owned());
    }
    Ok((host, authority.port_u16().unwrap_or(80)))
}

/// Answers 200 and, once the client's connection is upgraded, copies bytes both ways.
/// The tunnel ends with the proxy (`shutdown`): a finished run leaves no open connection.
fn tunnel<S>(
    request: Request<Incoming>,
    mut upstream: S,
    shutdown: CancellationToken,
) -> Response<Body>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        match hyper::upgrade::on(request).await {
            Ok(upgraded) => {
                let mut client = TokioIo::new(upgraded);
                tokio::select! {
                    () = shutdown.cancelled() => {}
                    copied = tokio::io::copy_bidirectional(&mut client, &mut upstream) => {
                        if let Err(error) = copied {
                            tracing::debug!(%error, "egress tunnel ended");
                        }
                    }
                }
            }
            Err(error) => tracing::debug!(%error, "egress CONNECT upgrade failed"),
        }
    });
    text(StatusCode::OK, "")
}

/// Sends the request on in origin form over `upstream` and relays the response.
async fn forward<S>(mut request: Request<Incoming>, upstream: S) -> Response<Body>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let origin_form = request
        .uri()
        .path_and_query()
        .map_or("/", |path| path.as_str())
        .to_owned();
    let authority = request.uri().authority().map(|a| a.as_str().to_owned());
    match origin_form.parse::<Uri>() {
        Ok(uri) => *request.uri_mut() = uri,
        Err(_) => return refused(Refusal::BadRequest("a malformed path".to_owned())),
    }
    let headers = request.headers_mut();
    for name in [
        "proxy-authorization",
        "proxy-connection",
        "proxy-authenticate",
    ] {
        headers.remove(name);
    }
    if let Some(authority) = authority
        && let Ok(value) = HeaderValue::from_str(&authority)
    {
        headers.insert(HOST, value);
    }
    let (mut sender, connection) =
        match hyper::client::conn::http1::handshake(TokioIo::new(upstream)).await {
            Ok(pair) => pair,
            Err(error) => return refused(Refusal::Unreachable(error.to_string())),
        };
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "egress upstream connection ended");
        }
    });
    match sender.send_request(request).await {
        Ok(response) => response.map(BodyExt::boxed),
        Err(error) => refused(Refusal::Unreachable(error.to_string())),
    }
}

fn refused(refusal: Refusal) -> Response<Body> {
    let status = StatusCode::from_u16(refusal.status()).unwrap_or(StatusCode::FORBIDDEN);
    text(status, &format!("toren egress: {}\n", refusal.message()))
}

fn text(status: StatusCode, body: &str) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(body.to_owned()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response
}

/// A connection from the sandbox with its [`MAX_CONNECTIONS`] permit.
struct Held<S> {
    stream: S,
    _permit: OwnedSemaphorePermit,
}

impl<S: AsyncRead + Unpin> AsyncRead for Held<S> {
    fn poll_read(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &mut tokio::io::ReadBuf<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_read(cx, buf)
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for Held<S> {
    fn poll_write(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
        buf: &[u8],
    ) -> std::task::Poll<std::io::Result<usize>> {
        std::pin::Pin::new(&mut self.stream).poll_write(cx, buf)
    }

    fn poll_flush(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_flush(cx)
    }

    fn poll_shutdown(
        mut self: std::pin::Pin<&mut Self>,
        cx: &mut std::task::Context<'_>,
    ) -> std::task::Poll<std::io::Result<()>> {
        std::pin::Pin::new(&mut self.stream).poll_shutdown(cx)
    }
}
