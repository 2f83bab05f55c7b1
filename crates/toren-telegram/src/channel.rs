//! The Telegram channel: `send_to_channel` on a run bound to a Telegram chat sends an image
//! (by content: PNG, JPEG, GIF, WebP) with `sendPhoto` and anything else with
//! `sendDocument`, with the caption. Telegram's limits (10 MB for a photo, 50 MB for a
//! document) are checked first and refused with a tool error that names them. A ledger
//! (one small file per delivered call under the bot's state directory) answers a call run
//! again after a crash with its first delivery instead of sending twice. Telegram out of
//! reach is a tool error, never a failed run.

use std::path::PathBuf;
use std::sync::Arc;

use async_trait::async_trait;
use toren_channel::{Channel, ChannelError, ChannelFactory, Delivered, Delivery, FileKind};
use toren_protocol::{ChannelBinding, RunId};

use crate::api::{BotApi, Upload};

/// The channel's kind, as bindings name it.
pub const TELEGRAM: &str = "telegram";
/// Telegram's limit on a photo.
pub const PHOTO_LIMIT: u64 = 10 * 1024 * 1024;
/// Telegram's limit on a document a bot sends.
pub const DOCUMENT_LIMIT: u64 = 50 * 1024 * 1024;

/// Makes the channel of each Telegram-bound run.
#[derive(Clone, Debug)]
pub struct TelegramChannels {
    api: BotApi,
    ledger: PathBuf,
}

impl TelegramChannels {
    /// Sends through `api`; deliveries are recorded under `ledger` (a directory made when
    /// needed).
    pub fn new(api: BotApi, ledger: PathBuf) -> Self {
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
            ledger: self.ledger.clone(),
            chat,
        }))
    }
}

/// One chat's channel.
#[derive(Debug)]
pub struct TelegramChannel {
    api: BotApi,
    ledger: PathBuf,
    chat: i64,
}

impl TelegramChannel {
    fn ledger_file(&self, delivery: &Delivery) -> PathBuf {
        let call: String = delivery
            .call_id()
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() || c == '_' || c == '-' {
                    c
                } else {
                    '_'
                }
            })
            .collect();
        self.ledger
            .join(format!("{}-{call}", delivery.run_id().as_str()))
    }
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
        let ledger = self.ledger_file(delivery);
        if let Ok(receipt) = tokio::fs::read_to_string(&ledger).await {
            return Ok(Delivered {
                receipt: receipt.trim().to_owned(),
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
        let upload = Upload {
            field,
            name: delivery.name(),
            media_type,
            bytes: delivery.bytes(),
        };
        let message = self
            .api
            .send_file(method, self.chat, &upload, delivery.caption())
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
        if let Err(e) = write_ledger(&ledger, &receipt).await {
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

async fn write_ledger(path: &std::path::Path, receipt: &str) -> std::io::Result<()> {
    if let Some(dir) = path.parent() {
        tokio::fs::create_dir_all(dir).await?;
    }
    let partial = path.with_extension("partial");
    tokio::fs::write(&partial, receipt).await?;
    tokio::fs::rename(&partial, path).await
}
