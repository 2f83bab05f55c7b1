//! A worker that parks approvals (as `toren serve`'s pool does) lets go of a run that
//! waits for a human instead of waiting with it: the run holds no lease while it waits and
//! is driven again, by any worker, once the decision is in the log. A worker told to drain
//! finishes the command it is running, journals it, and stops before the next step.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use toren_protocol::{ApprovalPolicy, RunStatus};
use toren_runtime::RunService;
use toren_worker::Outcome;

use super::support::{
    Home, Options, actor, assert_gap_free, bash, calls, completed, results, say, types, until,
    within,
};

#[tokio::test(flavor = "multi_thread")]
async fn a_run_waiting_for_a_human_is_let_go_of_and_driven_again_after_the_decision() {
    let home = Home::with(Options {
        park_approvals: true,
        ..Options::default()
    })
    .await;
    let agent = home.agent(
        "asker",
        Some(super::support::sandbox(ApprovalPolicy::Always)),
        &[calls(vec![bash("echo ran >> trace")]), say("done")],
    );
    let created = home.create(agent, "go").await;
    let run = created.run_id.clone();

    let outcome = within(
        "the parked drive",
        home.worker.drive(created.lease, &CancellationToken::new()),
    )
    .await
    .unwrap();

    assert_eq!(
        outcome,
        Outcome::AwaitingApproval {
            call_id: "call_1".into()
        }
    );
    let summary = home.service.summary(&run).await.unwrap();
    assert_eq!(summary.status, RunStatus::AwaitingApproval);
    assert!(summary.lease.is_none(), "still held: {:?}", summary.lease);
    assert!(!home.workspace(&run).join("trace").exists());
    // Driven again before anyone decided: it parks again, writing nothing.
    let before = home.events(&run).await;
    let again = home.resume(&run).await;
    assert!(
        matches!(again, Outcome::AwaitingApproval { .. }),
        "{again:?}"
    );
    assert_eq!(home.events(&run).await, before);

    home.service
        .decide(&run, "call_1", true, None, &actor())
        .await
        .unwrap();
    let summary = home.service.summary(&run).await.unwrap();
    assert_ne!(summary.status, RunStatus::AwaitingApproval);
    assert!(RunService::is_resumable(&summary));
    let outcome = within("the run after the decision", home.resume(&run)).await;

    assert_eq!(outcome, completed("done"));
    let events = home.events(&run).await;
    assert_gap_free(&events);
    assert_eq!(
        types(&events),
        [
            "run_created",
            "model_responded",
            "approval_requested",
            "approval_decided",
            "sandbox_provisioned",
            "tool_started",
            "tool_completed",
            "model_responded",
            "run_completed",
        ]
    );
    let trace = std::fs::read_to_string(home.workspace(&run).join("trace")).unwrap();
    assert_eq!(trace, "ran\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn a_draining_worker_finishes_the_running_command_and_stops_before_the_next_step() {
    let home = Home::new().await;
    let agent = home.agent(
        "slow",
        Some(super::support::sandbox(ApprovalPolicy::Never)),
        &[
            calls(vec![bash("touch started; sleep 1; echo finished")]),
            say("done"),
        ],
    );
    let created = home.create(agent, "go").await;
    let run = created.run_id.clone();
    let (drain, stop) = (CancellationToken::new(), CancellationToken::new());
    let worker = Arc::clone(&home.worker);
    let driving = {
        let (drain, stop) = (drain.clone(), stop.clone());
        tokio::spawn(async move { worker.drive_draining(created.lease, &drain, &stop).await })
    };
    let started = home.workspace(&run).join("started");
    until("the command starts", || started.exists()).await;

    drain.cancel();
    let outcome = within("the drained driver", driving)
        .await
        .unwrap()
        .unwrap();

    assert_eq!(outcome, Outcome::Interrupted);
    let events = home.events(&run).await;
    assert_eq!(
        types(&events).last(),
        Some(&"tool_completed"),
        "{:?}",
        types(&events)
    );
    assert_eq!(
        results(&events)["call_1"].output,
        "finished\n[exit code: 0]"
    );
    // Not ended, not held: the next worker asks for the model's answer and completes it.
    let view = home.service.get(&run).await.unwrap();
    assert!(view.resumable);
    assert_eq!(home.resume(&run).await, completed("done"));
    assert_eq!(home.requests_of("slow").len(), 2);
}
