//! Driving and replaying: a run driven to its end through `service.create` and
//! `worker.drive` folds back into the same state from its log; a run stopped mid-command
//! (its driver cancelled, or its drive future dropped) is driven again from its log and
//! completes without asking for a model answer or running a completed call again (I-2,
//! I-3), and the interrupted command is killed, not left running.

use std::time::{Duration, Instant};

use serde_json::json;
use tokio_util::sync::CancellationToken;
use toren_agent::{Action, INTERRUPTED_NOTE, RunState};
use toren_protocol::{ApprovalPolicy, EventKind, RunStatus};
use toren_worker::Outcome;

use super::support::{
    Home, Options, WAIT, assert_gap_free, bash, calls, completed, processes_with, results, say,
    tool, types, until, within,
};

#[tokio::test(flavor = "multi_thread")]
async fn a_run_is_driven_to_its_end_and_its_log_folds_into_the_same_state() {
    let home = Home::new().await;
    let agent = home.agent(
        "writer",
        Some(super::support::sandbox(ApprovalPolicy::Never)),
        &[
            calls(vec![tool(
                "write_file",
                json!({"path": "note.txt", "content": "hello\n"}),
            )]),
            calls(vec![bash("cat note.txt; echo more >> note.txt")]),
            say("done"),
        ],
    );
    let (run, outcome) = home.run(agent, "write a note").await;

    assert_eq!(outcome, completed("done"));
    let events = home.events(&run).await;
    assert_eq!(
        types(&events),
        [
            "run_created",
            "model_responded",
            "sandbox_provisioned",
            "tool_started",
            "tool_completed",
            "model_responded",
            "tool_started",
            "tool_completed",
            "model_responded",
            "run_completed",
        ]
    );
    assert_gap_free(&events);
    let results = results(&events);
    assert!(!results["call_1"].is_error, "{:?}", results["call_1"]);
    assert_eq!(results["call_2"].output, "hello\n[exit code: 0]");
    let note = std::fs::read_to_string(home.workspace(&run).join("note.txt")).unwrap();
    assert_eq!(note, "hello\nmore\n");
    // One model request per answer in the log.
    assert_eq!(home.requests_of("writer").len(), 3);

    // Replay: the whole log folded at once, event by event, and by the service, is one
    // state, and it says the run is over.
    let state = RunState::from_events(&events).unwrap();
    let mut stepwise = RunState::from_events(&events[..1]).unwrap();
    for event in &events[1..] {
        stepwise.apply(event).unwrap();
    }
    assert_eq!(stepwise, state);
    assert_eq!(
        (state.status, state.output.as_deref(), state.last_seq),
        (RunStatus::Completed, Some("done"), events.len() as u64)
    );
    assert_eq!(
        state.next_action(),
        Action::Finished {
            status: RunStatus::Completed
        }
    );
    let view = home.service.get(&run).await.unwrap();
    assert_eq!(view.state.as_ref(), Some(&state));
    assert!(!view.resumable);
    assert_eq!(view.pending, None);
    // An ended run is not driven again.
    let again = home.worker.acquire(&run).await.unwrap_err();
    assert!(
        matches!(
            again,
            toren_worker::Error::Store(toren_store::Error::RunEnded { .. })
        ),
        "{again:?}"
    );
    assert_eq!(home.events(&run).await, events);
}

/// The second call's command runs long the first time only (it leaves `once` behind).
fn interruptible(home: &Home, marker: &str) -> toren_protocol::AgentSpec {
    home.agent(
        "interrupted",
        Some(super::support::sandbox(ApprovalPolicy::Never)),
        &[
            calls(vec![bash("echo one >> trace")]),
            calls(vec![bash(&format!(
                "echo two >> trace; if [ ! -e once ]; then touch once; sleep {marker}; fi"
            ))]),
            say("done"),
        ],
    )
}

/// After a stop mid-way through call 2, the run is driven again from its log: call 1 is
/// not run again, call 2 is run again as attempt 2 with the note, and only the missing
/// model answer is asked for.
async fn resumes_after_the_stop(home: &Home, run: &toren_protocol::RunId) {
    let stopped = home.events(run).await;
    assert_eq!(
        types(&stopped),
        [
            "run_created",
            "model_responded",
            "sandbox_provisioned",
            "tool_started",
            "tool_completed",
            "model_responded",
            "tool_started",
        ]
    );
    assert_eq!(home.requests_of("interrupted").len(), 2);

    let outcome = within("the resumed run", home.resume(run)).await;

    assert_eq!(outcome, completed("done"));
    let events = home.events(run).await;
    assert_gap_free(&events);
    assert_eq!(
        events[..stopped.len()],
        stopped[..],
        "the log was rewritten"
    );
    let starts: Vec<(String, u32)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolStarted(s) => Some((s.call_id.clone(), s.attempt)),
            _ => None,
        })
        .collect();
    assert_eq!(
        starts,
        [
            ("call_1".to_owned(), 1),
            ("call_2".to_owned(), 1),
            ("call_2".to_owned(), 2)
        ]
    );
    let trace = std::fs::read_to_string(home.workspace(run).join("trace")).unwrap();
    assert_eq!(trace, "one\ntwo\ntwo\n", "call 1 ran again, or call 2 not");
    let results = results(&events);
    assert_eq!(
        results["call_2"].output,
        format!("{INTERRUPTED_NOTE}\n(no output)\n[exit code: 0]")
    );
    // Three answers in the log, three requests in all: none was asked for twice.
    let answers = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ModelResponded(_)))
        .count();
    assert_eq!((answers, home.requests_of("interrupted").len()), (3, 3));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_run_stopped_mid_command_is_driven_again_without_repeating_completed_calls() {
    let home = Home::new().await;
    let marker = "3011.25";
    let created = home.create(interruptible(&home, marker), "go").await;
    let run = created.run_id.clone();
    let stop = CancellationToken::new();
    let worker = std::sync::Arc::clone(&home.worker);
    let driving = {
        let stop = stop.clone();
        tokio::spawn(async move { worker.drive(created.lease, &stop).await })
    };
    let once = home.workspace(&run).join("once");
    until("call 2's command starts", || once.exists()).await;
    until("its sleep runs", || !processes_with(marker).is_empty()).await;

    stop.cancel();
    let outcome = within("the stopped driver", driving)
        .await
        .unwrap()
        .unwrap();

    assert_eq!(outcome, Outcome::Interrupted);
    until("the stopped command is killed", || {
        processes_with(marker).is_empty()
    })
    .await;
    // Stopped, not ended: nobody holds it, and any worker may pick it up.
    let view = home.service.get(&run).await.unwrap();
    assert_eq!(view.summary.status, RunStatus::Running);
    assert!(view.resumable, "{:?}", view.summary.lease);
    resumes_after_the_stop(&home, &run).await;
}

#[tokio::test(flavor = "multi_thread")]
async fn a_dropped_drive_kills_its_command_and_stops_holding_the_run() {
    // A short lease: a driver dropped without a word must stop renewing it, so that the
    // run's lease lapses and another process may take it.
    let ttl = Duration::from_secs(1);
    let home = Home::with(Options {
        lease_ttl: ttl,
        ..Options::default()
    })
    .await;
    let marker = "3012.25";
    let created = home.create(interruptible(&home, marker), "go").await;
    let run = created.run_id.clone();
    let once = home.workspace(&run).join("once");
    {
        let stop = CancellationToken::new();
        let drive = home.worker.drive(created.lease, &stop);
        tokio::select! {
            outcome = drive => panic!("the run ended: {outcome:?}"),
            () = async {
                until("call 2's command starts", || once.exists()).await;
                until("its sleep runs", || !processes_with(marker).is_empty()).await;
            } => {}
        }
        // The drive future is dropped here, as a front door drops a request it gave up.
    }
    until("the dropped command is killed", || {
        processes_with(marker).is_empty()
    })
    .await;
    let dropped = Instant::now();
    loop {
        let summary = home.store.run(&run).await.unwrap();
        match &summary.lease {
            Some(lease) if lease.is_live(jiff::Timestamp::now()) => {}
            _ => break,
        }
        assert!(
            dropped.elapsed() < WAIT,
            "the dropped driver still renews the lease of run {run} after {:?} (ttl {ttl:?}): \
             its heartbeat was left running",
            dropped.elapsed()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    // Another process takes it over (lease expired) and drives it from its log.
    let other = home
        .store
        .acquire_lease(&run, "other-host/1/1/boot=x/pidns=y/timens=z", ttl)
        .await
        .unwrap();
    home.store.release_lease(&other).await.unwrap();
    resumes_after_the_stop(&home, &run).await;
}
