//! A database that goes away under an open store: calls fail promptly with retryable
//! errors instead of hanging, and once the server is back the same store works again
//! (the pool reconnects) and its listener hears writes again, without reopening.

use std::sync::Arc;
use std::time::{Duration, Instant};

use toren_protocol::{AgentSpec, EventKind, RunCreated, RunId, ToolStarted};
use toren_store::{EventLog, TestClock};
use toren_store_postgres::{PostgresOptions, PostgresStore};

use super::common::cluster;
use super::moves::listening;

const TTL: Duration = Duration::from_secs(60);

fn created() -> RunCreated {
    RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "outage".into(),
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

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn a_store_outlives_its_server_going_away_and_coming_back() {
    let mut cluster = cluster().await;
    let clock = Arc::new(TestClock::new());
    let options = PostgresOptions::default();
    let store = PostgresStore::open(&cluster.url(), &options)
        .await
        .unwrap()
        .with_clock(clock.clone());
    let mut moves = store.moves().unwrap();
    listening(&store, &mut moves).await;
    let run = RunId::new();
    let (_, lease) = store.create_run(&run, created(), "w", TTL).await.unwrap();
    store.append(&lease, 1, vec![started("a")]).await.unwrap();

    tokio::task::block_in_place(|| cluster.stop()).unwrap();
    for attempt in 0..3 {
        let began = Instant::now();
        let err = store
            .append(&lease, 2, vec![started("b")])
            .await
            .unwrap_err();
        let took = began.elapsed();
        assert!(
            took < options.call_timeout + Duration::from_secs(1),
            "attempt {attempt}: an append with the server gone took {took:?}"
        );
        assert!(err.is_retryable(), "attempt {attempt}: {err}");
        let read = store.read(&run, 0).await;
        assert!(
            read.as_ref().is_err_and(toren_store::Error::is_retryable),
            "{read:?}"
        );
    }

    tokio::task::block_in_place(|| cluster.restart()).unwrap();
    // The same store, not reopened: nothing of the failed appends was written.
    let events = store.read(&run, 0).await.unwrap();
    assert_eq!(events.len(), 2, "{events:?}");
    let appended = store.append(&lease, 2, vec![started("b")]).await.unwrap();
    assert_eq!(appended[0].seq, 3);
    // And its listener hears writes again.
    listening(&store, &mut moves).await;
    let other = RunId::new();
    store.create_queued(&other, created()).await.unwrap();
    let heard = tokio::time::timeout(Duration::from_secs(5), moves.recv())
        .await
        .unwrap()
        .unwrap();
    assert_eq!(heard, other);
}
