//! [`ChatStore`] on SQLite: `chat_offsets`, `chat_sessions`, `chat_buttons` and
//! `chat_reasons` (migration 0006), written through the store's one writer, read from its
//! pool.

use async_trait::async_trait;
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
}
