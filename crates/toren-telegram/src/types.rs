//! The few Bot API objects the bot reads (`Update`, `Message`, `CallbackQuery`, …), as
//! Telegram sends them; unknown fields are ignored.

use serde::Deserialize;

#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Update {
    pub update_id: i64,
    #[serde(default)]
    pub message: Option<Message>,
    #[serde(default)]
    pub callback_query: Option<CallbackQuery>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct User {
    pub id: i64,
    #[serde(default)]
    pub first_name: String,
    #[serde(default)]
    pub username: Option<String>,
}

impl User {
    /// How the user is named as a decider: `telegram:<id>` and the name when known.
    pub fn decider(&self) -> String {
        match &self.username {
            Some(name) => format!("telegram:{} (@{name})", self.id),
            None => format!("telegram:{}", self.id),
        }
    }
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Chat {
    pub id: i64,
    /// `private`, `group`, `supergroup` or `channel`.
    #[serde(rename = "type")]
    pub kind: String,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct PhotoSize {
    pub file_id: String,
    #[serde(default)]
    pub file_size: Option<u64>,
    #[serde(default)]
    pub width: u32,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Document {
    pub file_id: String,
    #[serde(default)]
    pub file_name: Option<String>,
    #[serde(default)]
    pub file_size: Option<u64>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Message {
    pub message_id: i64,
    pub chat: Chat,
    #[serde(default)]
    pub from: Option<User>,
    #[serde(default)]
    pub text: Option<String>,
    #[serde(default)]
    pub caption: Option<String>,
    #[serde(default)]
    pub photo: Option<Vec<PhotoSize>>,
    #[serde(default)]
    pub document: Option<Document>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct CallbackQuery {
    pub id: String,
    pub from: User,
    #[serde(default)]
    pub message: Option<Message>,
    #[serde(default)]
    pub data: Option<String>,
}

#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct File {
    pub file_id: String,
    #[serde(default)]
    pub file_path: Option<String>,
    #[serde(default)]
    pub file_size: Option<u64>,
}

/// A sent message, as far as the bot needs it.
#[derive(Clone, Debug, Deserialize, PartialEq)]
pub struct Sent {
    pub message_id: i64,
}
