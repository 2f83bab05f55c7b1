//! A server that stops answering without closing anything (a cut link: packets dropped,
//! no reset), between the store and Postgres over TCP: every call fails within the store's
//! deadlines, retryably, instead of hanging; once the link is back the same store works
//! again, and nothing of the calls that failed was written. Also when the link lost the
//! bytes for good: connections left dead are closed and made anew, the listener's too.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{TcpListener, TcpStream};
use tokio::sync::watch;
use toren_protocol::{AgentSpec, EventKind, RunCreated, RunId, ToolStarted};
use toren_store::{EventLog, TestClock};
use toren_store_postgres::{PostgresOptions, PostgresStore};
use toren_test_support::postgres::Cluster;

use super::moves::listening;

/// What a [`Link`] does with the bytes it is given.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Mode {
    /// Passes them on.
    Open,
    /// Holds them until it is open again, as a dropped packet waits for its
    /// retransmission; nothing is closed.
    Hold,
    /// Loses them for good (a peer gone without a reset): the connections through it are
    /// dead, but nothing tells their ends.
    Lose,
}

/// A TCP proxy whose link can be cut.
struct Link {
    addr: std::net::SocketAddr,
    mode: watch::Sender<Mode>,
}

impl Link {
    async fn to(target: std::net::SocketAddr) -> Self {
        let listener = TcpListener::bind("127.0.0.1:0").await.unwrap();
        let addr = listener.local_addr().unwrap();
        let (mode, _) = watch::channel(Mode::Open);
        let watch = mode.clone();
        tokio::spawn(async move {
            while let Ok((client, _)) = listener.accept().await {
                let server = TcpStream::connect(target).await.unwrap();
                let (cr, cw) = client.into_split();
                let (sr, sw) = server.into_split();
                tokio::spawn(pump(cr, sw, watch.subscribe()));
                tokio::spawn(pump(sr, cw, watch.subscribe()));
            }
        });
        Self { addr, mode }
    }

    fn set(&self, mode: Mode) {
        self.mode.send_replace(mode);
    }
}

/// Copies `from` to `to` as the link's mode says.
async fn pump(
    mut from: tokio::net::tcp::OwnedReadHalf,
    mut to: tokio::net::tcp::OwnedWriteHalf,
    mut mode: watch::Receiver<Mode>,
) {
    let mut buf = vec![0; 64 * 1024];
    loop {
        let Ok(n) = from.read(&mut buf).await else {
            return;
        };
        if n == 0 {
            return;
        }
        let Ok(now) = mode.wait_for(|m| *m != Mode::Hold).await.map(|m| *m) else {
            return;
        };
        if now == Mode::Lose {
            continue;
        }
        if to.write_all(&buf[..n]).await.is_err() {
            return;
        }
    }
}

fn created() -> RunCreated {
    RunCreated {
        agent: AgentSpec {
            budget: None,
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
        start: None,
    }
}

fn started(call: &str) -> EventKind {
    EventKind::ToolStarted(ToolStarted {
        call_id: call.into(),
        tool: "bash".into(),
        attempt: 1,
        checkpoint: None,
    })
}

/// A cluster on TCP, a link to it, and a store through the link with short deadlines.
async fn through_a_link() -> (Cluster, Link, PostgresStore, PostgresOptions) {
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
        listen_check: Duration::from_secs(1),
    };
    let url = cluster
        .tcp_url()
        .unwrap()
        .replace(&format!(":{port}/"), &format!(":{}/", link.addr.port()));
    let store = PostgresStore::open(&url, &options)
        .await
        .unwrap()
        .with_clock(Arc::new(TestClock::new()));
    (cluster, link, store, options)
}

/// Cuts `link` in `mode` under `store`: appends and renewals fail within the call deadline,
/// retryably; once it is open again the same store works again (within `recover`), and
/// nothing of the failed appends was written.
async fn cut_and_recover(
    link: &Link,
    store: &PostgresStore,
    options: &PostgresOptions,
    mode: Mode,
    recover: Duration,
) {
    let run = RunId::new();
    let (_, lease) = store
        .create_run(&run, created(), "w", Duration::from_secs(60))
        .await
        .unwrap();
    link.set(mode);
    for attempt in 0..3 {
        let began = Instant::now();
        let err = store
            .append(&lease, 1, vec![started("a")])
            .await
            .unwrap_err();
        let took = began.elapsed();
        assert!(
            took < options.call_timeout + Duration::from_millis(500),
            "{mode:?} attempt {attempt}: an append over a cut link took {took:?}"
        );
        assert!(err.is_retryable(), "{mode:?} attempt {attempt}: {err}");
        let began = Instant::now();
        let err = store
            .renew_lease(&lease, Duration::from_secs(60))
            .await
            .unwrap_err();
        assert!(began.elapsed() < options.call_timeout + Duration::from_millis(500));
        assert!(err.is_retryable(), "{mode:?}: {err}");
    }
    link.set(Mode::Open);
    let deadline = Instant::now() + recover;
    let events = loop {
        match store.read(&run, 0).await {
            Ok(events) => break events,
            Err(e) if e.is_retryable() && Instant::now() < deadline => {}
            Err(e) => panic!("{mode:?}: the store did not recover: {e}"),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_link_that_holds_its_bytes_makes_calls_fail_in_time_and_the_store_recovers() {
    let (_cluster, link, store, options) = through_a_link().await;
    cut_and_recover(&link, &store, &options, Mode::Hold, Duration::from_secs(30)).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_link_that_loses_its_bytes_leaves_dead_connections_the_store_replaces() {
    let (_cluster, link, store, options) = through_a_link().await;
    let mut moves = store.moves().unwrap();
    listening(&store, &mut moves).await;
    cut_and_recover(&link, &store, &options, Mode::Lose, Duration::from_secs(30)).await;
    // The LISTEN connection died too; the quiet check finds out and listens anew.
    listening(&store, &mut moves).await;
}
