//! Sessions' rows back into values and values into their columns, whatever the backend:
//! the agent spec, policy and conversation as JSON, turn numbers as integers. Anything that
//! does not decode (or encode) becomes [`Error::CorruptSession`], naming the session.

use toren_protocol::{Message, RunId};

use super::rows::StoredTime;
use crate::{Error, Result, Session};

/// The columns of a session, `SELECT id, name, spec, policy, created_at FROM sessions`.
#[derive(sqlx::FromRow)]
pub struct SessionRow<T> {
    pub id: String,
    pub name: String,
    pub spec: String,
    pub policy: Option<String>,
    pub created_at: T,
}

impl<T: StoredTime> SessionRow<T> {
    pub fn decode(self) -> Result<Session> {
        let bad = |reason: String| Error::CorruptSession {
            session: self.name.clone(),
            reason,
        };
        let agent = serde_json::from_str(&self.spec).map_err(|e| bad(format!("spec: {e}")))?;
        let policy = match &self.policy {
            Some(p) => Some(serde_json::from_str(p).map_err(|e| bad(format!("policy: {e}")))?),
            None => None,
        };
        let created_at = self
            .created_at
            .to_timestamp()
            .map_err(|e| bad(format!("created_at: {e}")))?;
        Ok(Session {
            id: self.id,
            name: self.name,
            agent,
            policy,
            created_at,
        })
    }
}

/// `value` (the session's `what`: spec, policy, a message of its conversation) as JSON.
pub fn encode<T: serde::Serialize>(session: &str, what: &str, value: &T) -> Result<String> {
    serde_json::to_string(value).map_err(|e| Error::CorruptSession {
        session: session.to_owned(),
        reason: format!("cannot encode its {what}: {e}"),
    })
}

/// A stored turn number, which must fit a `u32`.
pub fn turn_number(session: &str, value: impl Into<i64>) -> Result<u32> {
    let value = value.into();
    u32::try_from(value).map_err(|_| Error::CorruptSession {
        session: session.to_owned(),
        reason: format!("turn number {value}"),
    })
}

/// A turn's stored run id.
pub fn run_id_of(session: &str, run: &str) -> Result<RunId> {
    run.parse().map_err(|e| Error::CorruptSession {
        session: session.to_owned(),
        reason: format!("run id `{run}`: {e}"),
    })
}

/// A stored message of turn `turn`'s conversation.
pub fn message_of(session: &str, turn: impl std::fmt::Display, message: &str) -> Result<Message> {
    serde_json::from_str(message).map_err(|e| Error::CorruptSession {
        session: session.to_owned(),
        reason: format!("a message of turn {turn}: {e}"),
    })
}
