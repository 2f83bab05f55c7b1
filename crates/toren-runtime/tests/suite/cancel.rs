//! Cancellation through `service.cancel`: a running command is killed and the driver
//! returns at once; a run waiting for a decision stops without running anything, also when
//! another service (another process's, over the same database) cancels it; a cancelled run
//! is never resumable; cancelling a run that has ended, or does not exist, is refused.

use std::sync::Arc;
use std::time::{Duration, Instant};

use tokio_util::sync::CancellationToken;
use toren_protocol::{ApprovalPolicy, EventKind, RunCancelled, RunId, RunStatus};
use toren_runtime::{PolicySettings, RunService, ServiceSettings};
use toren_store::SqliteStore;
use toren_worker::Outcome;

use super::support::{
    Home, actor, bash, calls, completed, processes_with, sandbox, say, types, until, within,
};

fn cancelled(output: &str) -> Outcome {
    Outcome::Ended {
        status: RunStatus::Cancelled,
        output: output.to_owned(),
    }
}

/// The refusal to drive a run that has ended.
fn assert_not_resumable(error: &toren_worker::Error) {
    assert!(
        matches!(
            error,
            toren_worker::Error::Store(toren_store::Error::RunEnded {
                status: RunStatus::Cancelled,
                ..
            })
        ),
        "{error:?}"
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_a_run_kills_its_running_command_and_ends_it() {
    let home = Home::new().await;
    let marker = "3021.25";
    let agent = home.agent(
        "sleeper",
        Some(sandbox(ApprovalPolicy::Never)),
        &[
            calls(vec![bash(&format!("touch started; sleep {marker}"))]),
            say("not reached"),
        ],
    );
    let created = home.create(agent, "sleep").await;
    let run = created.run_id.clone();
    let worker = Arc::clone(&home.worker);
    let driving =
        tokio::spawn(async move { worker.drive(created.lease, &CancellationToken::new()).await });
    let started = home.workspace(&run).join("started");
    until("the command starts", || started.exists()).await;
    until("its sleep runs", || !processes_with(marker).is_empty()).await;

    let service = home.service.clone();
    let cancel_run = run.clone();
    let asked = Instant::now();
    tokio::spawn(async move {
        service
            .cancel(&cancel_run, Some("enough".into()), &actor())
            .await
    })
    .await
    .unwrap()
    .unwrap();
    let outcome = within("the cancelled driver", driving)
        .await
        .unwrap()
        .unwrap();
    let took = asked.elapsed();

    eprintln!("the driver returned {took:?} after the cancellation");
    assert_eq!(outcome, cancelled("cancelled: enough"));
    assert!(took < Duration::from_secs(3), "took {took:?}");
    until("the command is killed", || {
        processes_with(marker).is_empty()
    })
    .await;
    let events = home.events(&run).await;
    assert_eq!(
        types(&events),
        [
            "run_created",
            "model_responded",
            "sandbox_provisioned",
            "tool_started",
            "run_cancelled"
        ]
    );
    assert_eq!(
        events.last().unwrap().kind,
        EventKind::RunCancelled(RunCancelled {
            reason: "enough".into(),
            by: Some("tester".into()),
            via: Some("test".into()),
        })
    );
    assert_not_resumable(&home.worker.acquire(&run).await.unwrap_err());
    let view = home.service.get(&run).await.unwrap();
    assert_eq!(view.summary.status, RunStatus::Cancelled);
    assert!(!view.resumable);
    assert_eq!(home.events(&run).await, events, "something ran on");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_waiting_for_approval_is_cancelled_from_another_process_and_runs_nothing() {
    let home = Home::new().await;
    let agent = home.agent(
        "asker",
        Some(sandbox(ApprovalPolicy::Always)),
        &[calls(vec![bash("touch ran")]), say("not reached")],
    );
    let created = home.create(agent, "ask").await;
    let run = created.run_id.clone();
    let worker = Arc::clone(&home.worker);
    let driving =
        tokio::spawn(async move { worker.drive(created.lease, &CancellationToken::new()).await });
    home.wait_for(&run, "the approval request", |e| {
        matches!(e.kind, EventKind::ApprovalRequested(_))
    })
    .await;
    assert!(home.service.get(&run).await.unwrap().pending.is_some());

    // Another process's service: its own connections to the same database, its own notifier.
    let url = format!("sqlite://{}", home.dir.path().join("toren.db").display());
    let other = RunService::new(
        Arc::new(SqliteStore::open(&url).await.unwrap()),
        ServiceSettings {
            policy: PolicySettings {
                backend: Some("local".into()),
                sandbox_root: home.root.clone(),
                volume: None,
                asks_hosts: true,
            },
            lease_ttl: Duration::from_secs(30),
            follow_poll: Duration::from_millis(100),
            streams: None,
        },
    );
    other.cancel(&run, None, &actor()).await.unwrap();
    let outcome = within("the cancelled driver", driving)
        .await
        .unwrap()
        .unwrap();

    assert_eq!(
        outcome,
        cancelled("cancelled: cancelled by tester via test")
    );
    let events = home.events(&run).await;
    assert_eq!(
        types(&events),
        [
            "run_created",
            "model_responded",
            "approval_requested",
            "run_cancelled"
        ]
    );
    assert!(home.workspace(&run).is_dir());
    assert!(
        !home.workspace(&run).join("ran").exists(),
        "the command ran"
    );
    // A decision that comes too late is refused and runs nothing either.
    let late = home
        .service
        .decide(&run, "call_1", true, None, &actor())
        .await
        .unwrap_err();
    assert!(late.is_refusal(), "{late:?}");
    assert_not_resumable(&home.worker.acquire(&run).await.unwrap_err());
    assert!(!other.get(&run).await.unwrap().resumable);
    assert_eq!(home.events(&run).await, events);
}

#[tokio::test(flavor = "multi_thread")]
async fn cancelling_an_ended_or_unknown_run_is_refused() {
    let home = Home::new().await;
    let agent = home.agent("quick", None, &[say("done")]);
    let (done, outcome) = home.run(agent.clone(), "hi").await;
    assert_eq!(outcome, completed("done"));

    let ended = home
        .service
        .cancel(&done, None, &actor())
        .await
        .unwrap_err();
    assert!(ended.is_refusal(), "{ended:?}");
    assert!(
        matches!(
            ended,
            toren_runtime::Error::Store(toren_store::Error::RunEnded {
                status: RunStatus::Completed,
                ..
            })
        ),
        "{ended:?}"
    );
    assert_eq!(
        types(&home.events(&done).await),
        ["run_created", "model_responded", "run_completed"]
    );

    let unknown = home
        .service
        .cancel(&RunId::new(), None, &actor())
        .await
        .unwrap_err();
    assert!(unknown.is_refusal(), "{unknown:?}");
    assert!(
        matches!(
            unknown,
            toren_runtime::Error::Store(toren_store::Error::RunNotFound(_))
        ),
        "{unknown:?}"
    );

    // A second cancellation of a cancelled run is refused too, and writes nothing.
    let created = home.create(agent, "hi").await;
    home.service
        .cancel(&created.run_id, None, &actor())
        .await
        .unwrap();
    let twice = home
        .service
        .cancel(&created.run_id, None, &actor())
        .await
        .unwrap_err();
    assert!(twice.is_refusal(), "{twice:?}");
    assert_eq!(
        types(&home.events(&created.run_id).await),
        ["run_created", "run_cancelled"]
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_cancelled_run_is_not_resumable() {
    let home = Home::new().await;
    let agent = home.agent("idle", None, &[say("done")]);
    // Created and let go of, never driven: any worker could pick it up.
    let created = home.create(agent, "hi").await;
    let run = created.run_id.clone();
    home.store.release_lease(&created.lease).await.unwrap();
    let before = home.service.get(&run).await.unwrap();
    assert!(before.resumable, "{:?}", before.summary);

    home.service
        .cancel(&run, Some("not needed".into()), &actor())
        .await
        .unwrap();

    let view = home.service.get(&run).await.unwrap();
    assert!(!view.resumable);
    assert_eq!(view.summary.status, RunStatus::Cancelled);
    assert_eq!(view.pending, None);
    let state = view.state.unwrap();
    assert_eq!(
        (state.status, state.error.as_deref()),
        (RunStatus::Cancelled, Some("cancelled: not needed"))
    );
    let listed = home.service.list(10).await.unwrap();
    assert_eq!(listed.len(), 1);
    assert!(!RunService::is_resumable(&listed[0]));
    assert_not_resumable(&home.worker.acquire(&run).await.unwrap_err());
    // Even the lease it was created with cannot drive it any more.
    let driven = home
        .worker
        .drive(created.lease, &CancellationToken::new())
        .await
        .unwrap();
    assert_eq!(driven, cancelled("cancelled: not needed"));
    assert_eq!(
        types(&home.events(&run).await),
        ["run_created", "run_cancelled"]
    );
}
