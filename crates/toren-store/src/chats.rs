//! [`ChatStore`]: the durable state of a chat front door (the Telegram bot): where its
//! update stream stands (the offset), which session each chat talks to, what each short
//! button id stands for, a chat's "deny with reason" waiting for its reason, the strangers
//! told once that the bot is not for them, and the files a channel delivered (by run and
//! call). Which messages were taken already is the [`SessionStore`](crate::SessionStore)'s
//! (`create_turn_keyed`, `enqueue_keyed`: the key in the same write as the turn); this
//! store reads it ([`ChatStore::message_taken`]) and takes keys of messages that make no
//! turn ([`ChatStore::take_message_key`]).
//!
//! Rules every backend keeps: an offset only moves forward (a lower one is ignored, so a
//! late writer cannot make a bot handle updates again); a button id, once stored, always
//! resolves to the same target; binding a chat again replaces its session (the old session
//! is kept by the session store).

use async_trait::async_trait;
use toren_protocol::RunId;

use crate::Result;

/// What an approval button stands for: the call of a run, and the message that shows it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ChatButton {
    pub run_id: RunId,
    pub call_id: String,
    /// The chat, as the front door names it (a Telegram chat id).
    pub chat: String,
    /// The message the buttons are under.
    pub message_id: i64,
}

#[async_trait]
pub trait ChatStore: Send + Sync {
    /// The stored offset of the update stream `stream` (e.g. `telegram:<bot id>`), 0 when
    /// none is stored.
    async fn chat_offset(&self, stream: &str) -> Result<i64>;

    /// Stores `offset` for `stream` if it is higher than the stored one.
    async fn advance_chat_offset(&self, stream: &str, offset: i64) -> Result<()>;

    /// The session (by name) `chat` talks to, if it is bound.
    async fn chat_session(&self, chat: &str) -> Result<Option<String>>;

    /// Binds `chat` to the session `session` (replacing an earlier binding).
    async fn bind_chat(&self, chat: &str, session: &str) -> Result<()>;

    /// Stores what the button id `id` stands for. Storing the same id again keeps the first.
    async fn put_chat_button(&self, id: &str, button: &ChatButton) -> Result<()>;

    /// What the button id `id` stands for.
    async fn chat_button(&self, id: &str) -> Result<Option<ChatButton>>;

    /// Records that `chat`'s next message is the reason for denying the button `id`
    /// (`None`: nothing waits).
    async fn set_chat_reason(&self, chat: &str, id: Option<&str>) -> Result<()>;

    /// The button whose denial waits for `chat`'s next message as its reason.
    async fn chat_reason(&self, chat: &str) -> Result<Option<String>>;

    /// Whether the message `key` was taken already (as a turn, queued, or by
    /// [`ChatStore::take_message_key`]).
    async fn message_taken(&self, key: &str) -> Result<bool>;

    /// Takes the message `key` for a message that makes no turn (a reason, a command);
    /// whether it was free. With `reason_of` (a chat), that chat's waiting reason is
    /// cleared in the same write.
    async fn take_message_key(&self, key: &str, reason_of: Option<&str>) -> Result<bool>;

    /// Records that the stranger `key` was told once; whether this was the first time.
    async fn refuse_once(&self, key: &str) -> Result<bool>;

    /// The receipt of the file delivered for `call_id` of `run`, if one was.
    async fn chat_delivery(&self, run: &RunId, call_id: &str) -> Result<Option<String>>;

    /// Records the receipt of a delivery; a second record of the same call keeps the first.
    async fn record_chat_delivery(&self, run: &RunId, call_id: &str, receipt: &str) -> Result<()>;
}
