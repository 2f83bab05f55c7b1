//! [`ChatStore`]: the durable state of a chat front door (the Telegram bot): where its
//! update stream stands (the offset), which session each chat talks to, what each short
//! button id stands for, and a chat's "deny with reason" waiting for its reason.
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
}
