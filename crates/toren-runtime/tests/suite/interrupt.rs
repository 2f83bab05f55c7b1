//! `sandbox.on_interrupt: ask`: a bash call that was started and never completed (its
//! driver dropped mid-command, as a killed process leaves it) becomes, when the run is
//! driven again, an approval request for attempt 2 that says so; nothing runs before the
//! decision. Approving runs the command once more; denying tells the model that the
//! command was interrupted and not run again.

use std::sync::Arc;

use tokio_util::sync::CancellationToken;
use toren_agent::INTERRUPTED_NOTE;
use toren_protocol::{
    ApprovalPolicy, ApprovalRequested, EventKind, Message, OnInterrupt, RunId, SandboxSpec,
    ToolResult,
};
use toren_worker::Outcome;

use super::support::{
    Home, actor, assert_gap_free, bash, calls, completed, processes_with, results, sandbox, say,
    types, until, within,
};

/// Runs `command` once (the first time it sleeps on `marker`).
fn command(marker: &str) -> String {
    format!("echo ran >> runs; if [ ! -e once ]; then touch once; sleep {marker}; fi")
}

/// A run of an `on_interrupt: ask` agent whose bash call was started and never completed,
/// now driven again (in the returned task) and waiting for a decision on attempt 2.
async fn interrupted(
    home: &Home,
    marker: &str,
) -> (
    RunId,
    tokio::task::JoinHandle<Result<Outcome, toren_worker::Error>>,
) {
    let agent = home.agent(
        "careful",
        Some(SandboxSpec {
            checkpoints: Default::default(),
            on_interrupt: OnInterrupt::Ask,
            ..sandbox(ApprovalPolicy::Never)
        }),
        &[calls(vec![bash(&command(marker))]), say("done")],
    );
    let created = home.create(agent, "go").await;
    let run = created.run_id.clone();
    let once = home.workspace(&run).join("once");
    {
        let stop = CancellationToken::new();
        tokio::select! {
            outcome = home.worker.drive(created.lease, &stop) => panic!("ended: {outcome:?}"),
            () = async {
                until("the command starts", || once.exists()).await;
                until("its sleep runs", || !processes_with(marker).is_empty()).await;
            } => {}
        }
        // The driver is dropped mid-command: nothing more is written, as after a SIGKILL.
    }
    until("the command is killed", || {
        processes_with(marker).is_empty()
    })
    .await;
    let worker = Arc::clone(&home.worker);
    let lease = worker.acquire(&run).await.unwrap();
    let driving = tokio::spawn(async move { worker.drive(lease, &CancellationToken::new()).await });

    let asked = home
        .wait_for(&run, "the request to run it again", |e| {
            matches!(e.kind, EventKind::ApprovalRequested(_))
        })
        .await;
    let request = ApprovalRequested {
        call_id: "call_1".into(),
        tool: "bash".into(),
        command: command(marker),
        attempt: 2,
    };
    assert_eq!(asked.kind, EventKind::ApprovalRequested(request.clone()));
    assert_eq!(home.service.get(&run).await.unwrap().pending, Some(request));
    // Nothing ran again before the decision.
    assert_eq!(
        types(&home.events(&run).await),
        [
            "run_created",
            "model_responded",
            "sandbox_provisioned",
            "tool_started",
            "approval_requested"
        ]
    );
    assert_eq!(runs(home, &run), "ran\n");
    (run, driving)
}

fn runs(home: &Home, run: &RunId) -> String {
    std::fs::read_to_string(home.workspace(run).join("runs")).unwrap()
}

fn attempts(events: &[toren_protocol::Event]) -> Vec<u32> {
    events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolStarted(s) => Some(s.attempt),
            _ => None,
        })
        .collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn an_interrupted_command_asks_and_runs_once_more_when_approved() {
    let home = Home::new().await;
    let (run, driving) = interrupted(&home, "3031.25").await;

    home.service
        .decide(&run, "call_1", true, None, &actor())
        .await
        .unwrap();
    let outcome = within("the approved run", driving).await.unwrap().unwrap();

    assert_eq!(outcome, completed("done"));
    assert_eq!(runs(&home, &run), "ran\nran\n");
    let events = home.events(&run).await;
    assert_gap_free(&events);
    assert_eq!(
        types(&events)[4..],
        [
            "approval_requested",
            "approval_decided",
            "tool_started",
            "tool_completed",
            "model_responded",
            "run_completed"
        ]
    );
    assert_eq!(attempts(&events), [1, 2]);
    assert_eq!(
        results(&events)["call_1"].output,
        format!("{INTERRUPTED_NOTE}\n(no output)\n[exit code: 0]")
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn a_denied_interrupted_command_is_not_run_again_and_the_model_is_told() {
    let home = Home::new().await;
    let (run, driving) = interrupted(&home, "3032.25").await;

    home.service
        .decide(
            &run,
            "call_1",
            false,
            Some("it may have sent the mail".into()),
            &actor(),
        )
        .await
        .unwrap();
    let outcome = within("the denied run", driving).await.unwrap().unwrap();

    assert_eq!(outcome, completed("done"));
    assert_eq!(runs(&home, &run), "ran\n", "the denied command ran again");
    let events = home.events(&run).await;
    assert_gap_free(&events);
    assert_eq!(attempts(&events), [1]);
    let result = &results(&events)["call_1"];
    let told = "This command was interrupted mid-execution by a restart, so it may already have \
                had some of its effects; the human chose not to run it again. Their reason: it \
                may have sent the mail.\nAdjust your approach.";
    assert_eq!((result.is_error, result.output.as_str()), (true, told));
    // The model's next request carries exactly that as the call's result.
    let requests = home.requests_of("careful");
    assert_eq!(requests.len(), 2);
    assert_eq!(
        requests[1].messages.last(),
        Some(&Message::ToolResults {
            results: vec![ToolResult {
                call_id: "call_1".into(),
                content: told.into(),
                is_error: true,
            }]
        })
    );
}
