//! Secret injection: for a `CONNECT` to a host some secret is for
//! ([`toren_protocol::EgressPolicy::intercepts`]), the proxy answers the TLS handshake
//! itself with a leaf certificate from the run's CA ([`crate::RunCa`]), reads each HTTP/1.1
//! request, replaces the secret's header with the real value (whatever the sandbox sent
//! under that name is dropped), and sends the request on over a second TLS connection to
//! the address it checked, verified as any client would ([`crate::UpstreamTrust`]). Every
//! other host stays a plain tunnel. The values live here, in the proxy's memory, and
//! nowhere the sandbox can read.
//!
//! A request inside the tunnel gets the secret only when every name it carries is the
//! `CONNECT` host: the TLS SNI the sandbox sent, an absolute-form URI's authority and every
//! `Host` header (a front end that routes on any one of them must not be able to pick
//! another tenant). A request where one of them names another host, another port, or
//! cannot be read is refused (421) and nothing is sent on: the secret goes to the host it
//! was configured for and to no other name.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use bytes::Bytes;
use http_body_util::{BodyExt, Full};
use hyper::body::Incoming;
use hyper::header::{HOST, HeaderName, HeaderValue};
use hyper::{Request, Response, StatusCode};
use hyper_util::rt::TokioIo;
use rustls::{ClientConfig, ServerConfig};
use tokio::io::{AsyncRead, AsyncWrite};
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tokio_util::sync::CancellationToken;
use toren_protocol::EgressPolicy;

use crate::{Error, RunCa, UpstreamTrust};

type Body = http_body_util::combinators::BoxBody<Bytes, hyper::Error>;

/// One header a secret adds, ready to send (the value marked sensitive).
#[derive(Clone)]
struct Header {
    name: HeaderName,
    value: HeaderValue,
}

/// What a run's proxy needs to inject secrets: the CA, the headers per host and the
/// trust for the real hosts. Built when the proxy starts; a missing value fails then.
pub struct Interception {
    ca: RunCa,
    headers: HashMap<String, Vec<Header>>,
    upstream: Arc<ClientConfig>,
    leaves: Mutex<HashMap<String, Arc<ServerConfig>>>,
}

impl std::fmt::Debug for Interception {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        // Never the values.
        f.debug_struct("Interception")
            .field("hosts", &self.headers.keys().collect::<Vec<_>>())
            .finish_non_exhaustive()
    }
}

impl Interception {
    /// The interception of `policy`'s secrets with `values` (`(name, value)`; every
    /// secret the policy names must have one). `None` when the policy injects nothing.
    pub fn new(
        policy: &EgressPolicy,
        values: &[(String, String)],
        trust: &UpstreamTrust,
    ) -> Result<Option<Self>, Error> {
        if policy.secrets.is_empty() {
            return Ok(None);
        }
        let mut headers: HashMap<String, Vec<Header>> = HashMap::new();
        for secret in &policy.secrets {
            let value = values
                .iter()
                .find(|(name, _)| *name == secret.name)
                .map(|(_, value)| value)
                .ok_or_else(|| Error::MissingSecret(secret.name.clone()))?;
            let name = HeaderName::from_bytes(secret.header.as_bytes())
                .map_err(|_| Error::BadSecret(secret.name.clone()))?;
            let mut value = HeaderValue::from_str(&secret.render(value))
                .map_err(|_| Error::BadSecret(secret.name.clone()))?;
            value.set_sensitive(true);
            for host in &secret.hosts {
                headers
                    .entry(host.as_str().to_owned())
                    .or_default()
                    .push(Header {
                        name: name.clone(),
                        value: value.clone(),
                    });
            }
        }
        let mut hosts: Vec<String> = headers.keys().cloned().collect();
        hosts.sort();
        Ok(Some(Self {
            ca: RunCa::generate(&hosts)?,
            headers,
            upstream: trust.client_config()?,
            leaves: Mutex::new(HashMap::new()),
        }))
    }

    /// The run's CA (its certificate goes into the sandbox's bundle).
    pub fn ca(&self) -> &RunCa {
        &self.ca
    }

    /// Whether `host` is intercepted.
    pub(crate) fn covers(&self, host: &str) -> bool {
        self.headers.contains_key(host)
    }

    fn leaf(&self, host: &str) -> Result<Arc<ServerConfig>, Error> {
        if let Ok(leaves) = self.leaves.lock()
            && let Some(config) = leaves.get(host)
        {
            return Ok(Arc::clone(config));
        }
        let config = self.ca.server_config(host)?;
        if let Ok(mut leaves) = self.leaves.lock() {
            leaves.insert(host.to_owned(), Arc::clone(&config));
        }
        Ok(config)
    }
}

/// Answers 200 to the `CONNECT`, then plays `host` to the client and forwards each request,
/// with the secret headers put in, to `upstream` over verified TLS.
pub(crate) fn tunnel<S>(
    request: Request<Incoming>,
    upstream: S,
    host: String,
    port: u16,
    interception: Arc<Interception>,
    shutdown: CancellationToken,
) -> Response<Body>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    tokio::spawn(async move {
        tokio::select! {
            () = shutdown.cancelled() => {}
            result = serve(request, upstream, &host, port, &interception) => {
                if let Err(why) = result {
                    tracing::debug!(%host, %why, "egress interception ended");
                }
            }
        }
    });
    plain(StatusCode::OK, "")
}

async fn serve<S>(
    request: Request<Incoming>,
    upstream: S,
    host: &str,
    port: u16,
    interception: &Interception,
) -> Result<(), String>
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    let upgraded = hyper::upgrade::on(request)
        .await
        .map_err(|e| format!("upgrade: {e}"))?;
    let leaf = interception.leaf(host).map_err(|e| e.to_string())?;
    let client = TlsAcceptor::from(leaf)
        .accept(TokioIo::new(upgraded))
        .await
        .map_err(|e| format!("the sandbox's TLS handshake: {e}"))?;
    // The name the sandbox asked the TLS layer for: a client that skips verification
    // could send another, and a request on this connection must not get the secret then.
    let sni = client.get_ref().1.server_name().map(str::to_owned);
    let name = rustls::pki_types::ServerName::try_from(host.to_owned())
        .map_err(|e| format!("server name: {e}"))?;
    let server = TlsConnector::from(Arc::clone(&interception.upstream))
        .connect(name, upstream)
        .await
        .map_err(|e| format!("the host's TLS handshake: {e}"))?;
    let (sender, connection) = hyper::client::conn::http1::handshake(TokioIo::new(server))
        .await
        .map_err(|e| format!("upstream HTTP: {e}"))?;
    tokio::spawn(async move {
        if let Err(error) = connection.await {
            tracing::debug!(%error, "egress upstream connection ended");
        }
    });
    let sender = Arc::new(tokio::sync::Mutex::new(sender));
    let headers = interception.headers.get(host).cloned().unwrap_or_default();
    let host = host.to_owned();
    let service = hyper::service::service_fn(move |request: Request<Incoming>| {
        let sender = Arc::clone(&sender);
        let headers = headers.clone();
        let host = host.clone();
        let sni = sni.clone();
        async move {
            Ok::<_, std::convert::Infallible>(
                forward(request, &sender, &headers, &host, port, sni.as_deref()).await,
            )
        }
    });
    hyper::server::conn::http1::Builder::new()
        .serve_connection(TokioIo::new(client), service)
        .await
        .map_err(|e| format!("the sandbox's HTTP: {e}"))
}

async fn forward(
    mut request: Request<Incoming>,
    sender: &tokio::sync::Mutex<hyper::client::conn::http1::SendRequest<Incoming>>,
    headers: &[Header],
    host: &str,
    port: u16,
    sni: Option<&str>,
) -> Response<Body> {
    if !names_only(&request, host, port, sni) {
        return plain(
            StatusCode::MISDIRECTED_REQUEST,
            "toren egress: this connection is for its CONNECT host only: the TLS server \
             name, the request's URI and every Host header must all name it\n",
        );
    }
    // A method that makes a server echo the request back would hand the sandbox the
    // header the proxy just put in; and a tunnel inside the tunnel is not forwarded.
    let method = request.method().as_str();
    if ["TRACE", "TRACK", "CONNECT"]
        .iter()
        .any(|refused| method.eq_ignore_ascii_case(refused))
    {
        return plain(
            StatusCode::METHOD_NOT_ALLOWED,
            "toren egress: TRACE, TRACK and CONNECT are not sent to a host that gets a secret\n",
        );
    }
    let map = request.headers_mut();
    for header in headers {
        map.remove(&header.name);
    }
    for header in headers {
        map.append(header.name.clone(), header.value.clone());
    }
    let mut sender = sender.lock().await;
    if let Err(error) = sender.ready().await {
        return plain(
            StatusCode::BAD_GATEWAY,
            &format!("toren egress: the host closed the connection: {error}\n"),
        );
    }
    match sender.send_request(request).await {
        Ok(response) => response.map(BodyExt::boxed),
        Err(error) => plain(
            StatusCode::BAD_GATEWAY,
            &format!("toren egress: the host did not answer: {error}\n"),
        ),
    }
}

/// Whether every name `request` carries is `host` (the `CONNECT` host, lower-cased, no
/// trailing dot) on `port`: the TLS server name `sni` if the client sent one, the URI's
/// authority if the request is in absolute form, and each `Host` header. A request that
/// carries none of them (HTTP/1.0 without `Host`) is taken as meant for the tunnel's
/// host, the only one it can reach.
fn names_only(request: &Request<Incoming>, host: &str, port: u16, sni: Option<&str>) -> bool {
    if sni.is_some_and(|sni| !is_host(sni, host, None)) {
        return false;
    }
    if let Some(authority) = request.uri().authority()
        && !is_host(authority.as_str(), host, Some(port))
    {
        return false;
    }
    request.headers().get_all(HOST).iter().all(|value| {
        value
            .to_str()
            .is_ok_and(|value| is_host(value, host, Some(port)))
    })
}

/// Whether `named` (`name`, `name:port`, `[v6]:port`; any case, one trailing dot or not)
/// is `host`, on `port` when it gives one. Anything else — another name or port, user
/// info (`user@host`), an empty or non-canonical port (`:`, `:0443`, `:+443`), a port
/// where none may be (the TLS server name) — is not.
fn is_host(named: &str, host: &str, port: Option<u16>) -> bool {
    let (name, named_port) = if let Some(rest) = named.strip_prefix('[') {
        match rest.split_once(']') {
            Some((v6, "")) => (v6, None),
            Some((v6, tail)) => match tail.strip_prefix(':') {
                Some(p) => (v6, Some(p)),
                None => return false,
            },
            None => return false,
        }
    } else {
        match named.split_once(':') {
            Some((name, p)) => (name, Some(p)),
            None => (named, None),
        }
    };
    let name = name.strip_suffix('.').unwrap_or(name);
    if !name.eq_ignore_ascii_case(host) {
        return false;
    }
    match (named_port, port) {
        (None, _) => true,
        (Some(named), Some(port)) => named == port.to_string(),
        (Some(_), None) => false,
    }
}

fn plain(status: StatusCode, body: &str) -> Response<Body> {
    let mut response = Response::new(
        Full::new(Bytes::from(body.to_owned()))
            .map_err(|never| match never {})
            .boxed(),
    );
    *response.status_mut() = status;
    response
}
