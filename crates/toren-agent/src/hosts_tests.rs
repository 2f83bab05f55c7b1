//! Host approvals in the fold: requested while a bash call runs, decided from anywhere,
//! kept on resume (a fresh fold of the same log), and strict about what does not fit.

use pretty_assertions::assert_eq;
use toren_protocol::{
    ApprovalDecided, ApprovalPolicy, ConnectionOutcome, EgressConnection, EgressConnections,
    EventKind, HostApprovalRequested, RunStatus,
};

use crate::state::tests::{call, completed, created, log, responded, run_tool, started, state};
use crate::{Action, HostApproval, RunState};

fn asked(host: &str) -> EventKind {
    EventKind::HostApprovalRequested(HostApprovalRequested::new(
        host,
        443,
        Some(("c1".into(), "pip install x".into())),
    ))
}

fn decided(id: &str, approved: bool) -> EventKind {
    EventKind::ApprovalDecided(ApprovalDecided {
        call_id: id.into(),
        approved,
        by: "ana".into(),
        via: "api".into(),
        reason: None,
    })
}

fn connections() -> EventKind {
    EventKind::EgressConnections(EgressConnections {
        connections: vec![EgressConnection {
            host: "pypi.org".into(),
            port: 443,
            method: "CONNECT".into(),
            outcome: ConnectionOutcome::Approved,
            reason: None,
            address: Some("151.101.0.223:443".into()),
            bytes_up: 10,
            bytes_down: 20,
            call_id: Some("c1".into()),
        }],
    })
}

/// A run whose bash call c1 runs.
fn running() -> Vec<EventKind> {
    vec![
        created(ApprovalPolicy::Never),
        responded("", vec![call("c1", "bash")]),
        started("c1", 1),
    ]
}

#[test]
fn a_host_asked_about_mid_call_waits_and_the_call_still_awaits_its_result() {
    let mut kinds = running();
    kinds.push(asked("PyPI.org"));
    let s = state(kinds.clone());
    assert_eq!(s.status, RunStatus::AwaitingApproval);
    assert_eq!(
        s.host_approval("pypi.org"),
        Some(&HostApproval {
            request: HostApprovalRequested::new(
                "pypi.org",
                443,
                Some(("c1".into(), "pip install x".into()))
            ),
            decision: None,
            open: true,
        })
    );
    // Nothing new to do for the call: its result is what the run waits for (a resumed
    // run re-runs it as the next attempt, and the proxy then waits on the same request).
    assert!(s.awaits_result("c1"));
    assert_eq!(s.next_action(), run_tool(call("c1", "bash"), 2));

    kinds.push(decided("host:pypi.org", true));
    kinds.push(connections());
    kinds.push(completed("c1", "installed"));
    let s = state(kinds);
    assert_eq!(s.status, RunStatus::Running);
    assert_eq!(s.host_approval("PYPI.ORG").unwrap().decision, Some(true));
    assert!(!s.awaits_result("c1"));
    assert!(matches!(s.next_action(), Action::CallModel { .. }));
}

#[test]
fn a_host_decision_leaves_the_run_waiting_on_what_else_is_open() {
    // Two hosts of one command: the run waits until both are decided.
    let mut kinds = running();
    kinds.extend([asked("a.org"), asked("b.org"), decided("host:b.org", false)]);
    assert_eq!(state(kinds.clone()).status, RunStatus::AwaitingApproval);
    kinds.push(decided("host:a.org", true));
    assert_eq!(state(kinds).status, RunStatus::Running);

    // Killed while a.org waited; the re-run asks first (`on_interrupt: ask`). The host's
    // decision leaves the run waiting on the call's, as the stores keep its status.
    let mut kinds = running();
    kinds.extend([
        asked("a.org"),
        EventKind::ApprovalRequested(crate::state::tests::request(
            &call("c1", "bash"),
            "pip install x",
            2,
        )),
        decided("host:a.org", true),
    ]);
    assert_eq!(state(kinds.clone()).status, RunStatus::AwaitingApproval);
    kinds.push(decided("c1", true));
    assert_eq!(state(kinds).status, RunStatus::Running);
}

#[test]
fn decisions_survive_a_fresh_fold_and_a_denied_host_stays_denied() {
    let mut kinds = running();
    kinds.extend([
        asked("pypi.org"),
        decided("host:pypi.org", true),
        asked("evil.org"),
        decided("host:evil.org", false),
        asked("slow.org"),
    ]);
    let s = RunState::from_events(&log(kinds)).unwrap();
    let decisions: Vec<(&str, Option<bool>)> = s
        .host_approvals()
        .map(|a| (a.request.host.as_str(), a.decision))
        .collect();
    assert_eq!(
        decisions,
        vec![
            ("evil.org", Some(false)),
            ("pypi.org", Some(true)),
            ("slow.org", None)
        ]
    );
    assert_eq!(s.host_approval("never.org"), None);
}

fn asked_in(host: &str, call: &str) -> EventKind {
    EventKind::HostApprovalRequested(HostApprovalRequested::new(
        host,
        443,
        Some((call.into(), "pip install x".into())),
    ))
}

#[test]
fn a_request_whose_call_completed_unanswered_is_closed_and_the_host_is_asked_about_again() {
    let mut kinds = running();
    kinds.extend([asked("a.org"), completed("c1", "connection refused")]);
    let s = state(kinds.clone());
    assert!(!s.host_approval("a.org").unwrap().open);
    assert_eq!(s.status, RunStatus::Running, "nothing holds the run");

    // The next command reaches the host: a request of its own, open, decided as usual.
    kinds.extend([
        responded("", vec![call("c2", "bash")]),
        started("c2", 1),
        asked_in("a.org", "c2"),
    ]);
    let s = state(kinds.clone());
    let approval = s.host_approval("a.org").unwrap();
    assert!(approval.open);
    assert_eq!(approval.request.call_id.as_deref(), Some("c2"));
    kinds.push(decided("host:a.org", true));
    let s = state(kinds);
    assert_eq!(s.host_approval("a.org").unwrap().decision, Some(true));

    // A request that was decided stays decided when its call completes.
    let mut kinds = running();
    kinds.extend([
        asked("b.org"),
        decided("host:b.org", false),
        completed("c1", "refused"),
    ]);
    let s = state(kinds);
    let approval = s.host_approval("b.org").unwrap();
    assert_eq!((approval.decision, approval.open), (Some(false), true));
}

#[test]
fn a_request_a_rewind_left_behind_is_closed_and_the_host_is_asked_about_again() {
    let rewound = |to| {
        EventKind::Rewound(toren_protocol::Rewound {
            to,
            checkpoint: None,
            by: None,
            turn: None,
        })
    };
    // created 1, responded 2, started 3, asked 4; back to step 2 (c1 not started yet).
    let mut kinds = running();
    kinds.extend([asked("a.org"), rewound(2)]);
    let s = state(kinds.clone());
    assert!(!s.host_approval("a.org").unwrap().open);
    kinds.extend([started("c1", 1), asked("a.org")]);
    let s = state(kinds.clone());
    assert!(s.host_approval("a.org").unwrap().open);
    kinds.push(decided("host:a.org", true));
    assert_eq!(
        state(kinds).host_approval("a.org").unwrap().decision,
        Some(true)
    );
}

#[test]
fn what_does_not_fit_is_a_corrupt_log() {
    let cases: Vec<(Vec<EventKind>, &str)> = vec![
        (
            vec![asked("a.org"), asked("a.org")],
            "host:a.org already waits for a decision",
        ),
        (
            vec![asked("a.org"), decided("host:a.org", true), asked("a.org")],
            "host:a.org was already decided",
        ),
        (
            vec![decided("host:a.org", true)],
            "no host approval host:a.org was requested",
        ),
        (
            vec![
                asked("a.org"),
                decided("host:a.org", true),
                decided("host:a.org", false),
            ],
            "host:a.org was already decided",
        ),
        (
            vec![EventKind::HostApprovalRequested(HostApprovalRequested {
                id: "host:b.org".into(),
                ..HostApprovalRequested::new("a.org", 443, None)
            })],
            "host approval host:b.org is not named after its host a.org",
        ),
    ];
    for (tail, why) in cases {
        let mut kinds = running();
        kinds.extend(tail);
        let error = RunState::from_events(&log(kinds)).unwrap_err().to_string();
        assert!(error.ends_with(why), "{error} / {why}");
    }
}

#[test]
fn a_call_id_that_looks_like_a_host_approval_is_given_one_of_torens() {
    let s = state(vec![created(ApprovalPolicy::Never)]);
    let admitted = s.admit(toren_protocol::AssistantMessage {
        text: String::new(),
        tool_calls: vec![call("host:pypi.org", "bash")],
    });
    assert_eq!(admitted.tool_calls[0].id, "toren_1_1");
    assert_eq!(
        admitted.tool_calls[0].wire_id.as_deref(),
        Some("host:pypi.org")
    );
    // And the conversation still folds once it is journaled.
    let s = state(vec![
        created(ApprovalPolicy::Never),
        EventKind::ModelResponded(toren_protocol::ModelResponded {
            message: admitted,
            stop_reason: "tool_use".into(),
            usage: Default::default(),
            model: "m".into(),
        }),
    ]);
    assert!(s.awaits_result("toren_1_1"));
}
