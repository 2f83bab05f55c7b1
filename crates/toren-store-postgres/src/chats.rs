//! [`ChatStore`] on Postgres: `chat_offsets`, `chat_sessions`, `chat_buttons` and
//! `chat_reasons` (migration 0002), `message_keys`, `chat_refusals` and `chat_deliveries`
//! (0003), each call one statement (or one transaction) under the store's deadline.
//! [`take_key`] is the one insert of a message key, also made by `create_turn_keyed` and
//! `enqueue_keyed` inside their own transactions.

use async_trait::async_trait;
use sqlx::PgConnection;
use toren_protocol::RunId;
use toren_store::{ChatButton, ChatStore, Error, Result};

use crate::store::{PostgresStore, finish};

#[async_trait]
impl ChatStore for PostgresStore {
    async fn chat_offset(&self, stream: &str) -> Result<i64> {
        self.bounded(async {
            let offset = sqlx::query_scalar::<_, i64>(
                "SELECT next_offset FROM chat_offsets WHERE stream = $1",
            )
            .bind(stream)
            .fetch_optional(&self.pool)
            .await?;
            Ok(offset.unwrap_or(0))
        })
        .await
    }

    async fn advance_chat_offset(&self, stream: &str, offset: i64) -> Result<()> {
        self.bounded(async {
            sqlx::query(
                "INSERT INTO chat_offsets (stream, next_offset) VALUES ($1, $2)
                 ON CONFLICT (stream) DO UPDATE SET next_offset = $2
                 WHERE chat_offsets.next_offset < $2",
            )
            .bind(stream)
            .bind(offset)
            .execute(&self.pool)
            .await?;
            Ok(())
        })
        .await
    }

    async fn chat_session(&self, chat: &str) -> Result<Option<String>> {
        self.bounded(async {
            Ok(
                sqlx::query_scalar::<_, String>(
                    "SELECT session FROM chat_sessions WHERE chat = $1",
                )
                .bind(chat)
                .fetch_optional(&self.pool)
                .await?,
            )
        })
        .await
    }

    async fn bind_chat(&self, chat: &str, session: &str) -> Result<()> {
        self.bounded(async {
            sqlx::query(
                "INSERT INTO chat_sessions (chat, session) VALUES ($1, $2)
                 ON CONFLICT (chat) DO UPDATE SET session = $2",
            )
            .bind(chat)
            .bind(session)
            .execute(&self.pool)
            .await?;
            Ok(())
        })
        .await
    }

    async fn put_chat_button(&self, id: &str, button: &ChatButton) -> Result<()> {
        self.bounded(async {
            sqlx::query(
                "INSERT INTO chat_buttons (id, run_id, call_id, chat, message_id)
                 VALUES ($1, $2, $3, $4, $5) ON CONFLICT (id) DO NOTHING",
            )
            .bind(id)
            .bind(button.run_id.as_str())
            .bind(&button.call_id)
            .bind(&button.chat)
            .bind(button.message_id)
            .execute(&self.pool)
            .await?;
            Ok(())
        })
        .await
    }

    async fn chat_button(&self, id: &str) -> Result<Option<ChatButton>> {
        self.bounded(async {
            let row: Option<(String, String, String, i64)> = sqlx::query_as(
                "SELECT run_id, call_id, chat, message_id FROM chat_buttons WHERE id = $1",
            )
            .bind(id)
            .fetch_optional(&self.pool)
            .await?;
            row.map(|(run, call_id, chat, message_id)| {
                Ok(ChatButton {
                    run_id: run.parse::<RunId>().map_err(|e| Error::CorruptRun {
                        run_id: run.clone(),
                        reason: format!("the run id of chat button {id}: {e}"),
                    })?,
                    call_id,
                    chat,
                    message_id,
                })
            })
            .transpose()
        })
        .await
    }

    async fn set_chat_reason(&self, chat: &str, id: Option<&str>) -> Result<()> {
        self.bounded(async {
            match id {
                Some(id) => {
                    sqlx::query(
                        "INSERT INTO chat_reasons (chat, button) VALUES ($1, $2)
                         ON CONFLICT (chat) DO UPDATE SET button = $2",
                    )
                    .bind(chat)
                    .bind(id)
                    .execute(&self.pool)
                    .await?;
                }
                None => {
                    sqlx::query("DELETE FROM chat_reasons WHERE chat = $1")
                        .bind(chat)
                        .execute(&self.pool)
                        .await?;
                }
            }
            Ok(())
        })
        .await
    }

    async fn chat_reason(&self, chat: &str) -> Result<Option<String>> {
        self.bounded(async {
            Ok(
                sqlx::query_scalar::<_, String>("SELECT button FROM chat_reasons WHERE chat = $1")
                    .bind(chat)
                    .fetch_optional(&self.pool)
                    .await?,
            )
        })
        .await
    }

    async fn message_taken(&self, key: &str) -> Result<bool> {
        self.bounded(async {
            Ok(
                sqlx::query_scalar::<_, i32>("SELECT 1 FROM message_keys WHERE key = $1")
                    .bind(key)
                    .fetch_optional(&self.pool)
                    .await?
                    .is_some(),
            )
        })
        .await
    }

    async fn take_message_key(&self, key: &str, reason_of: Option<&str>) -> Result<bool> {
        self.bounded(async {
            let mut tx = self.begin().await?;
            let result: Result<bool> = async {
                match take_key(&mut tx, Some(key), None, None).await {
                    Ok(()) => {}
                    Err(Error::MessageTaken { .. }) => return Ok(false),
                    Err(e) => return Err(e),
                }
                if let Some(chat) = reason_of {
                    sqlx::query("DELETE FROM chat_reasons WHERE chat = $1")
                        .bind(chat)
                        .execute(&mut *tx)
                        .await?;
                }
                Ok(true)
            }
            .await;
            finish(tx, result).await
        })
        .await
    }

    async fn refuse_once(&self, key: &str) -> Result<bool> {
        self.bounded(async {
            let done =
                sqlx::query("INSERT INTO chat_refusals (key) VALUES ($1) ON CONFLICT DO NOTHING")
                    .bind(key)
                    .execute(&self.pool)
                    .await?;
            Ok(done.rows_affected() == 1)
        })
        .await
    }

    async fn chat_delivery(&self, run: &RunId, call_id: &str) -> Result<Option<String>> {
        self.bounded(async {
            Ok(sqlx::query_scalar::<_, String>(
                "SELECT receipt FROM chat_deliveries WHERE run_id = $1 AND call_id = $2",
            )
            .bind(run.as_str())
            .bind(call_id)
            .fetch_optional(&self.pool)
            .await?)
        })
        .await
    }

    async fn record_chat_delivery(&self, run: &RunId, call_id: &str, receipt: &str) -> Result<()> {
        self.bounded(async {
            sqlx::query(
                "INSERT INTO chat_deliveries (run_id, call_id, receipt) VALUES ($1, $2, $3)
                 ON CONFLICT DO NOTHING",
            )
            .bind(run.as_str())
            .bind(call_id)
            .bind(receipt)
            .execute(&self.pool)
            .await?;
            Ok(())
        })
        .await
    }
}

/// Records the message `key` (if any) in the transaction under way:
/// [`Error::MessageTaken`] when it is taken already (the caller's transaction is then
/// rolled back with it). A concurrent taker of the same key waits on the unique index and
/// then finds it taken.
pub(crate) async fn take_key(
    tx: &mut PgConnection,
    key: Option<&str>,
    session_id: Option<&str>,
    run: Option<&RunId>,
) -> Result<()> {
    let Some(key) = key else {
        return Ok(());
    };
    let taken = sqlx::query(
        "INSERT INTO message_keys (key, session_id, run_id) VALUES ($1, $2, $3)
         ON CONFLICT (key) DO NOTHING",
    )
    .bind(key)
    .bind(session_id)
    .bind(run.map(RunId::as_str))
    .execute(&mut *tx)
    .await?;
    if taken.rows_affected() == 0 {
        return Err(Error::MessageTaken {
            key: key.to_owned(),
        });
    }
    Ok(())
}
