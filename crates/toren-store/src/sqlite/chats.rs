//! [`ChatStore`] on SQLite: `chat_offsets`, `chat_sessions`, `chat_buttons` and
//! `chat_reasons` (migration 0006), `message_keys`, `chat_refusals` and `chat_deliveries`
//! (0007), written through the store's one writer, read from its pool. [`take_key`] is the
//! one insert of a message key, also made by `create_turn_keyed` and `enqueue_keyed` inside
//! their own writes.

use async_trait::async_trait;
use sqlx::SqliteConnection;
use toren_protocol::RunId;

use super::SqliteStore;
use crate::{ChatButton, ChatStore, Error, Result};

#[async_trait]
impl ChatStore for SqliteStore {
    async fn chat_offset(&self, stream: &str) -> Result<i64> {
        let offset =
            sqlx::query_scalar::<_, i64>("SELECT next_offset FROM chat_offsets WHERE stream = ?")
                .bind(stream)
                .fetch_optional(&self.pool)
                .await?;
        Ok(offset.unwrap_or(0))
    }

    async fn advance_chat_offset(&self, stream: &str, offset: i64) -> Result<()> {
        let stream = stream.to_owned();
        self.write(move |tx| {
            Box::pin(async move {
                sqlx::query(
                    "INSERT INTO chat_offsets (stream, next_offset) VALUES (?1, ?2)
                     ON CONFLICT (stream) DO UPDATE SET next_offset = ?2
                     WHERE next_offset < ?2",
                )
                .bind(&stream)
                .bind(offset)
                .execute(&mut *tx)
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn chat_session(&self, chat: &str) -> Result<Option<String>> {
        Ok(
            sqlx::query_scalar::<_, String>("SELECT session FROM chat_sessions WHERE chat = ?")
                .bind(chat)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn bind_chat(&self, chat: &str, session: &str) -> Result<()> {
        let (chat, session) = (chat.to_owned(), session.to_owned());
        self.write(move |tx| {
            Box::pin(async move {
                sqlx::query(
                    "INSERT INTO chat_sessions (chat, session) VALUES (?1, ?2)
                     ON CONFLICT (chat) DO UPDATE SET session = ?2",
                )
                .bind(&chat)
                .bind(&session)
                .execute(&mut *tx)
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn put_chat_button(&self, id: &str, button: &ChatButton) -> Result<()> {
        let (id, button) = (id.to_owned(), button.clone());
        self.write(move |tx| {
            Box::pin(async move {
                sqlx::query(
                    "INSERT INTO chat_buttons (id, run_id, call_id, chat, message_id)
                     VALUES (?, ?, ?, ?, ?) ON CONFLICT (id) DO NOTHING",
                )
                .bind(&id)
                .bind(button.run_id.as_str())
                .bind(&button.call_id)
                .bind(&button.chat)
                .bind(button.message_id)
                .execute(&mut *tx)
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn chat_button(&self, id: &str) -> Result<Option<ChatButton>> {
        let row: Option<(String, String, String, i64)> = sqlx::query_as(
            "SELECT run_id, call_id, chat, message_id FROM chat_buttons WHERE id = ?",
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
    }

    async fn set_chat_reason(&self, chat: &str, id: Option<&str>) -> Result<()> {
        let (chat, id) = (chat.to_owned(), id.map(str::to_owned));
        self.write(move |tx| {
            Box::pin(async move {
                match &id {
                    Some(id) => {
                        sqlx::query(
                            "INSERT INTO chat_reasons (chat, button) VALUES (?1, ?2)
                             ON CONFLICT (chat) DO UPDATE SET button = ?2",
                        )
                        .bind(&chat)
                        .bind(id)
                        .execute(&mut *tx)
                        .await?;
                    }
                    None => {
                        sqlx::query("DELETE FROM chat_reasons WHERE chat = ?")
                            .bind(&chat)
                            .execute(&mut *tx)
                            .await?;
                    }
                }
                Ok(())
            })
        })
        .await
    }

    async fn chat_reason(&self, chat: &str) -> Result<Option<String>> {
        Ok(
            sqlx::query_scalar::<_, String>("SELECT button FROM chat_reasons WHERE chat = ?")
                .bind(chat)
                .fetch_optional(&self.pool)
                .await?,
        )
    }

    async fn message_taken(&self, key: &str) -> Result<bool> {
        Ok(
            sqlx::query_scalar::<_, i64>("SELECT 1 FROM message_keys WHERE key = ?")
                .bind(key)
                .fetch_optional(&self.pool)
                .await?
                .is_some(),
        )
    }

    async fn take_message_key(&self, key: &str, reason_of: Option<&str>) -> Result<bool> {
        let (key, chat) = (key.to_owned(), reason_of.map(str::to_owned));
        self.write(move |tx| {
            Box::pin(async move {
                match take_key(tx, Some(&key), None, None).await {
                    Ok(()) => {}
                    Err(Error::MessageTaken { .. }) => return Ok(false),
                    Err(e) => return Err(e),
                }
                if let Some(chat) = &chat {
                    sqlx::query("DELETE FROM chat_reasons WHERE chat = ?")
                        .bind(chat)
                        .execute(&mut *tx)
                        .await?;
                }
                Ok(true)
            })
        })
        .await
    }

    async fn refuse_once(&self, key: &str) -> Result<bool> {
        let key = key.to_owned();
        self.write(move |tx| {
            Box::pin(async move {
                let done = sqlx::query(
                    "INSERT INTO chat_refusals (key) VALUES (?) ON CONFLICT DO NOTHING",
                )
                .bind(&key)
                .execute(&mut *tx)
                .await?;
                Ok(done.rows_affected() == 1)
            })
        })
        .await
    }

    async fn chat_delivery(&self, run: &RunId, call_id: &str) -> Result<Option<String>> {
        Ok(sqlx::query_scalar::<_, String>(
            "SELECT receipt FROM chat_deliveries WHERE run_id = ? AND call_id = ?",
        )
        .bind(run.as_str())
        .bind(call_id)
        .fetch_optional(&self.pool)
        .await?)
    }

    async fn record_chat_delivery(&self, run: &RunId, call_id: &str, receipt: &str) -> Result<()> {
        let (run, call_id, receipt) = (run.clone(), call_id.to_owned(), receipt.to_owned());
        self.write(move |tx| {
            Box::pin(async move {
                sqlx::query(
                    "INSERT INTO chat_deliveries (run_id, call_id, receipt) VALUES (?, ?, ?)
                     ON CONFLICT DO NOTHING",
                )
                .bind(run.as_str())
                .bind(&call_id)
                .bind(&receipt)
                .execute(&mut *tx)
                .await?;
                Ok(())
            })
        })
        .await
    }
}

/// Records the message `key` (if any) in the write under way: [`Error::MessageTaken`] when
/// it is taken already (the caller's write is then rolled back with it).
pub(super) async fn take_key(
    tx: &mut SqliteConnection,
    key: Option<&str>,
    session_id: Option<&str>,
    run: Option<&RunId>,
) -> Result<()> {
    let Some(key) = key else {
        return Ok(());
    };
    let taken = sqlx::query(
        "INSERT INTO message_keys (key, session_id, run_id) VALUES (?, ?, ?)
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
