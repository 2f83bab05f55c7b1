//! Conformance checks of the [`SessionStore`] every backend with sessions must pass: unique
//! names, one turn at a time (atomically with the turn's run, also when two front doors
//! start a turn at once), turn numbers, the recorded conversation, the queue, and removal
//! that keeps the turns' runs. Each check makes sessions of its own (fresh names), so
//! checks can share one store; [`run_all_sessions`](super::run_all_sessions) runs them all.

use std::sync::Arc;
use std::time::Duration;

use toren_protocol::{AgentSpec, EventKind, Message, RunCompleted, RunCreated, RunId, SessionTurn};

use super::fixtures::{AGENT, ok, run_created};
use crate::{Error, EventLog, Session, SessionStore};

const TTL: Duration = Duration::from_secs(60);

/// What a backend with sessions is: both stores in one.
pub trait LogAndSessions: EventLog + SessionStore {}
impl<T: EventLog + SessionStore + ?Sized> LogAndSessions for T {}

fn agent() -> AgentSpec {
    run_created("").agent
}

/// A session with a name no other check uses (`prefix` plus a fresh suffix).
fn session(prefix: &str) -> Session {
    let unique = RunId::new();
    let suffix = unique.as_str().trim_start_matches("run_");
    let name = format!("{prefix}-{suffix}");
    Session {
        id: format!("ses_{name}"),
        name,
        agent: agent(),
        policy: None,
        created_at: jiff::Timestamp::now(),
    }
}

fn turn_input(text: &str) -> RunCreated {
    let mut created = run_created(text);
    created.policy = None;
    created
}

fn user(text: &str) -> Message {
    Message::User { text: text.into() }
}

pub async fn session_names_are_unique_and_sessions_round_trip(store: &dyn LogAndSessions) {
    let alpha = session("alpha");
    ok(store.create_session(&alpha).await, "create_session");
    let again = store.create_session(&alpha).await;
    assert!(
        matches!(&again, Err(Error::SessionExists(n)) if *n == alpha.name),
        "a taken name is SessionExists: {again:?}"
    );
    let got = ok(store.session(&alpha.name).await, "session");
    assert_eq!(got.id, alpha.id, "a session reads back as created");
    assert_eq!(got.agent, alpha.agent, "its agent spec is pinned");
    assert_eq!(got.policy, None);
    assert_eq!(
        got.created_at, alpha.created_at,
        "its creation time round-trips"
    );
    let missing = store.session("no-such-session").await;
    assert!(
        matches!(&missing, Err(Error::SessionNotFound(n)) if n == "no-such-session"),
        "{missing:?}"
    );
    let beta = session("beta");
    ok(store.create_session(&beta).await, "create_session");
    let names: Vec<String> = ok(store.sessions().await, "sessions")
        .into_iter()
        .map(|s| s.name)
        .filter(|n| *n == alpha.name || *n == beta.name)
        .collect();
    assert_eq!(
        names,
        vec![beta.name.clone(), alpha.name.clone()],
        "sessions are listed newest first"
    );
}

pub async fn turns_never_interleave_and_are_numbered_in_order(store: &dyn LogAndSessions) {
    let s = session("turns");
    ok(store.create_session(&s).await, "create_session");
    let first = RunId::new();
    let (event, lease, turn) = ok(
        store
            .create_turn(&s.id, &first, turn_input("one"), "h", TTL)
            .await,
        "create_turn",
    );
    assert_eq!(turn, 1, "the first turn is 1");
    let EventKind::RunCreated(created) = &event.kind else {
        panic!("a turn starts with run_created: {event:?}")
    };
    assert_eq!(
        created.session,
        Some(SessionTurn {
            id: s.id.clone(),
            name: s.name.clone(),
            turn: 1
        }),
        "the store fills in the turn"
    );
    assert_eq!(created.agent.name, AGENT);
    let second = RunId::new();
    let refused = store
        .create_turn(&s.id, &second, turn_input("two"), "h", TTL)
        .await;
    assert!(
        matches!(&refused, Err(Error::TurnInProgress { turn: 1, run_id, .. }) if *run_id == first),
        "no second turn while the first runs: {refused:?}"
    );
    assert!(
        matches!(store.run(&second).await, Err(Error::RunNotFound(_))),
        "a refused turn writes no run"
    );
    ok(
        store
            .append(
                &lease,
                1,
                vec![EventKind::RunCompleted(RunCompleted {
                    output: "ok".into(),
                })],
            )
            .await,
        "append",
    );
    let (_, _, turn) = ok(
        store
            .create_turn(&s.id, &second, turn_input("two"), "h", TTL)
            .await,
        "create_turn",
    );
    assert_eq!(turn, 2, "once the first ended, the next turn is 2");
    let turns: Vec<(u32, RunId)> = ok(store.turns(&s.id).await, "turns")
        .into_iter()
        .map(|t| (t.turn, t.run_id))
        .collect();
    assert_eq!(turns, vec![(1, first), (2, second)]);
    let missing = store
        .create_turn("ses_none", &RunId::new(), turn_input("x"), "h", TTL)
        .await;
    assert!(
        matches!(missing, Err(Error::SessionNotFound(_))),
        "a turn of an unknown session: {missing:?}"
    );
}

/// Front doors starting a turn of one session at the same moment: exactly one gets it.
pub async fn racing_turns_get_one_winner(store: &Arc<dyn LogAndSessions>) {
    const RACERS: usize = 8;
    let s = session("race");
    ok(store.create_session(&s).await, "create_session");
    let barrier = Arc::new(tokio::sync::Barrier::new(RACERS));
    let mut tasks = tokio::task::JoinSet::new();
    for racer in 0..RACERS {
        let (store, barrier, id) = (Arc::clone(store), Arc::clone(&barrier), s.id.clone());
        tasks.spawn(async move {
            barrier.wait().await;
            let run = RunId::new();
            let got = store
                .create_turn(&id, &run, turn_input(&format!("racer {racer}")), "h", TTL)
                .await;
            (run, got)
        });
    }
    let mut winners = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (run, got) = joined.unwrap_or_else(|e| panic!("a racer panicked: {e}"));
        match got {
            Ok((_, _, turn)) => winners.push((turn, run)),
            Err(Error::TurnInProgress { .. }) => {
                assert!(
                    matches!(store.run(&run).await, Err(Error::RunNotFound(_))),
                    "a losing racer wrote no run"
                );
            }
            Err(e) => panic!("a racing turn failed otherwise: {e}"),
        }
    }
    assert_eq!(winners.len(), 1, "one racer gets the turn: {winners:?}");
    let turns = ok(store.turns(&s.id).await, "turns");
    assert_eq!(turns.len(), 1);
    assert_eq!((turns[0].turn, &turns[0].run_id), (1, &winners[0].1));
}

pub async fn the_conversation_is_recorded_once_per_turn_and_read_in_order(
    store: &dyn LogAndSessions,
) {
    let s = session("conversation");
    ok(store.create_session(&s).await, "create_session");
    ok(
        store
            .record_turn_messages(&s.id, 1, &[user("a"), user("b")])
            .await,
        "record",
    );
    ok(
        store.record_turn_messages(&s.id, 2, &[user("c")]).await,
        "record",
    );
    ok(
        store.record_turn_messages(&s.id, 1, &[user("other")]).await,
        "recording a turn again",
    );
    let all = ok(store.conversation(&s.id, 3).await, "conversation");
    assert_eq!(
        all,
        vec![(1, user("a")), (1, user("b")), (2, user("c"))],
        "a turn is recorded once and read in order"
    );
    let before_two = ok(store.conversation(&s.id, 2).await, "conversation");
    assert_eq!(before_two, vec![(1, user("a")), (1, user("b"))]);
    assert_eq!(
        ok(store.recorded_turns(&s.id).await, "recorded_turns"),
        vec![1, 2]
    );
}

pub async fn the_queue_is_first_in_first_out(store: &dyn LogAndSessions) {
    let s = session("queue");
    ok(store.create_session(&s).await, "create_session");
    assert_eq!(ok(store.enqueue(&s.id, "first").await, "enqueue"), 1);
    assert_eq!(ok(store.enqueue(&s.id, "second").await, "enqueue"), 2);
    assert_eq!(
        ok(store.dequeue(&s.id).await, "dequeue").as_deref(),
        Some("first")
    );
    assert_eq!(ok(store.enqueue(&s.id, "third").await, "enqueue"), 2);
    assert_eq!(
        ok(store.dequeue(&s.id).await, "dequeue").as_deref(),
        Some("second")
    );
    assert_eq!(
        ok(store.dequeue(&s.id).await, "dequeue").as_deref(),
        Some("third")
    );
    assert_eq!(ok(store.dequeue(&s.id).await, "dequeue"), None);
}

pub async fn removing_a_session_keeps_its_runs(store: &dyn LogAndSessions) {
    let s = session("removed");
    ok(store.create_session(&s).await, "create_session");
    let run = RunId::new();
    ok(
        store
            .create_turn(&s.id, &run, turn_input("hi"), "h", TTL)
            .await,
        "create_turn",
    );
    ok(store.enqueue(&s.id, "later").await, "enqueue");
    ok(
        store.record_turn_messages(&s.id, 1, &[user("hi")]).await,
        "record",
    );
    let removed = ok(store.remove_session(&s.name).await, "remove_session");
    assert_eq!(removed.id, s.id);
    assert!(matches!(
        store.session(&s.name).await,
        Err(Error::SessionNotFound(_))
    ));
    assert!(store.run(&run).await.is_ok(), "the turn's run and log stay");
    ok(store.create_session(&s).await, "the name is free again");
    assert_eq!(
        ok(store.turns(&s.id).await, "turns"),
        vec![],
        "no turns of the removed session"
    );
    assert_eq!(
        ok(store.conversation(&s.id, 9).await, "conversation"),
        vec![]
    );
    assert_eq!(ok(store.dequeue(&s.id).await, "dequeue"), None);
    let missing = store.remove_session(&s.name).await;
    assert!(missing.is_ok(), "the new one is removed: {missing:?}");
    assert!(matches!(
        store.remove_session(&s.name).await,
        Err(Error::SessionNotFound(_))
    ));
}

/// A queued message becomes the next turn in one write ([`SessionStore::start_next_queued`]):
/// not while a turn runs, once when it has ended (the message off the queue and the turn's
/// run made together), and a second caller finds the turn made, not a second one.
pub async fn a_queued_message_becomes_exactly_one_turn(store: &dyn LogAndSessions) {
    let s = session("next-queued");
    ok(store.create_session(&s).await, "create_session");
    let none = ok(
        store
            .start_next_queued(&s.id, &RunId::new(), turn_input(""), "h", TTL)
            .await,
        "start_next_queued",
    );
    assert!(none.is_none(), "nothing queued, nothing started: {none:?}");
    assert_eq!(ok(store.queued(&s.id).await, "queued"), 0);
    let first = RunId::new();
    let (_, lease, _) = ok(
        store
            .create_turn(&s.id, &first, turn_input("one"), "h", TTL)
            .await,
        "create_turn",
    );
    ok(store.enqueue(&s.id, "later").await, "enqueue");
    // The peek counts what waits and takes nothing: asked twice, the same.
    assert_eq!(ok(store.queued(&s.id).await, "queued"), 1);
    assert_eq!(ok(store.queued(&s.id).await, "queued"), 1);
    let early = RunId::new();
    let refused = store
        .start_next_queued(&s.id, &early, turn_input(""), "h", TTL)
        .await;
    assert!(
        matches!(&refused, Err(Error::TurnInProgress { turn: 1, .. })),
        "no queued turn while one runs: {refused:?}"
    );
    assert!(
        matches!(store.run(&early).await, Err(Error::RunNotFound(_))),
        "a refused start writes no run"
    );
    ok(
        store
            .append(
                &lease,
                1,
                vec![EventKind::RunCompleted(RunCompleted {
                    output: "ok".into(),
                })],
            )
            .await,
        "append",
    );
    let second = RunId::new();
    let started = ok(
        store
            .start_next_queued(&s.id, &second, turn_input("ignored"), "h2", TTL)
            .await,
        "start_next_queued",
    )
    .unwrap_or_else(|| panic!("the queued message is started once the turn ended"));
    assert_eq!((started.turn, started.text.as_str()), (2, "later"));
    assert_eq!(started.key, None);
    assert_eq!(
        ok(store.queued(&s.id).await, "queued"),
        0,
        "taken off the queue"
    );
    assert_eq!(
        started.lease.run_id, second,
        "the caller holds the new turn"
    );
    assert_eq!(started.lease.holder, "h2");
    let EventKind::RunCreated(created) = &started.event.kind else {
        panic!("a turn starts with run_created: {:?}", started.event)
    };
    assert_eq!(created.input, "later", "the message is the turn's input");
    assert_eq!(
        created.session.as_ref().map(|t| t.turn),
        Some(2),
        "the store fills in the turn"
    );
    assert_eq!(
        ok(store.read(&second, 0).await, "read"),
        vec![started.event.clone()],
        "the turn's run is made with it"
    );
    // A second caller (e.g. after the first died holding the new turn) starts nothing: the
    // message is the turn (running, resumable), no longer queued.
    let again = store
        .start_next_queued(&s.id, &RunId::new(), turn_input(""), "h", TTL)
        .await;
    assert!(
        matches!(&again, Ok(None)),
        "the second caller finds nothing waiting: {again:?}"
    );
    ok(
        store
            .append(
                &started.lease,
                1,
                vec![EventKind::RunCompleted(RunCompleted {
                    output: "ok".into(),
                })],
            )
            .await,
        "append",
    );
    let after = ok(
        store
            .start_next_queued(&s.id, &RunId::new(), turn_input(""), "h", TTL)
            .await,
        "start_next_queued",
    );
    assert!(after.is_none(), "the message was taken once: {after:?}");
    let turns: Vec<(u32, RunId)> = ok(store.turns(&s.id).await, "turns")
        .into_iter()
        .map(|t| (t.turn, t.run_id))
        .collect();
    assert_eq!(turns, vec![(1, first), (2, second)], "one turn per message");
    assert_eq!(ok(store.dequeue(&s.id).await, "dequeue"), None);
}

/// Front doors starting the one queued message at the same moment: one turn, and the
/// message is gone from the queue.
pub async fn racing_starts_of_a_queued_message_make_one_turn(store: &Arc<dyn LogAndSessions>) {
    const RACERS: usize = 8;
    let s = session("queued-race");
    ok(store.create_session(&s).await, "create_session");
    ok(store.enqueue(&s.id, "waited").await, "enqueue");
    let barrier = Arc::new(tokio::sync::Barrier::new(RACERS));
    let mut tasks = tokio::task::JoinSet::new();
    for _ in 0..RACERS {
        let (store, barrier, id) = (Arc::clone(store), Arc::clone(&barrier), s.id.clone());
        tasks.spawn(async move {
            barrier.wait().await;
            let run = RunId::new();
            let got = store
                .start_next_queued(&id, &run, turn_input(""), "h", TTL)
                .await;
            (run, got)
        });
    }
    let mut winners = Vec::new();
    while let Some(joined) = tasks.join_next().await {
        let (run, got) = joined.unwrap_or_else(|e| panic!("a racer panicked: {e}"));
        match got {
            Ok(Some(started)) => winners.push((started.turn, run, started.text)),
            Ok(None) | Err(Error::TurnInProgress { .. }) => assert!(
                matches!(store.run(&run).await, Err(Error::RunNotFound(_))),
                "a losing racer wrote no run"
            ),
            Err(e) => panic!("a racing start failed otherwise: {e}"),
        }
    }
    assert_eq!(winners.len(), 1, "one racer starts it: {winners:?}");
    assert_eq!((winners[0].0, winners[0].2.as_str()), (1, "waited"));
    assert_eq!(ok(store.turns(&s.id).await, "turns").len(), 1);
    assert_eq!(ok(store.dequeue(&s.id).await, "dequeue"), None);
}
