//! CONNECT and absolute-form HTTP through the proxy: allowed names reach the origin,
//! others are refused before any connection, private and metadata addresses are refused
//! even when the name is allowed, and `ask` holds the connection until the approver says.

use std::net::SocketAddr;

use pretty_assertions::assert_eq;
use tokio::io::AsyncWriteExt;
use tokio::net::{TcpStream, UnixListener};
use tokio_util::sync::CancellationToken;
use toren_egress::{Decision, Outcome, Refusal};

use super::support::{connect, harness, policy, read_all, read_head};

fn status(head: &str) -> &str {
    head.split(' ').nth(1).unwrap_or("")
}

#[tokio::test]
async fn connect_to_an_allowed_name_tunnels_bytes_to_the_address_it_resolved() {
    let mut h = harness(policy(&["allowed.test"], false)).await;
    let target = format!("allowed.test:{}", h.origin.port());
    let (mut stream, head) = connect(h.proxy, &target).await;
    assert_eq!(status(&head), "200", "{head}");
    // Bytes through the tunnel are the client's own (TLS in real use; plain here).
    stream
        .write_all(b"GET /through-tunnel HTTP/1.1\r\nHost: allowed.test\r\n\r\n")
        .await
        .unwrap();
    let reply = read_all(&mut stream).await;
    assert!(reply.ends_with("hello from origin"), "{reply}");
    let seen = h.seen.recv().await.unwrap();
    assert!(
        seen.starts_with("GET /through-tunnel HTTP/1.1\r\n"),
        "{seen}"
    );
    assert_eq!(
        h.log.0.lock().unwrap().clone(),
        vec![Decision {
            host: "allowed.test".to_owned(),
            port: h.origin.port(),
            method: "CONNECT".to_owned(),
            outcome: Outcome::Allowed {
                address: h.origin,
                approved: false
            },
        }]
    );
}

#[tokio::test]
async fn absolute_form_http_is_matched_on_its_host_and_sent_on_in_origin_form() {
    let mut h = harness(policy(&["*.github.test"], false)).await;
    let port = h.origin.port();
    let mut stream = TcpStream::connect(h.proxy).await.unwrap();
    let request = format!(
        "GET http://API.github.test:{port}/repos?x=1 HTTP/1.1\r\nHost: API.github.test:{port}\r\n\
         Proxy-Authorization: Basic c2VjcmV0\r\nConnection: close\r\n\r\n"
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let reply = read_all(&mut stream).await;
    assert!(reply.starts_with("HTTP/1.1 200"), "{reply}");
    assert!(reply.ends_with("hello from origin"), "{reply}");
    let seen = h.seen.recv().await.unwrap().to_ascii_lowercase();
    assert!(seen.starts_with("get /repos?x=1 http/1.1\r\n"), "{seen}");
    assert!(
        seen.contains(&format!("host: api.github.test:{port}")),
        "{seen}"
    );
    assert!(!seen.contains("proxy-authorization"), "{seen}");
}

#[tokio::test]
async fn a_name_outside_the_list_is_refused_before_any_connection() {
    let h = harness(policy(&["allowed.test", "*.github.test"], false)).await;
    for target in [
        format!("other.test:{}", h.origin.port()),
        // `*.github.test` does not match its apex.
        format!("github.test:{}", h.origin.port()),
    ] {
        let (_, head) = connect(h.proxy, &target).await;
        assert_eq!(status(&head), "403", "{target}: {head}");
    }
    let outcomes: Vec<Outcome> = h
        .log
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|d| d.outcome.clone())
        .collect();
    assert_eq!(outcomes, vec![Outcome::Refused(Refusal::NotListed); 2]);
    // The origin saw nothing: the refusals happened before any connection.
    drop(h.handle);
    let mut seen = h.seen;
    assert!(seen.try_recv().is_err());
}

#[tokio::test]
async fn private_and_metadata_addresses_are_refused_even_for_an_allowed_name() {
    // `localhost` goes through the system resolver: loopback, refused although listed.
    // `sneaky.test` is mapped to the origin's own IP on another port, not permitted.
    let h = harness(policy(&["localhost", "sneaky.test"], true)).await;
    let cases = [
        ("localhost:80", "a loopback address"),
        ("sneaky.test:9", "a loopback address"),
        ("169.254.169.254:80", "a cloud metadata address"),
        ("[fd00:ec2::254]:80", "a cloud metadata address"),
        ("10.0.0.1:443", "a private address"),
        ("100.64.1.1:443", "a carrier-grade NAT address"),
        ("[::1]:443", "a loopback address"),
    ];
    for (target, _) in cases {
        let (_, head) = connect(h.proxy, target).await;
        assert_eq!(status(&head), "403", "{target}: {head}");
    }
    let reasons: Vec<(String, String)> = h
        .log
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|d| match &d.outcome {
            Outcome::Refused(Refusal::ForbiddenAddress { reason, .. }) => {
                (d.host.clone(), reason.clone())
            }
            other => (d.host.clone(), format!("{other:?}")),
        })
        .collect();
    let want: Vec<(String, String)> = cases
        .iter()
        .map(|(target, reason)| {
            let host = target.rsplit_once(':').unwrap().0;
            (
                host.trim_matches(['[', ']']).to_owned(),
                (*reason).to_owned(),
            )
        })
        .collect();
    assert_eq!(reasons, want);
}

#[tokio::test]
async fn ask_holds_the_connection_until_the_approver_answers_and_remembers_the_answer() {
    let mut h = harness(policy(&[], true)).await;
    let target = format!("other.test:{}", h.origin.port());
    let proxy = h.proxy;
    let pending = {
        let target = target.clone();
        tokio::spawn(async move { connect(proxy, &target).await })
    };
    let (request, answer) = h.asks.recv().await.unwrap();
    assert_eq!(
        (request.host.as_str(), request.port),
        ("other.test", h.origin.port())
    );
    assert!(
        !pending.is_finished(),
        "the connection must wait for the answer"
    );
    answer.send(true).unwrap();
    let (_, head) = pending.await.unwrap();
    assert_eq!(status(&head), "200", "{head}");
    // Asked once per host: the second connection goes straight through.
    let (_, head) = connect(h.proxy, &target).await;
    assert_eq!(status(&head), "200", "{head}");
    assert!(h.asks.try_recv().is_err(), "asked twice");
    // A denied host stays denied.
    let denied = format!("allowed.test:{}", h.origin.port());
    let pending = tokio::spawn(async move { connect(proxy, &denied).await });
    let (_, answer) = h.asks.recv().await.unwrap();
    answer.send(false).unwrap();
    let (_, head) = pending.await.unwrap();
    assert_eq!(status(&head), "403", "{head}");
    let outcomes: Vec<Outcome> = h
        .log
        .0
        .lock()
        .unwrap()
        .iter()
        .map(|d| d.outcome.clone())
        .collect();
    let allowed = Outcome::Allowed {
        address: h.origin,
        approved: true,
    };
    assert_eq!(
        outcomes,
        vec![
            allowed.clone(),
            allowed,
            Outcome::Refused(Refusal::DeniedOnAsk)
        ]
    );
}

#[tokio::test]
async fn origin_form_requests_and_https_urls_are_refused_as_bad_requests() {
    let h = harness(policy(&["allowed.test"], false)).await;
    for request in [
        "GET /x HTTP/1.1\r\nHost: allowed.test\r\n\r\n".to_owned(),
        format!(
            "GET http://allowed.test:{0}/ HTTP/1.1\r\nHost: other.test:{0}\r\n\r\n",
            h.origin.port()
        ),
        // A second Host that disagrees is judged too, not only the first.
        format!(
            "GET http://allowed.test:{0}/ HTTP/1.1\r\nHost: allowed.test:{0}\r\nHost: other.test:{0}\r\n\r\n",
            h.origin.port()
        ),
    ] {
        let mut stream = TcpStream::connect(h.proxy).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let head = read_head(&mut stream).await;
        assert_eq!(status(&head), "400", "{request}: {head}");
    }
}

#[tokio::test]
async fn the_proxy_serves_a_unix_socket_as_the_sandbox_would_reach_it() {
    let h = harness(policy(&["allowed.test"], false)).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("egress.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let shutdown = CancellationToken::new();
    let proxy = h.handle.clone();
    let token = shutdown.clone();
    let serving = tokio::spawn(async move { proxy.serve_unix(listener, token).await });
    let mut stream = tokio::net::UnixStream::connect(&path).await.unwrap();
    let target: SocketAddr = h.origin;
    let request = format!(
        "CONNECT allowed.test:{0} HTTP/1.1\r\nHost: allowed.test:{0}\r\n\r\n",
        target.port()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let head = read_head(&mut stream).await;
    assert_eq!(status(&head), "200", "{head}");
    shutdown.cancel();
    serving.await.unwrap().unwrap();
}

#[tokio::test]
async fn stopping_the_proxy_closes_its_open_tunnels() {
    let h = harness(policy(&["allowed.test"], false)).await;
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("egress.sock");
    let listener = UnixListener::bind(&path).unwrap();
    let shutdown = CancellationToken::new();
    let proxy = h.handle.clone();
    let token = shutdown.clone();
    let serving = tokio::spawn(async move { proxy.serve_unix(listener, token).await });
    let mut stream = tokio::net::UnixStream::connect(&path).await.unwrap();
    let request = format!(
        "CONNECT allowed.test:{0} HTTP/1.1\r\nHost: allowed.test:{0}\r\n\r\n",
        h.origin.port()
    );
    stream.write_all(request.as_bytes()).await.unwrap();
    let head = read_head(&mut stream).await;
    assert_eq!(status(&head), "200", "{head}");
    // The tunnel is open and idle; stopping the proxy must end it (EOF for the client).
    shutdown.cancel();
    serving.await.unwrap().unwrap();
    assert_eq!(read_all(&mut stream).await, "");
}

#[tokio::test]
async fn a_run_holds_at_most_max_connections_open_tunnels_included_and_one_more_gets_503() {
    let h = harness(policy(&["allowed.test"], false)).await;
    let target = format!("allowed.test:{}", h.origin.port());
    // Open tunnels hold their connection's place after the upgrade.
    let mut tunnels = Vec::new();
    for _ in 0..toren_egress::MAX_CONNECTIONS {
        let (stream, head) = connect(h.proxy, &target).await;
        assert_eq!(status(&head), "200", "{head}");
        tunnels.push(stream);
    }
    let (_, head) = connect(h.proxy, &target).await;
    assert_eq!(status(&head), "503", "{head}");
    // A tunnel that ends gives its place back.
    drop(tunnels.pop());
    let mut served = false;
    for _ in 0..500 {
        let (_stream, head) = connect(h.proxy, &target).await;
        if status(&head) == "200" {
            served = true;
            break;
        }
        assert_eq!(status(&head), "503", "{head}");
        tokio::time::sleep(std::time::Duration::from_millis(10)).await;
    }
    assert!(
        served,
        "a place freed by a closed tunnel was never given again"
    );
}

#[tokio::test]
async fn host_spellings_that_try_to_pass_for_a_listed_name_are_judged_as_what_they_reach() {
    let h = harness(policy(&["allowed.test"], false)).await;
    let port = h.origin.port();
    // Case and a trailing dot name the listed host itself.
    for target in [
        format!("ALLOWED.Test.:{port}"),
        format!("allowed.test.:{port}"),
    ] {
        let (_, head) = connect(h.proxy, &target).await;
        assert_eq!(status(&head), "200", "{target}: {head}");
    }
    // Look-alikes, numeric and bracketed addresses are not the listed name.
    for target in [
        format!("allowed.test.other.test:{port}"),
        format!("xallowed.test:{port}"),
        format!("2130706433:{port}"),
        format!("0x7f.1:{port}"),
        format!("127.1:{port}"),
        format!("127.0.0.1:{port}"),
        format!("[::ffff:127.0.0.1]:{port}"),
        format!("[::1]:{port}"),
    ] {
        let (_, head) = connect(h.proxy, &target).await;
        assert_eq!(status(&head), "403", "{target}: {head}");
    }
    // Userinfo before the host: the request is for what follows the `@`.
    for request in [
        format!("GET http://allowed.test@other.test:{port}/ HTTP/1.1\r\n\r\n"),
        format!(
            "GET http://allowed.test:{port}@other.test:{port}/ HTTP/1.0\r\nHost: allowed.test:{port}\r\n\r\n"
        ),
    ] {
        let mut stream = TcpStream::connect(h.proxy).await.unwrap();
        stream.write_all(request.as_bytes()).await.unwrap();
        let head = read_head(&mut stream).await;
        assert!(matches!(status(&head), "400" | "403"), "{request}: {head}");
    }
}
