//! The server over real HTTP on a loopback socket (`axum::serve`, requests written byte
//! for byte, so a path can hold what a client library would refuse to send): a workspace
//! file the agent wrote (HTML, SVG) is sandboxed and `nosniff` whichever front door serves
//! it, the bearer API or the web page's `/ui/api`; and every request the server refuses
//! before a handler runs (a path that is not UTF-8, a bad query, a body that does not
//! parse or is over the limit) is answered as `application/problem+json` with a detail.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use serde_json::Value;
use support::{Home, TOKEN};
use tokio::io::{AsyncReadExt as _, AsyncWriteExt as _};

/// A response as it came off the socket.
struct Raw {
    status: u16,
    /// Header names lower-cased.
    headers: Vec<(String, String)>,
    body: Vec<u8>,
}

impl Raw {
    fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, v)| v.as_str())
    }

    fn problem(&self) -> Value {
        assert_eq!(
            self.header("content-type"),
            Some("application/problem+json"),
            "status {}: {}",
            self.status,
            String::from_utf8_lossy(&self.body)
        );
        let doc: Value = serde_json::from_slice(&self.body).unwrap();
        assert_eq!(doc["status"], self.status, "{doc}");
        assert!(
            doc["detail"].as_str().is_some_and(|d| !d.is_empty()),
            "{doc}"
        );
        doc
    }
}

/// `toren_server::app` listening on a loopback port of its own.
async fn listen(home: &Home) -> std::net::SocketAddr {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let addr = listener.local_addr().unwrap();
    let app = toren_server::app(home.state.clone());
    tokio::spawn(async move {
        axum::serve(listener, app).await.unwrap();
    });
    addr
}

/// Sends `head` (the request line and headers, without the blank line) and `body` over a
/// fresh connection, and reads the whole response.
async fn send(addr: std::net::SocketAddr, head: &[u8], body: &[u8]) -> Raw {
    let mut stream = tokio::net::TcpStream::connect(addr).await.unwrap();
    let mut request = head.to_vec();
    request.extend_from_slice(
        format!(
            "\r\nHost: {addr}\r\nConnection: close\r\nContent-Length: {}\r\n\r\n",
            body.len()
        )
        .as_bytes(),
    );
    request.extend_from_slice(body);
    stream.write_all(&request).await.unwrap();
    let mut bytes = Vec::new();
    let what = String::from_utf8_lossy(head).into_owned();
    tokio::time::timeout(
        std::time::Duration::from_secs(20),
        stream.read_to_end(&mut bytes),
    )
    .await
    .unwrap_or_else(|_| {
        panic!(
            "no whole response to {what}: {}",
            String::from_utf8_lossy(&bytes)
        )
    })
    .unwrap();
    let end = bytes
        .windows(4)
        .position(|w| w == b"\r\n\r\n")
        .expect("a response head");
    let head = String::from_utf8(bytes[..end].to_vec()).unwrap();
    let mut lines = head.split("\r\n");
    let status = lines
        .next()
        .unwrap()
        .split(' ')
        .nth(1)
        .unwrap()
        .parse()
        .unwrap();
    let headers = lines
        .filter_map(|l| l.split_once(':'))
        .map(|(n, v)| (n.trim().to_ascii_lowercase(), v.trim().to_owned()))
        .collect::<Vec<_>>();
    let mut body = bytes[end + 4..].to_vec();
    if headers
        .iter()
        .any(|(n, v)| n == "transfer-encoding" && v == "chunked")
    {
        body = dechunk(&body);
    }
    Raw {
        status,
        headers,
        body,
    }
}

fn dechunk(mut bytes: &[u8]) -> Vec<u8> {
    let mut out = Vec::new();
    loop {
        let line = bytes.windows(2).position(|w| w == b"\r\n").unwrap();
        let size = usize::from_str_radix(std::str::from_utf8(&bytes[..line]).unwrap(), 16).unwrap();
        if size == 0 {
            return out;
        }
        out.extend_from_slice(&bytes[line + 2..line + 2 + size]);
        bytes = &bytes[line + 4 + size..];
    }
}

fn bearer(method: &str, target: &str) -> Vec<u8> {
    format!("{method} {target} HTTP/1.1\r\nAuthorization: Bearer {TOKEN}").into_bytes()
}

fn with_cookie(method: &str, target: &str) -> Vec<u8> {
    format!(
        "{method} {target} HTTP/1.1\r\nCookie: toren_session={}",
        hex::encode(TOKEN)
    )
    .into_bytes()
}

const HTML: &str = "<script>document.title='ran'</script>";
const SVG: &str = "<svg xmlns='http://www.w3.org/2000/svg'><script>alert(1)</script></svg>";

#[tokio::test]
async fn workspace_html_and_svg_are_sandboxed_on_every_front_door() {
    let home = Home::new().await;
    home.agent(
        "writer",
        &format!(
            "turns:\n  - tool_calls:\n      - write_file: {{path: \"page.html\", content: {HTML:?}}}\n      - write_file: {{path: \"pic.svg\", content: {SVG:?}}}\n  - text: \"done\"\n"
        ),
        true,
    );
    let run = home.create("writer", "write").await.json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    home.drive(&run).await;
    let addr = listen(&home).await;

    for (file, content_type, content) in [
        ("page.html", "text/html", HTML),
        ("pic.svg", "image/svg+xml", SVG),
    ] {
        for head in [
            bearer("GET", &format!("/runs/{run}/files/{file}")),
            with_cookie("GET", &format!("/ui/api/runs/{run}/files/{file}")),
        ] {
            let what = String::from_utf8_lossy(&head).into_owned();
            let reply = send(addr, &head, b"").await;
            assert_eq!(reply.status, 200, "{what}");
            assert_eq!(reply.body, content.as_bytes(), "{what}");
            assert_eq!(reply.header("content-type"), Some(content_type), "{what}");
            let csp = reply.header("content-security-policy").unwrap_or_default();
            assert!(
                csp.split(';').any(|d| d.trim() == "sandbox") && csp.contains("default-src 'none'"),
                "{what}: {csp:?}"
            );
            assert_eq!(
                reply.header("x-content-type-options"),
                Some("nosniff"),
                "{what}"
            );
        }
    }
    // The listing is sandboxed too: it is the workspace's content (its names).
    let listing = send(addr, &bearer("GET", &format!("/runs/{run}/files/")), b"").await;
    assert_eq!(listing.status, 200);
    assert!(
        listing
            .header("content-security-policy")
            .is_some_and(|c| c.contains("sandbox"))
    );
}

#[tokio::test]
async fn every_refused_request_is_a_problem_document() {
    let home = Home::new().await;
    let addr = listen(&home).await;
    let id = "01ARZ3NDEKTSV4RRFFQ69G5FAV";

    // A path segment that is not UTF-8, on the API, the web page's API and a page.
    for head in [
        bearer("GET", "/runs/%FF%FE"),
        bearer("GET", &format!("/runs/{id}/files/%C3%28.txt")),
        bearer("GET", "/sessions/%80/files/"),
        with_cookie("GET", "/ui/api/runs/%FF"),
        with_cookie("GET", "/ui/runs/%FF"),
        with_cookie("GET", &format!("/ui/runs/{id}/files/a%FF")),
    ] {
        let what = String::from_utf8_lossy(&head).into_owned();
        let reply = send(addr, &head, b"").await;
        assert_eq!(reply.status, 400, "{what}");
        let doc = reply.problem();
        assert!(
            doc["detail"].as_str().unwrap().contains("UTF-8"),
            "{what}: {doc}"
        );
    }

    // A query that does not parse.
    let reply = send(addr, &bearer("GET", "/runs?limit=many"), b"").await;
    assert_eq!(reply.status, 400);
    reply.problem();

    // Bodies: not JSON, the wrong type, no JSON content type, over the limit.
    let json = |head: Vec<u8>| {
        let mut head = head;
        head.extend_from_slice(b"\r\nContent-Type: application/json");
        head
    };
    let reply = send(addr, &json(bearer("POST", "/runs")), b"{not json").await;
    assert_eq!(reply.status, 400);
    reply.problem();
    let reply = send(addr, &json(bearer("POST", "/runs")), br#"{"agent": 1}"#).await;
    assert_eq!(reply.status, 422);
    reply.problem();
    let reply = send(
        addr,
        &bearer("POST", "/runs"),
        br#"{"agent":"a","input":"b"}"#,
    )
    .await;
    assert_eq!(reply.status, 415);
    reply.problem();
    // A body over the limit, on a route that reads it whole (the sign-in form).
    let form = |head: Vec<u8>| {
        let mut head = head;
        head.extend_from_slice(b"\r\nContent-Type: application/x-www-form-urlencoded");
        head
    };
    let over = toren_server::BODY_LIMIT + 1;
    for head in [
        form(b"POST /ui/sign-in HTTP/1.1".to_vec()),
        json(bearer("POST", "/runs")),
    ] {
        let what = String::from_utf8_lossy(&head).into_owned();
        // All of it is sent, so the server has read it to the last byte when it refuses.
        let reply = send(addr, &head, &vec![b'x'; over]).await;
        assert_eq!(reply.status, 413, "{what}");
        reply.problem();
    }

    // A page for a person stays a page: the sign-in form refusing a token.
    let reply = send(
        addr,
        &form(b"POST /ui/sign-in HTTP/1.1".to_vec()),
        b"token=wrong",
    )
    .await;
    assert_eq!(reply.status, 401);
    assert_eq!(
        reply.header("content-type"),
        Some("text/html; charset=utf-8")
    );
    assert!(String::from_utf8_lossy(&reply.body).contains("id=\"sign-in-error\""));

    // A method a path does not have keeps its `Allow`.
    let reply = send(addr, &bearer("DELETE", "/runs"), b"").await;
    assert_eq!(reply.status, 405);
    reply.problem();
    assert!(reply.header("allow").is_some());
}
