//! [`ChatStore`] on Postgres: `chat_offsets`, `chat_sessions`, `chat_buttons` and
//! `chat_reasons` (migration 0002), each call one statement under the store's deadline.

use async_trait::async_trait;
use toren_protocol::RunId;
use toren_store::{ChatButton, ChatStore, Error, Result};

use crate::store::PostgresStore;

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
}
