//! Conformance checks for [`EventLog::decide_approval`]: a decision needs a pending request,
//! the first decision wins, and a refused decision writes nothing.

use toren_protocol::{EventKind, Rewound, RunStatus};

use super::fixtures::{approval_requested, decision, new_run, ok, run_cancelled};
use crate::{Error, EventLog};

pub async fn first_decision_wins(store: &dyn EventLog) {
    let (run_id, _, lease) = new_run(store, "approve me").await;
    ok(
        store
            .append(&lease, 1, vec![approval_requested("toolu_a")])
            .await,
        "request",
    );

    let approve = decision("toolu_a", true, "ana");
    let decided = ok(
        store.decide_approval(&run_id, approve.clone()).await,
        "decide",
    );
    assert_eq!(decided.seq, 3, "the decision takes the next seq");
    assert_eq!(decided.kind, EventKind::ApprovalDecided(approve));
    let log = ok(store.read(&run_id, 0).await, "read");
    assert_eq!(
        log.last(),
        Some(&decided),
        "decide_approval returns what it wrote"
    );

    let change = store
        .decide_approval(&run_id, decision("toolu_a", false, "bo"))
        .await;
    assert!(
        matches!(&change, Err(Error::AlreadyDecided { call_id, approved: true, .. })
            if call_id == "toolu_a"),
        "a second decision must fail with AlreadyDecided (approved), got {change:?}"
    );
    assert_eq!(
        ok(store.read(&run_id, 0).await, "read"),
        log,
        "a refused decision writes nothing"
    );
}

/// A request made after the step a rewind went back to was left behind with its call: a
/// decision on it is refused and writes nothing (the log must keep folding), whereas the
/// same call asked about again after the rewind is decided as usual.
pub async fn a_request_left_behind_by_a_rewind_is_not_decided(store: &dyn EventLog) {
    let (run_id, _, lease) = new_run(store, "rewound while waiting").await;
    let rewound = EventKind::Rewound(Rewound {
        to: 1,
        checkpoint: None,
        by: Some("ana via cli".into()),
        turn: None,
    });
    ok(
        store
            .append(
                &lease,
                1,
                vec![
                    approval_requested("toolu_a"),
                    approval_requested("host:api.example.com"),
                    rewound,
                ],
            )
            .await,
        "request, then rewind",
    );
    for call in ["toolu_a", "host:api.example.com"] {
        let result = store
            .decide_approval(&run_id, decision(call, true, "ana"))
            .await;
        assert!(
            matches!(&result, Err(Error::LeftBehind { run_id: id, call_id, to: 1 })
                if *id == run_id && call_id == call),
            "deciding {call}, left behind by the rewind to step 1, must fail with \
             LeftBehind, got {result:?}"
        );
    }
    let run = ok(store.run(&run_id).await, "run");
    assert_eq!(run.last_seq, 4, "nothing written");
    assert_eq!(
        run.status,
        RunStatus::Running,
        "the rewind left the run running"
    );

    // Asked again on the new line: decided as any request.
    ok(
        store
            .append(&lease, 4, vec![approval_requested("toolu_a")])
            .await,
        "request again",
    );
    let decided = ok(
        store
            .decide_approval(&run_id, decision("toolu_a", false, "ana"))
            .await,
        "decide the new request",
    );
    assert_eq!(decided.seq, 6);
}

/// A host's request made while a tool call ran is decided only until that call completes:
/// after, a decision is refused and writes nothing (the command that asked is over). The
/// same host asked about again in the next call is decided as usual, and so is a request
/// made outside any call whatever completed before it.
pub async fn a_host_request_whose_call_ended_is_not_decided(store: &dyn EventLog) {
    use super::fixtures::{model_wants_bash, tool_completed, tool_started};
    use toren_protocol::HostApprovalRequested;
    let (run_id, _, lease) = new_run(store, "pip install, twice").await;
    let asked = |call: Option<&str>| {
        EventKind::HostApprovalRequested(HostApprovalRequested::new(
            "pypi.org",
            443,
            call.map(|c| (c.to_owned(), "pip install x".to_owned())),
        ))
    };
    ok(
        store
            .append(
                &lease,
                1,
                vec![
                    model_wants_bash("toolu_p", "pip install x"),
                    tool_started("toolu_p"),
                    asked(Some("toolu_p")),
                    tool_completed("toolu_p"),
                ],
            )
            .await,
        "a call asks, then completes",
    );
    for approved in [true, false] {
        let result = store
            .decide_approval(&run_id, decision("host:pypi.org", approved, "ana"))
            .await;
        assert!(
            matches!(&result, Err(Error::CallEnded { run_id: id, call_id, call })
                if *id == run_id && call_id == "host:pypi.org" && call == "toolu_p"),
            "a decision on a request whose call completed must fail with CallEnded, got \
             {result:?}"
        );
    }
    assert_eq!(
        ok(store.run(&run_id).await, "run").last_seq,
        5,
        "nothing written"
    );

    ok(
        store
            .append(
                &lease,
                5,
                vec![
                    model_wants_bash("toolu_q", "pip install x"),
                    tool_started("toolu_q"),
                    asked(Some("toolu_q")),
                ],
            )
            .await,
        "the next call asks again",
    );
    let decided = ok(
        store
            .decide_approval(&run_id, decision("host:pypi.org", true, "ana"))
            .await,
        "decide the new request while its call runs",
    );
    assert_eq!(decided.seq, 9);

    // Outside any call (a process a command left running): no call to end.
    let (run_id, _, lease) = new_run(store, "a server in the background").await;
    ok(
        store
            .append(
                &lease,
                1,
                vec![
                    model_wants_bash("toolu_s", "./serve &"),
                    tool_started("toolu_s"),
                    tool_completed("toolu_s"),
                    asked(None),
                ],
            )
            .await,
        "asked after the call completed, by no call",
    );
    ok(
        store
            .decide_approval(&run_id, decision("host:pypi.org", false, "ana"))
            .await,
        "decide a request of no call",
    );
}

pub async fn decision_without_request_is_refused(store: &dyn EventLog) {
    let (run_id, _, _) = new_run(store, "nothing pending").await;
    let (_, _, other_lease) = new_run(store, "someone else's call").await;
    ok(
        store
            .append(&other_lease, 1, vec![approval_requested("toolu_elsewhere")])
            .await,
        "request",
    );

    for call in ["toolu_unknown", "toolu_elsewhere"] {
        let result = store
            .decide_approval(&run_id, decision(call, true, "ana"))
            .await;
        assert!(
            matches!(&result, Err(Error::NoPendingApproval { run_id: id, call_id })
                if *id == run_id && call_id == call),
            "deciding {call}, which this run never requested, must fail with \
             NoPendingApproval, got {result:?}"
        );
    }
    assert_eq!(
        ok(store.run(&run_id).await, "run").last_seq,
        1,
        "nothing written"
    );
}

pub async fn decision_on_ended_run_is_refused(store: &dyn EventLog) {
    let (run_id, _, lease) = new_run(store, "cancel while waiting").await;
    ok(
        store
            .append(
                &lease,
                1,
                vec![approval_requested("toolu_c"), run_cancelled()],
            )
            .await,
        "end",
    );
    let result = store
        .decide_approval(&run_id, decision("toolu_c", true, "ana"))
        .await;
    assert!(
        matches!(
            &result,
            Err(Error::RunEnded {
                status: RunStatus::Cancelled,
                ..
            })
        ),
        "deciding a call of a cancelled run must fail with RunEnded, got {result:?}"
    );
    assert_eq!(
        ok(store.run(&run_id).await, "run").last_seq,
        3,
        "nothing written"
    );
}

pub async fn pending_calls_are_decided_independently(store: &dyn EventLog) {
    let (run_id, _, lease) = new_run(store, "two calls").await;
    let requests = vec![approval_requested("toolu_1"), approval_requested("toolu_2")];
    ok(store.append(&lease, 1, requests).await, "requests");

    ok(
        store
            .decide_approval(&run_id, decision("toolu_2", false, "ana"))
            .await,
        "deny 2",
    );
    ok(
        store
            .decide_approval(&run_id, decision("toolu_1", true, "ana"))
            .await,
        "approve 1",
    );
    let again = store
        .decide_approval(&run_id, decision("toolu_2", true, "bo"))
        .await;
    assert!(
        matches!(&again, Err(Error::AlreadyDecided { call_id, approved: false, .. })
            if call_id == "toolu_2"),
        "the error must report the recorded decision (denied), got {again:?}"
    );

    let log = ok(store.read(&run_id, 0).await, "read");
    let decided: Vec<(&str, bool)> = log
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ApprovalDecided(d) => Some((d.call_id.as_str(), d.approved)),
            _ => None,
        })
        .collect();
    assert_eq!(
        decided,
        vec![("toolu_2", false), ("toolu_1", true)],
        "one decision per call"
    );
}

/// A log written before call ids were unique within a run may request approval for an id
/// an earlier turn already used and had decided: the decision addresses the latest request,
/// never "already decided" by the older one.
pub async fn a_reused_call_id_is_decided_by_its_latest_request(store: &dyn EventLog) {
    let (run_id, _, lease) = new_run(store, "reused id").await;
    ok(
        store
            .append(&lease, 1, vec![approval_requested("call_1")])
            .await,
        "first request",
    );
    ok(
        store
            .decide_approval(&run_id, decision("call_1", true, "ana"))
            .await,
        "first decision",
    );
    ok(
        store
            .append(&lease, 3, vec![approval_requested("call_1")])
            .await,
        "second request, same id",
    );
    let second = store
        .decide_approval(&run_id, decision("call_1", false, "bo"))
        .await;
    assert!(
        second.is_ok(),
        "the second request of call_1 must be decidable, got {second:?}"
    );
    let again = store
        .decide_approval(&run_id, decision("call_1", true, "cy"))
        .await;
    assert!(
        matches!(
            &again,
            Err(Error::AlreadyDecided {
                approved: false,
                ..
            })
        ),
        "a second decision of the latest request is refused with its decision, got {again:?}"
    );
}

/// A host's approval (`host_approval_requested`) is decided like a call's, by its
/// id `host:<name>`: atomically, first decision wins, with no lease, while the run's
/// driver holds the run (a tool call runs); the request makes the run wait and the
/// decision makes it run again. Racing deciders (two front doors) get one winner.
pub async fn a_host_approval_is_decided_once_by_its_id(store: &dyn EventLog) {
    use toren_protocol::HostApprovalRequested;
    let (run_id, _, lease) = new_run(store, "pip install").await;
    let request = HostApprovalRequested::new(
        "PyPI.org",
        443,
        Some(("toolu_p".into(), "pip install x".into())),
    );
    ok(
        store
            .append(&lease, 1, vec![EventKind::HostApprovalRequested(request)])
            .await,
        "host request",
    );
    assert_eq!(
        ok(store.run(&run_id).await, "run").status,
        RunStatus::AwaitingApproval,
        "a held connection waits for a person"
    );
    // The call id of the bash call that connected is not the approval's id.
    let wrong = store
        .decide_approval(&run_id, decision("toolu_p", true, "ana"))
        .await;
    assert!(
        matches!(wrong, Err(Error::NoPendingApproval { .. })),
        "{wrong:?}"
    );
    let (a, b) = tokio::join!(
        store.decide_approval(&run_id, decision("host:pypi.org", true, "ana")),
        store.decide_approval(&run_id, decision("host:pypi.org", false, "bo")),
    );
    let (won, lost) = match (a, b) {
        (Ok(won), Err(lost)) | (Err(lost), Ok(won)) => (won, lost),
        other => panic!("exactly one of two racing decisions must win, got {other:?}"),
    };
    let EventKind::ApprovalDecided(decided) = &won.kind else {
        panic!("the decision wrote {:?}", won.kind);
    };
    assert!(
        matches!(&lost, Error::AlreadyDecided { call_id, approved, .. }
            if call_id == "host:pypi.org" && *approved == decided.approved),
        "the loser is told the winner's decision, got {lost:?}"
    );
    assert_eq!(won.seq, 3);
    assert_eq!(
        ok(store.run(&run_id).await, "run").status,
        RunStatus::Running
    );
    // The driver's lease still appends (fencing is untouched by a decision), after it.
    ok(
        store
            .append(&lease, 3, vec![super::fixtures::tool_completed("toolu_p")])
            .await,
        "the driver goes on",
    );
}
