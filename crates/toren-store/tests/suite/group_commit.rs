//! The SQLite store's one writer: writes waiting together commit in one transaction (group
//! commit), yet each keeps its own checks and its own result, and a refused one writes
//! nothing while the others of its batch are written.

use std::future::Future;
use std::pin::Pin;
use std::task::{Context, Poll, Waker};

use sqlx::Connection;
use toren_protocol::{AgentSpec, EventKind, RunCreated, RunId, ToolCompleted, ToolStarted};
use toren_store::{Error, EventLog, Lease, Result};

use super::common::{raw, temp_store};

const RUNS: usize = 40;

fn created() -> RunCreated {
    RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "group-commit".into(),
            model: "scripted/group-commit".into(),
            instructions: None,
            sandbox: None,
            max_turns: AgentSpec::DEFAULT_MAX_TURNS,
            context_tokens: None,
            source: None,
        },
        policy: None,
        input: "go".into(),
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

type Pending<'a> = Pin<Box<dyn Future<Output = Result<Vec<toren_protocol::Event>>> + Send + 'a>>;

/// Polls `write` once, which hands it to the writer's queue, and keeps it to await later.
fn submit<'a>(write: Pending<'a>, all: &mut Vec<Pending<'a>>) {
    let mut write = write;
    let mut cx = Context::from_waker(Waker::noop());
    assert!(matches!(write.as_mut().poll(&mut cx), Poll::Pending));
    all.push(write);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn concurrent_writes_share_a_commit_and_keep_their_own_results() {
    let (_dir, store) = temp_store().await;
    let mut leases: Vec<Lease> = Vec::new();
    for _ in 0..RUNS {
        let run_id = RunId::new();
        let (_, lease) = store
            .create_run(
                &run_id,
                created(),
                "host:1",
                std::time::Duration::from_secs(60),
            )
            .await
            .unwrap();
        leases.push(lease);
    }
    let fenced: Vec<Lease> = leases
        .iter()
        .map(|lease| Lease {
            token: lease.token + 7,
            ..lease.clone()
        })
        .collect();
    let before = store.write_stats();
    // Another connection holds the write lock, so everything submitted below waits in the
    // queue (or, the first batch, in BEGIN IMMEDIATE) until it lets go.
    let mut blocker = raw(store.path()).await;
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut blocker)
        .await
        .unwrap();
    let mut good = Vec::new();
    let mut stale = Vec::new();
    let mut lost = Vec::new();
    for (lease, fenced) in leases.iter().zip(&fenced) {
        submit(store.append(lease, 1, vec![started("call_1")]), &mut good);
        // Submitted after the good one: the log has moved on by the time it runs.
        submit(store.append(lease, 1, vec![started("call_x")]), &mut stale);
        submit(store.append(fenced, 2, vec![started("call_y")]), &mut lost);
    }
    sqlx::raw_sql("COMMIT").execute(&mut blocker).await.unwrap();
    blocker.close().await.unwrap();
    for (write, lease) in good.into_iter().zip(&leases) {
        let events = write.await.unwrap();
        assert_eq!(events.len(), 1);
        assert_eq!((events[0].seq, &events[0].run_id), (2, &lease.run_id));
    }
    for write in stale {
        let refused = write.await;
        assert!(
            matches!(
                refused,
                Err(Error::Conflict {
                    expected: 1,
                    actual: 2,
                    ..
                })
            ),
            "{refused:?}"
        );
    }
    for write in lost {
        let refused = write.await;
        assert!(
            matches!(refused, Err(Error::LeaseLost { .. })),
            "{refused:?}"
        );
    }
    for lease in &leases {
        let log = store.read(&lease.run_id, 0).await.unwrap();
        let kinds: Vec<_> = log.iter().map(|e| e.kind.name()).collect();
        assert_eq!(kinds, ["run_created", "tool_started"], "{}", lease.run_id);
        assert!(matches!(&log[1].kind, EventKind::ToolStarted(s) if s.call_id == "call_1"));
    }
    let after = store.write_stats();
    let writes = after.writes - before.writes;
    let commits = after.commits - before.commits;
    assert_eq!(writes, 3 * RUNS as u64, "every write ran once");
    // The first batch may have been taken before the rest arrived; the rest shared one.
    assert!(commits <= 2, "{commits} commits for {writes} writes");
    store.close().await;
}

#[tokio::test]
async fn a_write_whose_caller_gave_up_is_not_made() {
    let (_dir, store) = temp_store().await;
    let run_id = RunId::new();
    let (_, lease) = store
        .create_run(
            &run_id,
            created(),
            "host:1",
            std::time::Duration::from_secs(60),
        )
        .await
        .unwrap();
    let mut blocker = raw(store.path()).await;
    sqlx::raw_sql("BEGIN IMMEDIATE")
        .execute(&mut blocker)
        .await
        .unwrap();
    // The first write may already be in the writer's hands (waiting for the lock): it is
    // made. The second is still queued when its caller drops it: it is not.
    let mut kept = Vec::new();
    submit(store.append(&lease, 1, vec![started("call_1")]), &mut kept);
    let mut dropped = Vec::new();
    submit(
        store.append(&lease, 2, vec![completed("call_1")]),
        &mut dropped,
    );
    drop(dropped);
    sqlx::raw_sql("COMMIT").execute(&mut blocker).await.unwrap();
    for write in kept {
        write.await.unwrap();
    }
    // A write after both shows the log as the kept write left it.
    let next = store.append(&lease, 2, vec![completed("call_1")]).await;
    assert_eq!(next.unwrap()[0].seq, 3);
    store.close().await;
}

fn completed(call: &str) -> EventKind {
    EventKind::ToolCompleted(ToolCompleted {
        call_id: call.into(),
        output: "done".into(),
        is_error: false,
        exit_code: Some(0),
        truncated: false,
    })
}
