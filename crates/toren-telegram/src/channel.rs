//! The Telegram channel: `send_to_channel` on a run bound to a Telegram chat sends an image
//! (by content: PNG, JPEG, GIF, WebP) with `sendPhoto` and anything else with
//! `sendDocument`, with the caption. Telegram's limits (10 MB for a photo, 50 MB for a
//! document) are checked first and refused with a tool error that names them. The caption
//! and the file's name are made visible (`toren-display`) and the caption cut to Telegram's
//! 1024 characters; they go as plain text (no parse mode), so tags are shown, never
//! parsed. The store's delivery ledger ([`ChatStore::chat_delivery`], by run and call,
//! written as soon as Telegram has the file) answers a call run again after a crash with
//! its first delivery instead of sending twice; `message_delivered` in the event log is
//! not enough for that, as it is journaled with the call's `tool_completed`, after the
//! send, and a crash between the two re-runs the call. Telegram out of reach is a tool
//! error, never a failed run.

use std::sync::Arc;

use async_trait::async_trait;
use toren_channel::{Channel, ChannelError, ChannelFactory, Delivered, Delivery, FileKind};
use toren_display::{visible, visible_lines};
use toren_protocol::{ChannelBinding, RunId};
use toren_store::ChatStore;

use crate::api::{BotApi, Upload};

/// The channel's kind, as bindings name it.
pub const TELEGRAM: &str = "telegram";
/// Telegram's limit on a photo.
pub const PHOTO_LIMIT: u64 = 10 * 1024 * 1024;
/// Telegram's limit on a document a bot sends.
pub const DOCUMENT_LIMIT: u64 = 50 * 1024 * 1024;
/// Telegram's limit on a caption, in characters.
pub const CAPTION_LIMIT: usize = 1024;

/// Makes the channel of each Telegram-bound run.
#[derive(Clone)]
pub struct TelegramChannels {
    api: BotApi,
    ledger: Arc<dyn ChatStore>,
}

impl TelegramChannels {
    /// Sends through `api`; deliveries are recorded in `ledger`.
    pub fn new(api: BotApi, ledger: Arc<dyn ChatStore>) -> Self {
        Self { api, ledger }
    }
}

impl ChannelFactory for TelegramChannels {
    fn channel(
        &self,
        _run: &RunId,
        binding: &ChannelBinding,
    ) -> Result<Arc<dyn Channel>, ChannelError> {
        let chat = binding
            .address
            .parse::<i64>()
            .map_err(|_| ChannelError::BadAddress {
                kind: TELEGRAM.to_owned(),
                address: binding.address.clone(),
                why: "a Telegram chat id is a whole number",
            })?;
        Ok(Arc::new(TelegramChannel {
            api: self.api.clone(),
            ledger: Arc::clone(&self.ledger),
            chat,
        }))
    }
}

/// One chat's channel.
pub struct TelegramChannel {
    api: BotApi,
    ledger: Arc<dyn ChatStore>,
    chat: i64,
}

impl std::fmt::Debug for TelegramChannel {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TelegramChannel")
            .field("api", &self.api)
            .field("chat", &self.chat)
            .finish_non_exhaustive()
    }
}

/// A caption as Telegram shows it: visible, at most [`CAPTION_LIMIT`] characters.
pub fn caption_text(caption: &str) -> String {
    let shown = visible_lines(caption);
    if shown.chars().count() <= CAPTION_LIMIT {
        return shown.into_owned();
    }
    let mut cut: String = shown.chars().take(CAPTION_LIMIT - 1).collect();
    cut.push('…');
    cut
}

fn megabytes(bytes: u64) -> String {
    // Display only: precision loss is irrelevant at these sizes.
    #[expect(clippy::cast_precision_loss, reason = "a size shown to one decimal")]
    let mb = bytes as f64 / (1024.0 * 1024.0);
    format!("{mb:.1} MB")
}

#[async_trait]
impl Channel for TelegramChannel {
    fn name(&self) -> &str {
        TELEGRAM
    }

    async fn deliver(&self, delivery: &Delivery) -> Result<Delivered, ChannelError> {
        let (run, call) = (delivery.run_id(), delivery.call_id());
        let recorded =
            self.ledger
                .chat_delivery(run, call)
                .await
                .map_err(|e| ChannelError::Unreachable {
                    channel: TELEGRAM.to_owned(),
                    why: format!("cannot read the delivery ledger: {e}"),
                })?;
        if let Some(receipt) = recorded {
            return Ok(Delivered {
                receipt,
                summary: format!(
                    "already sent to the person's Telegram chat ({})",
                    delivery.kind()
                ),
                repeated: true,
            });
        }
        let size = delivery.len();
        let (method, field, media_type, what) = match delivery.kind() {
            FileKind::Image(format) => {
                if size > PHOTO_LIMIT {
                    return Err(ChannelError::Refused {
                        channel: TELEGRAM.to_owned(),
                        why: format!(
                            "the image is {}; Telegram takes photos of at most 10 MB",
                            megabytes(size)
                        ),
                    });
                }
                ("sendPhoto", "photo", format.media_type(), "a photo")
            }
            FileKind::Document => {
                if size > DOCUMENT_LIMIT {
                    return Err(ChannelError::Refused {
                        channel: TELEGRAM.to_owned(),
                        why: format!(
                            "the file is {}; Telegram takes documents of at most 50 MB",
                            megabytes(size)
                        ),
                    });
                }
                (
                    "sendDocument",
                    "document",
                    "application/octet-stream",
                    "a document",
                )
            }
        };
        let name = visible(delivery.name());
        let upload = Upload {
            field,
            name: &name,
            media_type,
            bytes: delivery.bytes(),
        };
        let caption = delivery.caption().map(caption_text);
        let message = self
            .api
            .send_file(method, self.chat, &upload, caption.as_deref())
            .await
            .map_err(|e| match e {
                crate::Error::Api { description, .. } => ChannelError::Refused {
                    channel: TELEGRAM.to_owned(),
                    why: description,
                },
                other => ChannelError::Unreachable {
                    channel: TELEGRAM.to_owned(),
                    why: other.to_string(),
                },
            })?;
        let receipt = format!("telegram:{}/{message}", self.chat);
        if let Err(e) = self.ledger.record_chat_delivery(run, call, &receipt).await {
            tracing::warn!(
                "cannot record the Telegram delivery (a re-run would send it again): {e}"
            );
        }
        Ok(Delivered {
            receipt,
            summary: format!("sent to the person's Telegram chat as {what}"),
            repeated: false,
        })
    }
}
