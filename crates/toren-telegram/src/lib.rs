//! The Telegram front door: chat with a sandbox agent from a phone.
//!
//! [`Bot`] long-polls the Bot API (`bot.rs`), binds each chat to a session of the run
//! service, and drives each message's turn with a worker of its own process; the reply is
//! one message edited as it streams (`turn.rs`), rendered for Telegram (`render.rs`:
//! visible, escaped, split at 4096 characters). Bash approvals are posted with buttons whose
//! short ids are resolved in the [`ChatStore`](toren_store::ChatStore), so a press from
//! before a restart still works. [`TelegramChannels`] is the channel `send_to_channel` uses
//! for runs bound to a chat (`channel.rs`). [`BotApi`] is the hand-written client
//! (`api.rs`); no URL, which holds the token, is ever shown.

mod api;
mod bot;
mod channel;
mod error;
pub mod render;
mod turn;
pub mod types;

pub use api::{BotApi, DEFAULT_API_URL, MAX_RETRY_AFTER, Upload, bot_id};
pub use bot::{AgentFinder, Bot, BotSettings};
pub use channel::{
    CAPTION_LIMIT, DOCUMENT_LIMIT, PHOTO_LIMIT, TELEGRAM, TelegramChannel, TelegramChannels,
    caption_text,
};
pub use error::{Error, Result};
pub use turn::Turns;
