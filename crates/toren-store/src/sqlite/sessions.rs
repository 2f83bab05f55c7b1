//! [`SessionStore`] on SQLite: `sessions`, `session_turns`, `session_messages` and
//! `session_queue` (migration 0003). Writes go through the store's writer (`writer.rs`),
//! each all-or-nothing; a turn is created in the same write as its run, after checking
//! that every earlier turn's run has ended.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::SqliteConnection;
use toren_protocol::{Event, Message, RunCreated, RunId, SessionTurn};

use super::SqliteStore;
use super::log::insert_run;
use super::rows::{self, stamp};
use crate::backend::{
    self,
    sessions::{encode, message_of, run_id_of, turn_number},
};
use crate::{Error, Lease, QueuedTurn, Result, Session, SessionStore, SessionTurnRow};

/// A session's row, times as stamps.
type SessionRow = backend::sessions::SessionRow<String>;

const BY_NAME: &str = "SELECT id, name, spec, policy, created_at FROM sessions WHERE name = ?";

#[async_trait]
impl SessionStore for SqliteStore {
    async fn create_session(&self, session: &Session) -> Result<()> {
        let session = session.clone();
        self.write(move |tx| {
            Box::pin(async move {
                let session = &session;
                let taken = sqlx::query_scalar::<_, i64>("SELECT 1 FROM sessions WHERE name = ?")
                    .bind(&session.name)
                    .fetch_optional(&mut *tx)
                    .await?;
                if taken.is_some() {
                    return Err(Error::SessionExists(session.name.clone()));
                }
                let policy = match &session.policy {
                    Some(policy) => Some(encode(&session.name, "policy", policy)?),
                    None => None,
                };
                sqlx::query(
                    "INSERT INTO sessions (id, name, agent, spec, policy, created_at)
             VALUES (?, ?, ?, ?, ?, ?)",
                )
                .bind(&session.id)
                .bind(&session.name)
                .bind(&session.agent.name)
                .bind(encode(&session.name, "spec", &session.agent)?)
                .bind(policy)
                .bind(stamp(session.created_at))
                .execute(&mut *tx)
                .await?;
                Ok(())
            })
        })
        .await
    }

    async fn session(&self, name: &str) -> Result<Session> {
        let row = sqlx::query_as::<_, SessionRow>(BY_NAME)
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
        row.ok_or_else(|| Error::SessionNotFound(name.to_owned()))?
            .decode()
    }

    async fn sessions(&self) -> Result<Vec<Session>> {
        let rows = sqlx::query_as::<_, SessionRow>(
            "SELECT id, name, spec, policy, created_at FROM sessions
             ORDER BY created_at DESC, id DESC",
        )
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter().map(SessionRow::decode).collect()
    }

    async fn remove_session(&self, name: &str) -> Result<Session> {
        let name = name.to_owned();
        self.write(move |tx| {
            Box::pin(async move {
                let name = name.as_str();
                let row = sqlx::query_as::<_, SessionRow>(BY_NAME)
                    .bind(name)
                    .fetch_optional(&mut *tx)
                    .await?;
                let session = row
                    .ok_or_else(|| Error::SessionNotFound(name.to_owned()))?
                    .decode()?;
                for delete in [
                    "DELETE FROM session_queue WHERE session_id = ?",
                    "DELETE FROM session_messages WHERE session_id = ?",
                    "DELETE FROM session_turns WHERE session_id = ?",
                ] {
                    sqlx::query(delete)
                        .bind(&session.id)
                        .execute(&mut *tx)
                        .await?;
                }
                sqlx::query("DELETE FROM sessions WHERE id = ?")
                    .bind(&session.id)
                    .execute(&mut *tx)
                    .await?;
                Ok(session)
            })
        })
        .await
    }

    async fn turns(&self, session_id: &str) -> Result<Vec<SessionTurnRow>> {
        let rows = sqlx::query_as::<_, (i64, String, String)>(
            "SELECT t.turn, t.run_id, r.status FROM session_turns t JOIN runs r ON r.id = t.run_id
             WHERE t.session_id = ? ORDER BY t.turn",
        )
        .bind(session_id)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(turn, run, status)| {
                Ok(SessionTurnRow {
                    turn: turn_number(session_id, turn)?,
                    status: rows::status(&run, &status)?,
                    run_id: run_id_of(session_id, &run)?,
                })
            })
            .collect()
    }

    async fn create_turn_keyed(
        &self,
        session_id: &str,
        run_id: &RunId,
        created: RunCreated,
        holder: &str,
        ttl: Duration,
        key: Option<&str>,
    ) -> Result<(Event, Lease, u32)> {
        let (session_id, run_id, holder) =
            (session_id.to_owned(), run_id.clone(), holder.to_owned());
        let key = key.map(str::to_owned);
        let clock = self.clock.clone();
        self.write(move |tx| {
            Box::pin(async move {
                let (session_id, run_id, holder) = (session_id.as_str(), &run_id, holder.as_str());
                super::chats::take_key(tx, key.as_deref(), Some(session_id), Some(run_id)).await?;
                insert_turn(tx, clock.now(), session_id, run_id, created, holder, ttl).await
            })
        })
        .await
    }

    async fn conversation(
        &self,
        session_id: &str,
        before_turn: u32,
    ) -> Result<Vec<(u32, Message)>> {
        let rows = sqlx::query_as::<_, (i64, String)>(
            "SELECT turn, message FROM session_messages WHERE session_id = ? AND turn < ?
             ORDER BY turn, idx",
        )
        .bind(session_id)
        .bind(i64::from(before_turn))
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|(turn, message)| {
                let message = message_of(session_id, turn, &message)?;
                Ok((turn_number(session_id, turn)?, message))
            })
            .collect()
    }

    async fn recorded_turns(&self, session_id: &str) -> Result<Vec<u32>> {
        let rows = sqlx::query_scalar::<_, i64>(
            "SELECT DISTINCT turn FROM session_messages WHERE session_id = ? ORDER BY turn",
        )
        .bind(session_id)
        .fetch_all(&self.pool)
        .await?;
        rows.into_iter()
            .map(|turn| turn_number(session_id, turn))
            .collect()
    }

    async fn record_turn_messages(
        &self,
        session_id: &str,
        turn: u32,
        messages: &[Message],
    ) -> Result<()> {
        let (session_id, messages) = (session_id.to_owned(), messages.to_vec());
        self.write(move |tx| {
            Box::pin(async move {
                let session_id = session_id.as_str();
                let recorded = sqlx::query_scalar::<_, i64>(
                    "SELECT 1 FROM session_messages WHERE session_id = ? AND turn = ? LIMIT 1",
                )
                .bind(session_id)
                .bind(i64::from(turn))
                .fetch_optional(&mut *tx)
                .await?;
                if recorded.is_some() {
                    return Ok(());
                }
                for (idx, message) in messages.iter().enumerate() {
                    sqlx::query(
                "INSERT INTO session_messages (session_id, turn, idx, message) VALUES (?, ?, ?, ?)",
            )
            .bind(session_id)
            .bind(i64::from(turn))
            .bind(i64::try_from(idx).unwrap_or(i64::MAX))
            .bind(encode(session_id, "conversation", message)?)
            .execute(&mut *tx)
            .await?;
                }
                Ok(())
            })
        })
        .await
    }

    async fn enqueue_keyed(&self, session_id: &str, text: &str, key: Option<&str>) -> Result<u32> {
        let (session_id, text) = (session_id.to_owned(), text.to_owned());
        let key = key.map(str::to_owned);
        let clock = self.clock.clone();
        self.write(move |tx| {
            Box::pin(async move {
                let (session_id, text) = (session_id.as_str(), text.as_str());
                super::chats::take_key(tx, key.as_deref(), Some(session_id), None).await?;
                let last = sqlx::query_scalar::<_, Option<i64>>(
                    "SELECT MAX(seq) FROM session_queue WHERE session_id = ?",
                )
                .bind(session_id)
                .fetch_one(&mut *tx)
                .await?;
                sqlx::query(
            "INSERT INTO session_queue (session_id, seq, text, queued_at, key) VALUES (?, ?, ?, ?, ?)",
        )
        .bind(session_id)
        .bind(last.unwrap_or(0) + 1)
        .bind(text)
        .bind(stamp(clock.now()))
        .bind(key.as_deref())
        .execute(&mut *tx)
        .await?;
                let waiting = sqlx::query_scalar::<_, i64>(
                    "SELECT COUNT(*) FROM session_queue WHERE session_id = ?",
                )
                .bind(session_id)
                .fetch_one(&mut *tx)
                .await?;
                Ok(u32::try_from(waiting).unwrap_or(u32::MAX))
            })
        })
        .await
    }

    async fn queued(&self, session_id: &str) -> Result<u32> {
        let waiting =
            sqlx::query_scalar::<_, i64>("SELECT COUNT(*) FROM session_queue WHERE session_id = ?")
                .bind(session_id)
                .fetch_one(&self.pool)
                .await?;
        Ok(u32::try_from(waiting).unwrap_or(u32::MAX))
    }

    async fn dequeue(&self, session_id: &str) -> Result<Option<String>> {
        let session_id = session_id.to_owned();
        self.write(move |tx| {
            Box::pin(async move {
                let session_id = session_id.as_str();
                let next = sqlx::query_as::<_, (i64, String)>(
                    "SELECT seq, text FROM session_queue WHERE session_id = ? ORDER BY seq LIMIT 1",
                )
                .bind(session_id)
                .fetch_optional(&mut *tx)
                .await?;
                let Some((seq, text)) = next else {
                    return Ok(None);
                };
                sqlx::query("DELETE FROM session_queue WHERE session_id = ? AND seq = ?")
                    .bind(session_id)
                    .bind(seq)
                    .execute(&mut *tx)
                    .await?;
                Ok(Some(text))
            })
        })
        .await
    }
    async fn start_next_queued(
        &self,
        session_id: &str,
        run_id: &RunId,
        mut created: RunCreated,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<QueuedTurn>> {
        let (session_id, run_id, holder) =
            (session_id.to_owned(), run_id.clone(), holder.to_owned());
        let clock = self.clock.clone();
        self.write(move |tx| {
            Box::pin(async move {
                let (session_id, run_id, holder) = (session_id.as_str(), &run_id, holder.as_str());
                let next = sqlx::query_as::<_, (i64, String, Option<String>)>(
                    "SELECT seq, text, key FROM session_queue WHERE session_id = ?
                     ORDER BY seq LIMIT 1",
                )
                .bind(session_id)
                .fetch_optional(&mut *tx)
                .await?;
                let Some((seq, text, key)) = next else {
                    return Ok(None);
                };
                created.input.clone_from(&text);
                let (event, lease, turn) =
                    insert_turn(tx, clock.now(), session_id, run_id, created, holder, ttl).await?;
                sqlx::query("DELETE FROM session_queue WHERE session_id = ? AND seq = ?")
                    .bind(session_id)
                    .bind(seq)
                    .execute(&mut *tx)
                    .await?;
                if let Some(key) = &key {
                    sqlx::query("UPDATE message_keys SET run_id = ? WHERE key = ?")
                        .bind(run_id.as_str())
                        .bind(key)
                        .execute(&mut *tx)
                        .await?;
                }
                Ok(Some(QueuedTurn {
                    event,
                    lease,
                    turn,
                    text,
                    key,
                }))
            })
        })
        .await
    }
}

/// The session's next turn, the run of `created`, in the write under way: refused with
/// [`Error::TurnInProgress`] while an earlier turn runs.
async fn insert_turn(
    tx: &mut SqliteConnection,
    now: jiff::Timestamp,
    session_id: &str,
    run_id: &RunId,
    mut created: RunCreated,
    holder: &str,
    ttl: Duration,
) -> Result<(Event, Lease, u32)> {
    let name = sqlx::query_scalar::<_, String>("SELECT name FROM sessions WHERE id = ?")
        .bind(session_id)
        .fetch_optional(&mut *tx)
        .await?
        .ok_or_else(|| Error::SessionNotFound(session_id.to_owned()))?;
    let open = sqlx::query_as::<_, (i64, String)>(
        "SELECT t.turn, t.run_id FROM session_turns t JOIN runs r ON r.id = t.run_id
             WHERE t.session_id = ? AND r.status NOT IN ('completed', 'failed', 'cancelled')
             ORDER BY t.turn LIMIT 1",
    )
    .bind(session_id)
    .fetch_optional(&mut *tx)
    .await?;
    if let Some((turn, run)) = open {
        return Err(Error::TurnInProgress {
            session: name,
            turn: turn_number(session_id, turn)?,
            run_id: run_id_of(session_id, &run)?,
        });
    }
    let last = sqlx::query_scalar::<_, Option<i64>>(
        "SELECT MAX(turn) FROM session_turns WHERE session_id = ?",
    )
    .bind(session_id)
    .fetch_one(&mut *tx)
    .await?;
    let turn = turn_number(session_id, last.unwrap_or(0) + 1)?;
    created.session = Some(SessionTurn {
        id: session_id.to_owned(),
        name,
        turn,
    });
    let (event, lease) = insert_run(tx, now, run_id, created, holder, ttl).await?;
    sqlx::query("INSERT INTO session_turns (session_id, turn, run_id) VALUES (?, ?, ?)")
        .bind(session_id)
        .bind(i64::from(turn))
        .bind(run_id.as_str())
        .execute(&mut *tx)
        .await?;
    Ok((event, lease, turn))
}
