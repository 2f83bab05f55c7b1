//! Channels: how a file the agent sends reaches the person.
//!
//! A run may be bound to a channel (`ChannelBinding` in its `run_created`): a chat
//! session's turns to the terminal, later a Telegram chat. The `send_to_channel` tool reads
//! a workspace file and hands it to the run's [`Channel`] as a [`Delivery`]; the channel
//! says what the person got ([`Delivered`]), and the worker journals it as
//! `message_delivered`. A delivery carries the run and call ids as an idempotency key, so a
//! call re-run after a crash (between the delivery and its journal entry) is recognised and
//! answered with the first delivery instead of sending the file twice.
//!
//! The worker finds a run's channel through a [`ChannelFactory`] ([`NoChannels`] by
//! default; [`Channels`] combines one factory per kind). The [`TerminalChannel`] copies the
//! file into a downloads directory, never overwriting, and announces it on stderr. This
//! crate depends on no other part of the runtime, so a new channel (Telegram) is a new
//! implementation of the trait and nothing else changes.

mod channel;
mod delivery;
mod error;
mod terminal;

pub use channel::{Channel, ChannelFactory, Channels, NoChannels};
pub use delivery::{Delivered, Delivery, FileKind, ImageFormat};
pub use error::ChannelError;
pub use terminal::{Announce, Announcement, TERMINAL, TerminalChannel, TerminalChannels};
