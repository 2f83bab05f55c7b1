//! What the worker's approver relies on: an ask nobody answered in time refuses that
//! connection with the approver's text and is asked again next time (nothing remembered),
//! and every allowed connection is reported once more when it closes, with the bytes it
//! carried each way.

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use tokio::io::AsyncWriteExt;
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;
use toren_egress::{
    Answer, Approver, AskRequest, Decision, Outcome, Proxy, ProxyConfig, Recorder, Traffic,
};

use super::support::{MapResolver, connect, origin, policy, read_all};

/// The body of a response whose head is `head` (it has a `content-length`; the
/// connection stays open after it).
async fn read_body(stream: &mut tokio::net::TcpStream, head: &str) -> String {
    use tokio::io::AsyncReadExt;
    let length: usize = head
        .lines()
        .find_map(|l| {
            l.to_ascii_lowercase()
                .strip_prefix("content-length:")
                .map(|v| v.trim().parse().unwrap())
        })
        .unwrap();
    let mut body = vec![0u8; length];
    stream.read_exact(&mut body).await.unwrap();
    String::from_utf8(body).unwrap()
}

/// Answers from a script, one per ask, and counts the asks.
struct Script(Mutex<Vec<Answer>>, Mutex<u32>);

#[async_trait::async_trait]
impl Approver for Script {
    async fn approve(&self, _request: AskRequest) -> bool {
        unreachable!("the proxy asks through answer()")
    }

    async fn answer(&self, _request: AskRequest) -> Answer {
        *self.1.lock().unwrap() += 1;
        self.0.lock().unwrap().remove(0)
    }
}

#[derive(Default)]
struct Closed(Mutex<Vec<(Decision, Traffic)>>);

impl Recorder for Closed {
    fn record(&self, _decision: Decision) {}

    fn closed(&self, decision: Decision, traffic: Traffic) {
        self.0.lock().unwrap().push((decision, traffic));
    }
}

#[tokio::test]
async fn an_unanswered_ask_is_refused_with_its_text_and_asked_again_next_time() {
    let (origin, _seen) = origin().await;
    let script = Arc::new(Script(
        Mutex::new(vec![
            Answer::Unanswered(
                "nobody answered; approve with `toren approve r host:other.test`".into(),
            ),
            Answer::Allow,
        ]),
        Mutex::new(0),
    ));
    let closed = Arc::new(Closed::default());
    let proxy = Proxy::new(ProxyConfig {
        policy: policy(&[], true),
        resolver: Arc::new(MapResolver(HashMap::from([(
            "other.test".to_owned(),
            vec![origin],
        )]))),
        approver: script.clone(),
        recorder: closed.clone(),
        permit: vec![origin],
    });
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    let shutdown = CancellationToken::new();
    let _stop = shutdown.clone().drop_guard();
    let serving = proxy.clone();
    tokio::spawn(async move { serving.serve_tcp(listener, shutdown).await });

    let target = format!("other.test:{}", origin.port());
    let (mut refused, head) = connect(address, &target).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    let body = read_body(&mut refused, &head).await;
    assert!(
        body.contains("nobody answered; approve with `toren approve r host:other.test`"),
        "{body}"
    );
    assert!(
        closed.0.lock().unwrap().is_empty(),
        "a refusal carries nothing"
    );

    // Asked again (not remembered), allowed, then remembered.
    let (mut stream, head) = connect(address, &target).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let request = b"GET /x HTTP/1.1\r\nHost: other.test\r\n\r\n";
    stream.write_all(request).await.unwrap();
    let reply = read_all(&mut stream).await;
    assert!(reply.ends_with("hello from origin"), "{reply}");
    drop(stream);
    let (_again, head) = connect(address, &target).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert_eq!(*script.1.lock().unwrap(), 2);

    // The first tunnel's close is reported with its bytes (the origin closes after its
    // reply, which ends the tunnel).
    let report = loop {
        if let Some(first) = closed.0.lock().unwrap().first().cloned() {
            break first;
        }
        tokio::task::yield_now().await;
    };
    assert_eq!(
        report,
        (
            Decision {
                host: "other.test".into(),
                port: origin.port(),
                method: "CONNECT".into(),
                outcome: Outcome::Allowed {
                    address: origin,
                    approved: true
                },
            },
            Traffic {
                up: request.len() as u64,
                down: reply.len() as u64,
            }
        )
    );
}
