//! [`SessionStore`] on Postgres: `sessions`, `session_turns`, `session_messages` and
//! `session_queue`. Each write is one transaction; those that must not interleave with
//! another write of the same session (a new turn, the queue, recording a turn) lock the
//! session's row first, and a turn is created in the same transaction as its run, after
//! checking that every earlier turn's run has ended.

use std::time::Duration;

use async_trait::async_trait;
use sqlx::PgConnection;
use toren_protocol::{Event, Message, RunCreated, RunId, SessionTurn};
use toren_store::backend::{
    self,
    sessions::{encode, message_of, run_id_of, turn_number},
};
use toren_store::{Error, Lease, QueuedTurn, Result, Session, SessionStore, SessionTurnRow};

use crate::log::insert_run;
use crate::rows::{self, nanos};
use crate::store::{PostgresStore, finish};

/// A session's row, times as nanoseconds.
type SessionRow = backend::sessions::SessionRow<i64>;

/// The columns [`SessionRow`] decodes.
macro_rules! columns {
    () => {
        "id, name, spec, policy, created_at"
    };
}

fn turn_to_sql(turn: u32) -> i32 {
    i32::try_from(turn).unwrap_or(i32::MAX)
}

/// Locks the session's row until the transaction ends; its name, or
/// [`Error::SessionNotFound`].
async fn lock_session(tx: &mut PgConnection, session_id: &str) -> Result<String> {
    sqlx::query_scalar::<_, String>("SELECT name FROM sessions WHERE id = $1 FOR UPDATE")
        .bind(session_id)
        .fetch_optional(tx)
        .await?
        .ok_or_else(|| Error::SessionNotFound(session_id.to_owned()))
}

#[async_trait]
impl SessionStore for PostgresStore {
    async fn create_session(&self, session: &Session) -> Result<()> {
        self.bounded(async {
            let policy = match &session.policy {
                Some(policy) => Some(encode(&session.name, "policy", policy)?),
                None => None,
            };
            let mut tx = self.begin().await?;
            let result: Result<_> = async {
                // A concurrent insert of the same name waits on the unique index, then does
                // nothing.
                let inserted = sqlx::query(
                    "INSERT INTO sessions (id, name, agent, spec, policy, created_at)
                 VALUES ($1, $2, $3, $4, $5, $6) ON CONFLICT (name) DO NOTHING",
                )
                .bind(&session.id)
                .bind(&session.name)
                .bind(&session.agent.name)
                .bind(encode(&session.name, "spec", &session.agent)?)
                .bind(policy)
                .bind(nanos(session.created_at))
                .execute(&mut *tx)
                .await?;
                if inserted.rows_affected() == 0 {
                    return Err(Error::SessionExists(session.name.clone()));
                }
                Ok(())
            }
            .await;
            finish(tx, result).await
        })
        .await
    }

    async fn session(&self, name: &str) -> Result<Session> {
        self.bounded(async {
            let row = sqlx::query_as::<_, SessionRow>(concat!(
                "SELECT ",
                columns!(),
                " FROM sessions WHERE name = $1"
            ))
            .bind(name)
            .fetch_optional(&self.pool)
            .await?;
            row.ok_or_else(|| Error::SessionNotFound(name.to_owned()))?
                .decode()
        })
        .await
    }

    async fn sessions(&self) -> Result<Vec<Session>> {
        self.bounded(async {
            let rows = sqlx::query_as::<_, SessionRow>(concat!(
                "SELECT ",
                columns!(),
                " FROM sessions ORDER BY created_at DESC, id DESC"
            ))
            .fetch_all(&self.pool)
            .await?;
            rows.into_iter().map(SessionRow::decode).collect()
        })
        .await
    }

    async fn remove_session(&self, name: &str) -> Result<Session> {
        self.bounded(async {
            let mut tx = self.begin().await?;
            let result: Result<_> = async {
                // Turns, messages and the queue go with it (ON DELETE CASCADE); runs stay.
                let row = sqlx::query_as::<_, SessionRow>(concat!(
                    "DELETE FROM sessions WHERE name = $1 RETURNING ",
                    columns!()
                ))
                .bind(name)
                .fetch_optional(&mut *tx)
                .await?;
                let session = row
                    .ok_or_else(|| Error::SessionNotFound(name.to_owned()))?
                    .decode()?;
                Ok(session)
            }
            .await;
            finish(tx, result).await
        })
        .await
    }

    async fn turns(&self, session_id: &str) -> Result<Vec<SessionTurnRow>> {
        self.bounded(async {
            let rows = sqlx::query_as::<_, (i32, String, String)>(
                "SELECT t.turn, t.run_id, r.status FROM session_turns t JOIN runs r ON r.id = t.run_id
                 WHERE t.session_id = $1 ORDER BY t.turn",
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
        })
        .await
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
        self.bounded(async {
            let mut tx = self.begin().await?;
            let result: Result<_> = async {
                lock_session(&mut tx, session_id).await?;
                crate::chats::take_key(&mut tx, key, Some(session_id), Some(run_id)).await?;
                insert_turn(
                    &mut tx,
                    self.clock.now(),
                    session_id,
                    run_id,
                    created,
                    holder,
                    ttl,
                )
                .await
            }
            .await;
            finish(tx, result).await
        })
        .await
    }

    async fn conversation(
        &self,
        session_id: &str,
        before_turn: u32,
    ) -> Result<Vec<(u32, Message)>> {
        self.bounded(async {
            let rows = sqlx::query_as::<_, (i32, String)>(
                "SELECT turn, message FROM session_messages WHERE session_id = $1 AND turn < $2
                 ORDER BY turn, idx",
            )
            .bind(session_id)
            .bind(turn_to_sql(before_turn))
            .fetch_all(&self.pool)
            .await?;
            rows.into_iter()
                .map(|(turn, message)| {
                    let message = message_of(session_id, turn, &message)?;
                    Ok((turn_number(session_id, turn)?, message))
                })
                .collect()
        })
        .await
    }

    async fn recorded_turns(&self, session_id: &str) -> Result<Vec<u32>> {
        self.bounded(async {
            let rows = sqlx::query_scalar::<_, i32>(
                "SELECT DISTINCT turn FROM session_messages WHERE session_id = $1 ORDER BY turn",
            )
            .bind(session_id)
            .fetch_all(&self.pool)
            .await?;
            rows.into_iter()
                .map(|turn| turn_number(session_id, turn))
                .collect()
        })
        .await
    }

    async fn record_turn_messages(
        &self,
        session_id: &str,
        turn: u32,
        messages: &[Message],
    ) -> Result<()> {
        self.bounded(async {
            let mut encoded = Vec::with_capacity(messages.len());
            for message in messages {
                encoded.push(encode(session_id, "conversation", message)?);
            }
            let mut tx = self.begin().await?;
            let result: Result<_> = async {
            lock_session(&mut tx, session_id).await?;
            let recorded = sqlx::query_scalar::<_, i32>(
                "SELECT 1 FROM session_messages WHERE session_id = $1 AND turn = $2 LIMIT 1",
            )
            .bind(session_id)
            .bind(turn_to_sql(turn))
            .fetch_optional(&mut *tx)
            .await?;
            if recorded.is_some() {
                return Ok(());
            }
            let idx: Vec<i32> = (0..encoded.len())
                .map(|i| i32::try_from(i).unwrap_or(i32::MAX))
                .collect();
            sqlx::query(
                "INSERT INTO session_messages (session_id, turn, idx, message)
                 SELECT $1, $2, idx, message FROM UNNEST($3::INTEGER[], $4::TEXT[]) AS m (idx, message)",
            )
            .bind(session_id)
            .bind(turn_to_sql(turn))
            .bind(&idx)
            .bind(&encoded)
            .execute(&mut *tx)
            .await?;
            Ok(())
            }
            .await;
            finish(tx, result).await
        })
        .await
    }

    async fn enqueue_keyed(&self, session_id: &str, text: &str, key: Option<&str>) -> Result<u32> {
        self.bounded(async {
            let mut tx = self.begin().await?;
            let result: Result<_> = async {
            lock_session(&mut tx, session_id).await?;
            crate::chats::take_key(&mut tx, key, Some(session_id), None).await?;
            sqlx::query(
                "INSERT INTO session_queue (session_id, seq, text, queued_at, key)
                 SELECT $1, COALESCE(MAX(seq), 0) + 1, $2, $3, $4 FROM session_queue WHERE session_id = $1",
            )
            .bind(session_id)
            .bind(text)
            .bind(nanos(self.clock.now()))
            .bind(key)
            .execute(&mut *tx)
            .await?;
            let waiting = sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM session_queue WHERE session_id = $1",
            )
            .bind(session_id)
            .fetch_one(&mut *tx)
            .await?;
            Ok(u32::try_from(waiting).unwrap_or(u32::MAX))
            }
            .await;
            finish(tx, result).await
        })
        .await
    }

    async fn queued(&self, session_id: &str) -> Result<u32> {
        self.bounded(async {
            let waiting = sqlx::query_scalar::<_, i64>(
                "SELECT COUNT(*) FROM session_queue WHERE session_id = $1",
            )
            .bind(session_id)
            .fetch_one(&self.pool)
            .await?;
            Ok(u32::try_from(waiting).unwrap_or(u32::MAX))
        })
        .await
    }

    async fn dequeue(&self, session_id: &str) -> Result<Option<String>> {
        self.bounded(async {
            let mut tx = self.begin().await?;
            let result: Result<_> = async {
                lock_session(&mut tx, session_id).await?;
                let text = sqlx::query_scalar::<_, String>(
                    "DELETE FROM session_queue WHERE (session_id, seq) IN (
                     SELECT session_id, seq FROM session_queue WHERE session_id = $1
                     ORDER BY seq LIMIT 1)
                 RETURNING text",
                )
                .bind(session_id)
                .fetch_optional(&mut *tx)
                .await?;
                Ok(text)
            }
            .await;
            finish(tx, result).await
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
        self.bounded(async {
            let mut tx = self.begin().await?;
            let result: Result<_> = async {
                lock_session(&mut tx, session_id).await?;
                let next = sqlx::query_as::<_, (i64, String, Option<String>)>(
                    "SELECT seq, text, key FROM session_queue WHERE session_id = $1
                     ORDER BY seq LIMIT 1",
                )
                .bind(session_id)
                .fetch_optional(&mut *tx)
                .await?;
                let Some((seq, text, key)) = next else {
                    return Ok(None);
                };
                created.input.clone_from(&text);
                let (event, lease, turn) = insert_turn(
                    &mut tx,
                    self.clock.now(),
                    session_id,
                    run_id,
                    created,
                    holder,
                    ttl,
                )
                .await?;
                sqlx::query("DELETE FROM session_queue WHERE session_id = $1 AND seq = $2")
                    .bind(session_id)
                    .bind(seq)
                    .execute(&mut *tx)
                    .await?;
                if let Some(key) = &key {
                    sqlx::query("UPDATE message_keys SET run_id = $1 WHERE key = $2")
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
            }
            .await;
            finish(tx, result).await
        })
        .await
    }
}

/// The session's next turn, the run of `created`, in the transaction under way (which holds
/// the session's row): refused with [`Error::TurnInProgress`] while an earlier turn runs.
async fn insert_turn(
    tx: &mut PgConnection,
    now: jiff::Timestamp,
    session_id: &str,
    run_id: &RunId,
    mut created: RunCreated,
    holder: &str,
    ttl: Duration,
) -> Result<(Event, Lease, u32)> {
    let name = lock_session(tx, session_id).await?;
    let open = sqlx::query_as::<_, (i32, String)>(
        "SELECT t.turn, t.run_id FROM session_turns t JOIN runs r ON r.id = t.run_id
                 WHERE t.session_id = $1 AND r.status NOT IN ('completed', 'failed', 'cancelled')
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
    let last = sqlx::query_scalar::<_, Option<i32>>(
        "SELECT MAX(turn) FROM session_turns WHERE session_id = $1",
    )
    .bind(session_id)
    .fetch_one(&mut *tx)
    .await?;
    let turn = turn_number(session_id, last.unwrap_or(0).saturating_add(1))?;
    created.session = Some(SessionTurn {
        id: session_id.to_owned(),
        name,
        turn,
    });
    let (event, lease) = insert_run(tx, now, run_id, created, holder, ttl).await?;
    sqlx::query("INSERT INTO session_turns (session_id, turn, run_id) VALUES ($1, $2, $3)")
        .bind(session_id)
        .bind(turn_to_sql(turn))
        .bind(run_id.as_str())
        .execute(&mut *tx)
        .await?;
    Ok((event, lease, turn))
}
