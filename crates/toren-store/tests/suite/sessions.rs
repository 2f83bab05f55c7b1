//! The session store on SQLite: unique names, one turn at a time (atomically with the
//! turn's run), turn numbers, the recorded conversation, the queue, and removal that keeps
//! the turns' runs.

use std::time::Duration;

use pretty_assertions::assert_eq;
use toren_protocol::{AgentSpec, EventKind, Message, RunCompleted, RunCreated, RunId, SessionTurn};
use toren_store::{Error, EventLog, Session, SessionStore};

use super::common::temp_store;

const TTL: Duration = Duration::from_secs(60);

fn agent() -> AgentSpec {
    AgentSpec {
        budget: None,
        name: "coder".into(),
        model: "scripted/s.yaml".into(),
        instructions: None,
        sandbox: None,
        max_turns: 5,
        context_tokens: None,
        source: None,
    }
}

fn session(name: &str) -> Session {
    Session {
        id: format!("ses_{name}"),
        name: name.into(),
        agent: agent(),
        policy: None,
        created_at: jiff::Timestamp::now(),
    }
}

fn turn_input(text: &str) -> RunCreated {
    RunCreated {
        agent: agent(),
        policy: None,
        input: text.into(),
        session: None,
        channel: None,
        start: None,
    }
}

fn user(text: &str) -> Message {
    Message::User { text: text.into() }
}

#[tokio::test]
async fn names_are_unique_and_sessions_round_trip() {
    let (_dir, store) = temp_store().await;
    store.create_session(&session("alpha")).await.unwrap();
    let again = store.create_session(&session("alpha")).await;
    assert!(matches!(again, Err(Error::SessionExists(n)) if n == "alpha"));
    let got = store.session("alpha").await.unwrap();
    assert_eq!((got.id.as_str(), got.agent), ("ses_alpha", agent()));
    assert!(matches!(
        store.session("nope").await,
        Err(Error::SessionNotFound(n)) if n == "nope"
    ));
    store.create_session(&session("beta")).await.unwrap();
    let mut names: Vec<String> = store
        .sessions()
        .await
        .unwrap()
        .into_iter()
        .map(|s| s.name)
        .collect();
    names.sort();
    assert_eq!(names, vec!["alpha".to_owned(), "beta".to_owned()]);
}

#[tokio::test]
async fn turns_never_interleave_and_are_numbered_in_order() {
    let (_dir, store) = temp_store().await;
    store.create_session(&session("s")).await.unwrap();
    let first = RunId::new();
    let (event, lease, turn) = store
        .create_turn("ses_s", &first, turn_input("one"), "h", TTL)
        .await
        .unwrap();
    assert_eq!(turn, 1);
    let EventKind::RunCreated(created) = &event.kind else {
        panic!("{event:?}")
    };
    assert_eq!(
        created.session,
        Some(SessionTurn {
            id: "ses_s".into(),
            name: "s".into(),
            turn: 1
        })
    );
    // While turn 1 runs, no second turn.
    let second = RunId::new();
    let refused = store
        .create_turn("ses_s", &second, turn_input("two"), "h", TTL)
        .await;
    assert!(
        matches!(&refused, Err(Error::TurnInProgress { turn: 1, run_id, .. }) if *run_id == first),
        "{refused:?}"
    );
    assert!(
        matches!(store.run(&second).await, Err(Error::RunNotFound(_))),
        "a refused turn writes no run"
    );
    // Once it ended, the next turn is 2.
    store
        .append(
            &lease,
            1,
            vec![EventKind::RunCompleted(RunCompleted {
                output: "ok".into(),
            })],
        )
        .await
        .unwrap();
    let (_, _, turn) = store
        .create_turn("ses_s", &second, turn_input("two"), "h", TTL)
        .await
        .unwrap();
    assert_eq!(turn, 2);
    let turns: Vec<(u32, RunId)> = store
        .turns("ses_s")
        .await
        .unwrap()
        .into_iter()
        .map(|t| (t.turn, t.run_id))
        .collect();
    assert_eq!(turns, vec![(1, first), (2, second)]);
}

#[tokio::test]
async fn the_conversation_is_recorded_once_per_turn_and_read_in_order() {
    let (_dir, store) = temp_store().await;
    store.create_session(&session("c")).await.unwrap();
    store
        .record_turn_messages("ses_c", 1, &[user("a"), user("b")])
        .await
        .unwrap();
    store
        .record_turn_messages("ses_c", 2, &[user("c")])
        .await
        .unwrap();
    // Recording a turn again changes nothing.
    store
        .record_turn_messages("ses_c", 1, &[user("other")])
        .await
        .unwrap();
    let all = store.conversation("ses_c", 3).await.unwrap();
    assert_eq!(all, vec![(1, user("a")), (1, user("b")), (2, user("c"))]);
    let before_two = store.conversation("ses_c", 2).await.unwrap();
    assert_eq!(before_two, vec![(1, user("a")), (1, user("b"))]);
}

#[tokio::test]
async fn the_queue_is_first_in_first_out() {
    let (_dir, store) = temp_store().await;
    store.create_session(&session("q")).await.unwrap();
    assert_eq!(store.enqueue("ses_q", "first").await.unwrap(), 1);
    assert_eq!(store.enqueue("ses_q", "second").await.unwrap(), 2);
    assert_eq!(
        store.dequeue("ses_q").await.unwrap().as_deref(),
        Some("first")
    );
    assert_eq!(
        store.dequeue("ses_q").await.unwrap().as_deref(),
        Some("second")
    );
    assert_eq!(store.dequeue("ses_q").await.unwrap(), None);
}

#[tokio::test]
async fn removing_a_session_keeps_its_runs() {
    let (_dir, store) = temp_store().await;
    store.create_session(&session("r")).await.unwrap();
    let run = RunId::new();
    store
        .create_turn("ses_r", &run, turn_input("hi"), "h", TTL)
        .await
        .unwrap();
    store.enqueue("ses_r", "later").await.unwrap();
    let removed = store.remove_session("r").await.unwrap();
    assert_eq!(removed.id, "ses_r");
    assert!(matches!(
        store.session("r").await,
        Err(Error::SessionNotFound(_))
    ));
    assert!(store.run(&run).await.is_ok(), "the turn's run and log stay");
    // The name is free again.
    store.create_session(&session("r")).await.unwrap();
    assert_eq!(store.turns("ses_r").await.unwrap(), vec![]);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 4)]
async fn the_session_conformance_suite() {
    let (_dir, store) = temp_store().await;
    toren_store::conformance::run_all_sessions(std::sync::Arc::new(store)).await;
}
