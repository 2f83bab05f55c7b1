//! `EventLog::moves`: what one store writes, another (as another process would) hears of
//! within moments — a run created, events appended, an approval decided, a run cancelled, a
//! lease released — and a refused write tells nobody anything.

use std::sync::Arc;
use std::time::Duration;

use tokio::sync::broadcast;
use toren_protocol::{
    AgentSpec, ApprovalDecided, ApprovalRequested, EventKind, RunCancelled, RunCreated, RunId,
};
use toren_store::{Error, EventLog, TestClock};

use super::common::{cluster, store_on};

const TTL: Duration = Duration::from_secs(60);

fn created() -> RunCreated {
    RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "moves".into(),
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

/// The next run id heard, within five seconds.
async fn heard(moves: &mut broadcast::Receiver<RunId>) -> RunId {
    tokio::time::timeout(Duration::from_secs(5), moves.recv())
        .await
        .expect("a notice within 5 s")
        .expect("the broadcast stays open")
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn another_stores_writes_are_heard() {
    let cluster = cluster().await;
    let clock = Arc::new(TestClock::new());
    let writer = store_on(&cluster.url(), &clock).await;
    let listener = store_on(&cluster.url(), &clock).await;
    let mut moves = listener
        .moves()
        .expect("a Postgres store hears other processes");
    // The LISTEN connection is made in the background: write until the first is heard.
    let first = RunId::new();
    writer.create_queued(&first, created()).await.unwrap();
    listening(&writer, &mut moves).await;

    let queued = RunId::new();
    writer.create_queued(&queued, created()).await.unwrap();
    assert_eq!(heard(&mut moves).await, queued, "a queued run");

    let run = RunId::new();
    let (_, lease) = writer.create_run(&run, created(), "w", TTL).await.unwrap();
    assert_eq!(heard(&mut moves).await, run, "a created run");
    let request = EventKind::ApprovalRequested(ApprovalRequested {
        call_id: "c1".into(),
        tool: "bash".into(),
        command: "ls".into(),
        attempt: 1,
    });
    writer.append(&lease, 1, vec![request]).await.unwrap();
    assert_eq!(heard(&mut moves).await, run, "appended events");

    // A refused write (the log moved on) notifies nobody: the next notice is the next write.
    let refused = writer.append(&lease, 1, vec![]).await;
    assert!(
        matches!(refused, Err(Error::Conflict { .. })),
        "{refused:?}"
    );
    let other = RunId::new();
    writer.create_queued(&other, created()).await.unwrap();
    assert_eq!(
        heard(&mut moves).await,
        other,
        "nothing for the refused write"
    );

    writer
        .decide_approval(
            &run,
            ApprovalDecided {
                call_id: "c1".into(),
                approved: true,
                by: "alice".into(),
                via: "cli".into(),
                reason: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(heard(&mut moves).await, run, "an approval decided");
    writer.release_lease(&lease).await.unwrap();
    assert_eq!(heard(&mut moves).await, run, "a lease released");
    writer
        .cancel_run(
            &run,
            RunCancelled {
                reason: "done".into(),
                by: None,
                via: None,
            },
        )
        .await
        .unwrap();
    assert_eq!(heard(&mut moves).await, run, "a run cancelled");
}

/// Returns once `moves` hears `writer`'s writes (the LISTEN connection is made in the
/// background, and notices before it are lost), with nothing left unread.
pub(super) async fn listening(writer: &dyn EventLog, moves: &mut broadcast::Receiver<RunId>) {
    // Notices of earlier writes are no sign of listening now.
    while moves.try_recv().is_ok() {}
    tokio::time::timeout(Duration::from_secs(20), async {
        loop {
            writer
                .create_queued(&RunId::new(), created())
                .await
                .unwrap();
            if tokio::time::timeout(Duration::from_millis(200), moves.recv())
                .await
                .is_ok()
            {
                break;
            }
        }
    })
    .await
    .expect("the listener hears writes within 20 s");
    // What the warm-up wrote after the first notice heard.
    tokio::time::sleep(Duration::from_millis(100)).await;
    while moves.try_recv().is_ok() {}
}
