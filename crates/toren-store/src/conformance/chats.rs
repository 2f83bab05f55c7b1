//! Checks of a [`ChatStore`]: offsets only move forward, bindings replace, button ids
//! resolve to what was first stored, a waiting reason is set and cleared. Each check uses
//! fresh names, so other checks may share the store.

use toren_protocol::RunId;

use crate::{ChatButton, ChatStore};

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
