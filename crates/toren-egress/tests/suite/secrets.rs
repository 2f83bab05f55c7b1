//! Secret injection through the proxy, with real TLS on loopback: a TLS origin (its own
//! test CA, trusted by the proxy through `UpstreamTrust::Only`) plays `api.test`; a client
//! that trusts only the run's CA reaches it through `CONNECT`. The origin sees the secret's
//! header (the client's forged one replaced); the client never sees the value; a host
//! without a secret stays a blind tunnel (the client must trust the origin's own CA there);
//! a request naming another host in the intercepted tunnel is refused.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::Arc;

use rcgen::{BasicConstraints, CertificateParams, CertifiedIssuer, IsCa, KeyPair};
use rustls::pki_types::pem::PemObject;
use rustls::pki_types::{CertificateDer, PrivateKeyDer, PrivatePkcs8KeyDer, ServerName};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::mpsc;
use tokio_rustls::{TlsAcceptor, TlsConnector};
use tokio_util::sync::CancellationToken;
use toren_egress::{
    Decision, DenyAll, Error, Interception, Proxy, ProxyConfig, Recorder, UpstreamTrust,
};
use toren_protocol::{EgressPolicy, HostPattern, SecretRule};

use super::support::{MapResolver, read_head};

const VALUE: &str = "ghp_injected-value-0123456789";

struct Quiet;

impl Recorder for Quiet {
    fn record(&self, _decision: Decision) {}
}

fn provider() -> Arc<rustls::crypto::CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

/// A CA of the test's own and a TLS origin for `names` signed by it, answering every
/// request with `hello over tls` and reporting each request head it saw.
async fn tls_origin(names: &[&str]) -> (SocketAddr, String, mpsc::UnboundedReceiver<String>) {
    let mut ca_params = CertificateParams::new(Vec::<String>::new()).unwrap();
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    let ca = CertifiedIssuer::self_signed(ca_params, KeyPair::generate().unwrap()).unwrap();
    let key = KeyPair::generate().unwrap();
    let leaf = CertificateParams::new(names.iter().map(|n| (*n).to_owned()).collect::<Vec<_>>())
        .unwrap()
        .signed_by(&key, &ca)
        .unwrap();
    let config = rustls::ServerConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_no_client_auth()
        .with_single_cert(
            vec![leaf.der().clone()],
            PrivateKeyDer::Pkcs8(PrivatePkcs8KeyDer::from(key.serialize_der())),
        )
        .unwrap();
    let acceptor = TlsAcceptor::from(Arc::new(config));
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let (tx, rx) = mpsc::unbounded_channel();
    tokio::spawn(async move {
        while let Ok((stream, _)) = listener.accept().await {
            let (acceptor, tx) = (acceptor.clone(), tx.clone());
            tokio::spawn(async move {
                let Ok(mut tls) = acceptor.accept(stream).await else {
                    return;
                };
                let head = read_head(&mut tls).await;
                let _ = tx.send(head);
                let body = "hello over tls";
                let reply = format!(
                    "HTTP/1.1 200 OK\r\ncontent-length: {}\r\nconnection: close\r\n\r\n{body}",
                    body.len()
                );
                let _ = tls.write_all(reply.as_bytes()).await;
                let _ = tls.shutdown().await;
            });
        }
    });
    (address, ca.pem(), rx)
}

fn policy() -> EgressPolicy {
    let host = |h: &str| HostPattern::parse(h).unwrap();
    EgressPolicy {
        allow: vec![host("api.test"), host("plain.test")],
        ask: false,
        secrets: vec![SecretRule {
            name: "TOKEN".to_owned(),
            hosts: vec![host("api.test")],
            header: "Authorization".to_owned(),
            template: "Bearer ${value}".to_owned(),
        }],
    }
}

/// The proxy on loopback, the names mapped to the origin (its address permitted); the
/// run CA's certificate (all that leaves the proxy) and the stop token.
async fn proxy(origin: SocketAddr, origin_ca: &str) -> (SocketAddr, String, CancellationToken) {
    let names: HashMap<String, Vec<SocketAddr>> = ["api.test", "plain.test"]
        .iter()
        .map(|n| ((*n).to_owned(), vec![origin]))
        .collect();
    let trust = UpstreamTrust::Only(origin_ca.as_bytes().to_vec());
    let values = vec![("TOKEN".to_owned(), VALUE.to_owned())];
    let interception = Interception::new(&policy(), &values, &trust)
        .unwrap()
        .unwrap();
    let ca_pem = interception.ca().cert_pem();
    assert!(!format!("{interception:?}").contains(VALUE));
    let proxy = Proxy::with_interception(
        ProxyConfig {
            policy: policy(),
            resolver: Arc::new(MapResolver(names)),
            approver: Arc::new(DenyAll),
            recorder: Arc::new(Quiet),
            permit: vec![origin],
        },
        Some(interception),
    );
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move { proxy.serve_tcp(listener, token).await });
    (address, ca_pem, stop)
}

/// `CONNECT host:443` through the proxy, then TLS trusting only `ca_pem`, then one
/// request with `headers`; the whole answer (or the TLS error).
async fn get(proxy: SocketAddr, host: &str, ca_pem: &str, headers: &str) -> Result<String, String> {
    send(proxy, host, ca_pem, "GET /user", headers).await
}

/// As [`get`], with the request line's method and target given (`TRACE /`).
async fn send(
    proxy: SocketAddr,
    host: &str,
    ca_pem: &str,
    line: &str,
    headers: &str,
) -> Result<String, String> {
    let mut roots = rustls::RootCertStore::empty();
    for cert in CertificateDer::pem_slice_iter(ca_pem.as_bytes()) {
        roots.add(cert.unwrap()).unwrap();
    }
    let config = rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .with_root_certificates(roots)
        .with_no_client_auth();
    exchange(proxy, host, config, host, line, headers).await
}

/// `CONNECT host:443`, then TLS with `config` asking for `server_name` (the SNI), then
/// one request: `line`, `headers` and `connection: close`; the whole answer.
async fn exchange(
    proxy: SocketAddr,
    host: &str,
    config: rustls::ClientConfig,
    server_name: &str,
    line: &str,
    headers: &str,
) -> Result<String, String> {
    let mut stream = TcpStream::connect(proxy).await.unwrap();
    stream
        .write_all(format!("CONNECT {host}:443 HTTP/1.1\r\nHost: {host}:443\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let head = read_head(&mut stream).await;
    if !head.starts_with("HTTP/1.1 200") {
        return Err(head);
    }
    let name = ServerName::try_from(server_name.to_owned()).unwrap();
    let mut tls = TlsConnector::from(Arc::new(config))
        .connect(name, stream)
        .await
        .map_err(|e| e.to_string())?;
    tls.write_all(format!("{line} HTTP/1.1\r\n{headers}connection: close\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut out = Vec::new();
    let _ = tls.read_to_end(&mut out).await;
    Ok(String::from_utf8_lossy(&out).into_owned())
}

#[tokio::test]
async fn a_secret_host_gets_the_header_from_the_proxy_and_the_client_never_sees_it() {
    let (origin, origin_ca, mut seen) = tls_origin(&["api.test", "plain.test"]).await;
    let (proxy, run_ca, _stop) = proxy(origin, &origin_ca).await;
    let answer = get(
        proxy,
        "api.test",
        &run_ca,
        "Host: api.test\r\nAuthorization: forged\r\nauthorization: forged-too\r\n",
    )
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    assert!(answer.ends_with("hello over tls"), "{answer}");
    assert!(!answer.contains(VALUE), "{answer}");
    let head = seen.recv().await.unwrap().to_ascii_lowercase();
    let auth: Vec<&str> = head
        .lines()
        .filter(|line| line.starts_with("authorization:"))
        .collect();
    assert_eq!(
        auth,
        vec![format!("authorization: bearer {}", VALUE.to_ascii_lowercase()).as_str()],
        "{head}"
    );
    assert!(head.starts_with("get /user http/1.1"), "{head}");
}

#[tokio::test]
async fn other_hosts_stay_blind_tunnels_and_the_run_ca_is_not_offered_for_them() {
    let (origin, origin_ca, mut seen) = tls_origin(&["api.test", "plain.test"]).await;
    let (proxy, run_ca, _stop) = proxy(origin, &origin_ca).await;
    // Through the tunnel the client talks to the origin itself: the run's CA does not
    // vouch for it, the origin's does, and no header is added.
    let refused = get(proxy, "plain.test", &run_ca, "Host: plain.test\r\n").await;
    assert!(refused.is_err(), "{refused:?}");
    let answer = get(proxy, "plain.test", &origin_ca, "Host: plain.test\r\n")
        .await
        .unwrap();
    assert!(answer.ends_with("hello over tls"), "{answer}");
    let head = seen.recv().await.unwrap();
    assert!(
        !head.to_ascii_lowercase().contains("authorization"),
        "{head}"
    );
}

#[tokio::test]
async fn an_intercepted_tunnel_carries_requests_for_its_own_host_only() {
    let (origin, origin_ca, mut seen) = tls_origin(&["api.test"]).await;
    let (proxy, run_ca, _stop) = proxy(origin, &origin_ca).await;
    let answer = get(proxy, "api.test", &run_ca, "Host: plain.test\r\n")
        .await
        .unwrap();
    assert!(answer.starts_with("HTTP/1.1 421"), "{answer}");
    assert!(seen.try_recv().is_err(), "nothing reached the origin");
}

#[tokio::test]
async fn trace_and_connect_inside_an_intercepted_tunnel_are_refused_so_no_host_echoes_the_secret() {
    // TRACE makes a server echo the request, the injected header included: the proxy
    // never sends one that carries a secret.
    let (origin, origin_ca, mut seen) = tls_origin(&["api.test"]).await;
    let (proxy, run_ca, _stop) = proxy(origin, &origin_ca).await;
    for line in ["TRACE /", "trace /", "TRACK /", "CONNECT api.test:443"] {
        let answer = send(proxy, "api.test", &run_ca, line, "Host: api.test\r\n")
            .await
            .unwrap();
        assert!(answer.starts_with("HTTP/1.1 405"), "{line}: {answer}");
        assert!(!answer.contains(VALUE), "{answer}");
    }
    // The origin reports an empty head for a connection that carried no request.
    while let Ok(head) = seen.try_recv() {
        assert_eq!(head, "", "nothing reached the origin");
    }
}

#[tokio::test]
async fn a_secret_without_a_value_or_with_a_bad_one_fails_when_the_proxy_is_made() {
    let trust = UpstreamTrust::Only(Vec::new());
    assert!(matches!(
        Interception::new(&policy(), &[], &trust),
        Err(Error::MissingSecret(name)) if name == "TOKEN"
    ));
    let bad = vec![("TOKEN".to_owned(), "line\r\nX-Evil: 1".to_owned())];
    let error = Interception::new(&policy(), &bad, &trust).unwrap_err();
    assert!(matches!(&error, Error::BadSecret(name) if name == "TOKEN"));
    assert!(!error.to_string().contains("Evil"), "{error}");
}

/// The origin's heads that carried a request (a connection the proxy opened and never
/// used reports an empty one).
fn requests_seen(seen: &mut mpsc::UnboundedReceiver<String>) -> Vec<String> {
    let mut heads = Vec::new();
    while let Ok(head) = seen.try_recv() {
        if !head.is_empty() {
            heads.push(head);
        }
    }
    heads
}

#[tokio::test]
async fn a_request_naming_another_host_anywhere_in_the_tunnel_is_refused_and_gets_nothing() {
    // Both hosts are allowed and served by one origin, as by a shared front end that
    // routes on Host: a request in the tunnel to the secret's host that names the other
    // anywhere would hand the other tenant the secret.
    let (origin, origin_ca, mut seen) = tls_origin(&["api.test", "plain.test"]).await;
    let (proxy, run_ca, _stop) = proxy(origin, &origin_ca).await;
    let cases = [
        // The absolute-form URI names the secret's host, Host the other.
        ("GET https://api.test/x", "Host: plain.test\r\n"),
        ("GET https://api.test:443/x", "Host: plain.test:443\r\n"),
        // The other way round.
        ("GET https://plain.test/x", "Host: api.test\r\n"),
        ("GET https://plain.test/x", ""),
        // Two Host headers, in either order.
        ("GET /x", "Host: api.test\r\nHost: plain.test\r\n"),
        ("GET /x", "Host: plain.test\r\nHost: api.test\r\n"),
        ("GET /x", "Host: api.test\r\nhost: api.test.evil\r\n"),
        // The secret's host on another port, or a port a front end may read otherwise.
        ("GET /x", "Host: api.test:8443\r\n"),
        ("GET /x", "Host: api.test:0443\r\n"),
        ("GET /x", "Host: api.test:\r\n"),
        ("GET https://api.test:8443/x", "Host: api.test\r\n"),
        // User info in the authority, a name with more after it.
        ("GET https://plain.test@api.test/x", "Host: api.test\r\n"),
        ("GET /x", "Host: api.test.plain.test\r\n"),
    ];
    for (line, headers) in cases {
        let answer = send(proxy, "api.test", &run_ca, line, headers)
            .await
            .unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 421"),
            "{line} / {headers:?}: {answer}"
        );
        assert!(!answer.contains(VALUE), "{answer}");
    }
    assert_eq!(requests_seen(&mut seen), Vec::<String>::new());
}

#[tokio::test]
async fn spellings_of_the_secret_host_itself_still_get_the_secret() {
    let (origin, origin_ca, mut seen) = tls_origin(&["api.test"]).await;
    let (proxy, run_ca, _stop) = proxy(origin, &origin_ca).await;
    let cases = [
        ("GET /x", "Host: API.Test\r\n"),
        ("GET /x", "Host: api.test:443\r\n"),
        ("GET /x", "Host: api.test.\r\n"),
        ("GET /x", "Host: api.test\r\nHost: API.TEST:443\r\n"),
        ("GET https://Api.Test.:443/x", "Host: api.test\r\n"),
        ("GET https://api.test/x", ""),
    ];
    for (line, headers) in cases {
        let answer = send(proxy, "api.test", &run_ca, line, headers)
            .await
            .unwrap();
        assert!(
            answer.starts_with("HTTP/1.1 200"),
            "{line} / {headers:?}: {answer}"
        );
        let head = seen.recv().await.unwrap().to_ascii_lowercase();
        assert!(
            head.contains(&format!(
                "authorization: bearer {}",
                VALUE.to_ascii_lowercase()
            )),
            "{line} / {headers:?}: {head}"
        );
    }
}

/// Accepts any certificate: a client that skipped verification (`curl -k`) and so may
/// send whatever SNI it likes through a tunnel the proxy terminates.
#[derive(Debug)]
struct AnyCertificate(Arc<rustls::crypto::CryptoProvider>);

impl rustls::client::danger::ServerCertVerifier for AnyCertificate {
    fn verify_server_cert(
        &self,
        _end_entity: &CertificateDer<'_>,
        _intermediates: &[CertificateDer<'_>],
        _server_name: &ServerName<'_>,
        _ocsp_response: &[u8],
        _now: rustls::pki_types::UnixTime,
    ) -> Result<rustls::client::danger::ServerCertVerified, rustls::Error> {
        Ok(rustls::client::danger::ServerCertVerified::assertion())
    }

    fn verify_tls12_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls12_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn verify_tls13_signature(
        &self,
        message: &[u8],
        cert: &CertificateDer<'_>,
        dss: &rustls::DigitallySignedStruct,
    ) -> Result<rustls::client::danger::HandshakeSignatureValid, rustls::Error> {
        rustls::crypto::verify_tls13_signature(
            message,
            cert,
            dss,
            &self.0.signature_verification_algorithms,
        )
    }

    fn supported_verify_schemes(&self) -> Vec<rustls::SignatureScheme> {
        self.0.signature_verification_algorithms.supported_schemes()
    }
}

fn unverified() -> rustls::ClientConfig {
    rustls::ClientConfig::builder_with_provider(provider())
        .with_safe_default_protocol_versions()
        .unwrap()
        .dangerous()
        .with_custom_certificate_verifier(Arc::new(AnyCertificate(provider())))
        .with_no_client_auth()
}

#[tokio::test]
async fn a_tls_server_name_other_than_the_connect_host_gets_nothing() {
    let (origin, origin_ca, mut seen) = tls_origin(&["api.test", "plain.test"]).await;
    let (proxy, _run_ca, _stop) = proxy(origin, &origin_ca).await;
    for host in ["Host: api.test\r\n", "Host: plain.test\r\n", ""] {
        let answer = exchange(
            proxy,
            "api.test",
            unverified(),
            "plain.test",
            "GET /x",
            host,
        )
        .await
        .unwrap();
        assert!(answer.starts_with("HTTP/1.1 421"), "{host:?}: {answer}");
        assert!(!answer.contains(VALUE), "{answer}");
    }
    assert_eq!(requests_seen(&mut seen), Vec::<String>::new());
    // The same client naming the host itself, in another case, gets it.
    let answer = exchange(
        proxy,
        "api.test",
        unverified(),
        "API.test",
        "GET /x",
        "Host: api.test\r\n",
    )
    .await
    .unwrap();
    assert!(answer.starts_with("HTTP/1.1 200"), "{answer}");
    let mut head = String::new();
    while head.is_empty() {
        head = seen.recv().await.unwrap().to_ascii_lowercase();
    }
    assert!(head.contains("authorization: bearer"), "{head}");
}
