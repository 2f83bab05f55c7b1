//! Checks of a [`ChatStore`]: offsets only move forward, bindings replace, button ids
//! resolve to what was first stored, a waiting reason is set and cleared; a message key
//! makes one turn or one queued message at most, in the same write (also when two handle
//! it at once), and a key taken without a turn clears the chat's reason with it; a
//! stranger is refused once; a delivery's receipt keeps its first record. Each check uses
//! fresh names, so other checks may share the store.

use std::sync::Arc;
use std::time::Duration;

use toren_protocol::RunId;

use super::fixtures::{ok, run_created};
use super::sessions::LogAndSessions;
use crate::{ChatButton, ChatStore, Error, Session};

/// What a chat front door's backend is: the log, sessions and the chat store in one.
pub trait ChatBackend: LogAndSessions + ChatStore {}
impl<T: LogAndSessions + ChatStore + ?Sized> ChatBackend for T {}

const TTL: Duration = Duration::from_secs(60);

fn fresh(prefix: &str) -> String {
    format!("{prefix}-{}", RunId::new())
}

/// A stored offset only ever grows; a stream never written starts at 0.
pub async fn chat_offsets_only_move_forward(store: &dyn ChatStore) {
    let stream = fresh("telegram");
    assert_eq!(
        store.chat_offset(&stream).await.ok(),
        Some(0),
        "a new stream starts at 0"
    );
    for (write, expect) in [(5, 5), (9, 9), (7, 9), (10, 10)] {
        assert!(store.advance_chat_offset(&stream, write).await.is_ok());
        assert_eq!(
            store.chat_offset(&stream).await.ok(),
            Some(expect),
            "after writing {write} the offset must be {expect} (it never goes back)"
        );
    }
    assert_eq!(
        store.chat_offset(&fresh("other")).await.ok(),
        Some(0),
        "streams are separate"
    );
}

/// Binding a chat again replaces its session; unbound chats have none.
pub async fn chat_bindings_replace(store: &dyn ChatStore) {
    let chat = fresh("chat");
    assert_eq!(store.chat_session(&chat).await.ok(), Some(None));
    assert!(store.bind_chat(&chat, "first").await.is_ok());
    assert!(store.bind_chat(&fresh("chat"), "elsewhere").await.is_ok());
    assert_eq!(
        store.chat_session(&chat).await.ok(),
        Some(Some("first".to_owned()))
    );
    assert!(store.bind_chat(&chat, "second").await.is_ok());
    assert_eq!(
        store.chat_session(&chat).await.ok(),
        Some(Some("second".to_owned())),
        "binding again replaces the session"
    );
}

/// A button id resolves to what was stored first, even when stored again.
pub async fn chat_buttons_resolve_to_the_first_target(store: &dyn ChatStore) {
    let id = fresh("b");
    assert_eq!(store.chat_button(&id).await.ok(), Some(None));
    let button = ChatButton {
        run_id: RunId::new(),
        call_id: "call_1".to_owned(),
        chat: "12345".to_owned(),
        message_id: 77,
    };
    assert!(store.put_chat_button(&id, &button).await.is_ok());
    let other = ChatButton {
        call_id: "call_2".to_owned(),
        ..button.clone()
    };
    assert!(store.put_chat_button(&id, &other).await.is_ok());
    assert_eq!(
        store.chat_button(&id).await.ok(),
        Some(Some(button)),
        "a button id keeps its first target"
    );
}

/// A reason waits for a chat until cleared.
pub async fn chat_reasons_are_set_and_cleared(store: &dyn ChatStore) {
    let chat = fresh("chat");
    assert_eq!(store.chat_reason(&chat).await.ok(), Some(None));
    assert!(store.set_chat_reason(&chat, Some("b1")).await.is_ok());
    assert!(store.set_chat_reason(&chat, Some("b2")).await.is_ok());
    assert_eq!(
        store.chat_reason(&chat).await.ok(),
        Some(Some("b2".to_owned()))
    );
    assert!(store.set_chat_reason(&chat, None).await.is_ok());
    assert_eq!(store.chat_reason(&chat).await.ok(), Some(None));
}

fn chat_session(prefix: &str) -> Session {
    let unique = RunId::new();
    let name = format!("{prefix}-{}", unique.as_str().trim_start_matches("run_"));
    Session {
        id: format!("ses_{name}"),
        name,
        agent: run_created("").agent,
        policy: None,
        created_at: jiff::Timestamp::now(),
    }
}

fn turn(text: &str) -> toren_protocol::RunCreated {
    let mut created = run_created(text);
    created.policy = None;
    created
}

/// A message key makes one turn at most: the same key again, as a turn or queued, is
/// `MessageTaken` and writes nothing; a refused turn (one is running) does not take it.
pub async fn a_message_key_makes_one_turn(store: &dyn ChatBackend) {
    let s = chat_session("keyed");
    ok(store.create_session(&s).await, "create_session");
    let key = fresh("telegram:1");
    assert_eq!(store.message_taken(&key).await.ok(), Some(false));
    let first = RunId::new();
    let (_, lease, _) = ok(
        store
            .create_turn_keyed(&s.id, &first, turn("hi"), "h", TTL, Some(&key))
            .await,
        "create_turn_keyed",
    );
    assert_eq!(
        store.message_taken(&key).await.ok(),
        Some(true),
        "the key is taken with the turn"
    );
    ok(
        store
            .append(&lease, 1, vec![super::fixtures::run_completed()])
            .await,
        "end the first turn",
    );
    let again = store
        .create_turn_keyed(&s.id, &RunId::new(), turn("hi"), "h", TTL, Some(&key))
        .await;
    assert!(
        matches!(&again, Err(Error::MessageTaken { key: k }) if *k == key),
        "the same key makes no second turn: {again:?}"
    );
    let queued = store.enqueue_keyed(&s.id, "hi", Some(&key)).await;
    assert!(
        matches!(queued, Err(Error::MessageTaken { .. })),
        "nor a queued message: {queued:?}"
    );
    assert_eq!(
        ok(store.turns(&s.id).await, "turns").len(),
        1,
        "one turn for the key"
    );
    assert_eq!(
        ok(store.dequeue(&s.id).await, "dequeue"),
        None,
        "nothing queued"
    );

    // A turn refused because one is running takes no key; queueing it then does.
    let running = RunId::new();
    ok(
        store
            .create_turn_keyed(&s.id, &running, turn("two"), "h", TTL, None)
            .await,
        "create_turn",
    );
    let other = fresh("telegram:1");
    let refused = store
        .create_turn_keyed(&s.id, &RunId::new(), turn("three"), "h", TTL, Some(&other))
        .await;
    assert!(
        matches!(refused, Err(Error::TurnInProgress { .. })),
        "{refused:?}"
    );
    assert_eq!(
        store.message_taken(&other).await.ok(),
        Some(false),
        "a refused turn takes no key"
    );
    assert_eq!(
        ok(
            store.enqueue_keyed(&s.id, "three", Some(&other)).await,
            "enqueue_keyed"
        ),
        1
    );
    let twice = store.enqueue_keyed(&s.id, "three", Some(&other)).await;
    assert!(
        matches!(twice, Err(Error::MessageTaken { .. })),
        "{twice:?}"
    );
    assert_eq!(
        ok(store.dequeue(&s.id).await, "dequeue").as_deref(),
        Some("three")
    );
    assert_eq!(
        ok(store.dequeue(&s.id).await, "dequeue"),
        None,
        "queued once"
    );
}

/// A message queued with a key keeps it when it becomes a turn
/// ([`SessionStore::start_next_queued`](crate::SessionStore::start_next_queued)): the
/// turn says the key, the key stays taken, and the same message again makes no turn.
pub(super) async fn a_queued_key_stays_with_its_turn(store: &dyn ChatBackend) {
    let s = chat_session("queued-key");
    ok(store.create_session(&s).await, "create_session");
    let running = RunId::new();
    let (_, lease, _) = ok(
        store
            .create_turn_keyed(&s.id, &running, turn("one"), "h", TTL, None)
            .await,
        "create_turn",
    );
    let key = fresh("telegram:queued");
    ok(
        store.enqueue_keyed(&s.id, "two", Some(&key)).await,
        "enqueue_keyed",
    );
    ok(
        store
            .append(&lease, 1, vec![super::fixtures::run_completed()])
            .await,
        "end the first turn",
    );
    let next = RunId::new();
    let started = ok(
        store
            .start_next_queued(&s.id, &next, turn(""), "h", TTL)
            .await,
        "start_next_queued",
    )
    .unwrap_or_else(|| panic!("the queued message starts"));
    assert_eq!(started.text, "two");
    assert_eq!(
        started.key.as_deref(),
        Some(key.as_str()),
        "the turn keeps the key"
    );
    assert_eq!(store.message_taken(&key).await.ok(), Some(true));
    let again = store
        .create_turn_keyed(&s.id, &RunId::new(), turn("two"), "h", TTL, Some(&key))
        .await;
    assert!(
        matches!(&again, Err(Error::MessageTaken { .. })),
        "the message handled again makes no turn: {again:?}"
    );
    let queued = store.enqueue_keyed(&s.id, "two", Some(&key)).await;
    assert!(
        matches!(queued, Err(Error::MessageTaken { .. })),
        "nor a queued message: {queued:?}"
    );
    assert_eq!(ok(store.turns(&s.id).await, "turns").len(), 2);
}

/// Two handlers of the same message at once: one turn, the other finds the key taken.
pub async fn racing_handlers_of_one_message_make_one_turn(store: Arc<dyn ChatBackend>) {
    let mut sessions = Vec::new();
    for _ in 0..2 {
        let s = chat_session("race");
        ok(store.create_session(&s).await, "create_session");
        sessions.push(s);
    }
    let key = fresh("telegram:race");
    let mut tasks = Vec::new();
    for s in sessions.clone() {
        let store = Arc::clone(&store);
        let key = key.clone();
        tasks.push(tokio::spawn(async move {
            store
                .create_turn_keyed(&s.id, &RunId::new(), turn("hi"), "h", TTL, Some(&key))
                .await
                .map(|_| ())
        }));
    }
    let mut made = 0;
    for task in tasks {
        match task.await {
            Ok(Ok(())) => made += 1,
            Ok(Err(Error::MessageTaken { .. })) => {}
            other => panic!("a racer failed otherwise: {other:?}"),
        }
    }
    assert_eq!(made, 1, "one turn for one message key");
}

/// A key taken without a turn (a reason, a command) is taken once and clears the chat's
/// waiting reason in the same write.
pub async fn a_key_taken_without_a_turn_clears_the_reason(store: &dyn ChatStore) {
    let chat = fresh("chat");
    let key = fresh("telegram:2");
    assert!(store.set_chat_reason(&chat, Some("b1")).await.is_ok());
    assert_eq!(
        store.take_message_key(&key, Some(&chat)).await.ok(),
        Some(true)
    );
    assert_eq!(
        store.chat_reason(&chat).await.ok(),
        Some(None),
        "cleared with it"
    );
    assert_eq!(store.message_taken(&key).await.ok(), Some(true));
    assert!(store.set_chat_reason(&chat, Some("b2")).await.is_ok());
    assert_eq!(
        store.take_message_key(&key, Some(&chat)).await.ok(),
        Some(false),
        "taken once"
    );
    assert_eq!(
        store.chat_reason(&chat).await.ok(),
        Some(Some("b2".to_owned())),
        "a refused take clears nothing"
    );
    assert_eq!(
        store.take_message_key(&fresh("k"), None).await.ok(),
        Some(true)
    );
}

/// A stranger is refused once; a delivery keeps its first receipt.
pub async fn strangers_are_refused_once_and_deliveries_kept(store: &dyn ChatStore) {
    let stranger = fresh("user");
    assert_eq!(store.refuse_once(&stranger).await.ok(), Some(true));
    assert_eq!(store.refuse_once(&stranger).await.ok(), Some(false));
    assert_eq!(store.refuse_once(&fresh("user")).await.ok(), Some(true));
    let run = RunId::new();
    assert_eq!(store.chat_delivery(&run, "call_1").await.ok(), Some(None));
    assert!(
        store
            .record_chat_delivery(&run, "call_1", "telegram:1/5")
            .await
            .is_ok()
    );
    assert!(
        store
            .record_chat_delivery(&run, "call_1", "telegram:1/6")
            .await
            .is_ok()
    );
    assert_eq!(
        store.chat_delivery(&run, "call_1").await.ok(),
        Some(Some("telegram:1/5".to_owned())),
        "the first receipt stands"
    );
    assert_eq!(store.chat_delivery(&run, "call_2").await.ok(), Some(None));
    assert_eq!(
        store.chat_delivery(&RunId::new(), "call_1").await.ok(),
        Some(None)
    );
}
