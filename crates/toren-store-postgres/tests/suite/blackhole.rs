//! A server that stops answering without closing anything (a cut link: packets dropped,
//! no reset), between the store and Postgres over TCP: every call fails within the store's
//! deadlines, retryably, instead of hanging; once the link is back the same store works
//! again, and nothing of the calls that failed was written.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use toren_protocol::{AgentSpec, EventKind, RunCreated, RunId, ToolStarted};
use toren_store::{EventLog, TestClock};
use toren_store_postgres::{PostgresOptions, PostgresStore};
use toren_test_support::postgres::Cluster;

/// A TCP proxy whose link can be cut: while cut, bytes wait in it, as a dropped packet
/// waits for its retransmission, and nothing is closed.
struct Link {
    addr: std::net::SocketAddr,
    cut: watch::Sender<bool>,
}

impl Link {
    async fn to(target: std::net::SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (cut, _) = watch::channel(false);
        let watch = cut.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = TcpStream::connect(target).await.unwrap();
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pump(cr, sw, watch.subscribe()));
                tokio::spawn(pump(sr, cw, watch.subscribe()));
            }
        });
        Self { addr, cut }
    }

    fn set_cut(&self, cut: bool) {
        self.cut.send_replace(cut);
    }
}

/// Copies `from` to `to`, holding every chunk while the link is cut.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut cut: watch::Receiver<bool>,
) {
    let mut buf = vec![0; 64 * 1024];
    loop {
        let Ok(n) = from.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        if cut.wait_for(|cut| !cut).await.is_err() {
            return;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

fn created() -> RunCreated {
    RunCreated {
        agent: AgentSpec {
            name: "cut".into(),
            model: "scripted/s.yaml".into(),
            instructions: None,
            sandbox: None,
            max_turns: 5,
            context_tokens: None,
            source: None,
        },
        policy: None,
        input: "hi".into(),
        session: None,
        channel: None,
    }
}

fn started(call: &str) -> EventKind {
    EventKind::ToolStarted(ToolStarted {
        call_id: call.into(),
        tool: "bash".into(),
        attempt: 1,
    })
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_cut_link_makes_calls_fail_within_the_deadline_and_the_store_recovers() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let cluster =
        tokio::task::spawn_blocking(move || Cluster::builder().listen("127.0.0.1", port).start())
            .await
            .unwrap()
            .unwrap_or_else(|e| panic!("cannot start a test Postgres cluster: {e:#}"));
    let link = Link::to(([127, 0, 0, 1], port).into()).await;
    let options = PostgresOptions {
        pool_size: 4,
        connect_timeout: Duration::from_secs(2),
        acquire_timeout: Duration::from_secs(1),
        statement_timeout: Duration::from_secs(1),
        call_timeout: Duration::from_secs(2),
    };
    let url = cluster
        .tcp_url()
        .unwrap()
        .replace(&format!(":{port}/"), &format!(":{}/", link.addr.port()));
    let clock = Arc::new(TestClock::new());
    let store = PostgresStore::open(&url, &options)
        .await
        .unwrap()
        .with_clock(clock);
    let run = RunId::new();
    let (_, lease) = store
        .create_run(&run, created(), "w", Duration::from_secs(60))
        .await
        .unwrap();

    link.set_cut(true);
    for attempt in 0..3 {
        let began = Instant::now();
        let err = store
            .append(&lease, 1, vec![started("a")])
            .await
            .unwrap_err();
        let took = began.elapsed();
        assert!(
            took < options.call_timeout + Duration::from_millis(500),
            "attempt {attempt}: an append over a cut link took {took:?}"
        );
        assert!(err.is_retryable(), "attempt {attempt}: {err}");
        let began = Instant::now();
        let err = store
            .renew_lease(&lease, Duration::from_secs(60))
            .await
            .unwrap_err();
        assert!(began.elapsed() < options.call_timeout + Duration::from_millis(500));
        assert!(err.is_retryable(), "{err}");
    }

    link.set_cut(false);
    // The same store: it may take a call or two for the pool to let go of connections
    // left mid-exchange, but never longer than a few deadlines.
    let deadline = Instant::now() + Duration::from_secs(30);
    let events = loop {
        match store.read(&run, 0).await {
            Ok(events) => break events,
            Err(e) if e.is_retryable() && Instant::now() < deadline => {}
            Err(e) => panic!("the store did not recover: {e}"),
        }
    };
    assert_eq!(
        events.len(),
        1,
        "nothing of the failed appends was written: {events:?}"
    );
    let appended = store.append(&lease, 1, vec![started("a")]).await.unwrap();
    assert_eq!(appended[0].seq, 2);
    store
        .renew_lease(&lease, Duration::from_secs(60))
        .await
        .unwrap();
}
