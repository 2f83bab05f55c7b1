//! [`SessionStore`]: sessions, their turns (each a run of the event log), the conversation
//! they have built, and the messages waiting for the running turn to end.
//!
//! Rules every backend keeps: a session's name is unique; a new turn is created only when
//! every earlier turn of the session has ended (one turn at a time, never interleaved), in
//! the same transaction as its run (a queued message's turn also with taking it off the
//! queue); a turn's messages are recorded once, after it ended,
//! and never change.

use std::time::Duration;

use async_trait::async_trait;
use jiff::Timestamp;
use toren_protocol::{AgentSpec, Event, Message, ResolvedPolicy, RunCreated, RunId, RunStatus};

use crate::{Lease, Result};

/// A session as stored.
#[derive(Clone, Debug, PartialEq)]
pub struct Session {
    /// `ses_…`, also the name of its workspace directory.
    pub id: String,
    pub name: String,
    /// Pinned at creation, like a run's.
    pub agent: AgentSpec,
    pub policy: Option<ResolvedPolicy>,
    pub created_at: Timestamp,
}

/// One turn of a session and where its run stands.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SessionTurnRow {
    pub turn: u32,
    pub run_id: RunId,
    pub status: RunStatus,
}

#[async_trait]
pub trait SessionStore: Send + Sync {
    /// Records a new session. A taken name is
    /// [`Error::SessionExists`](crate::Error::SessionExists).
    async fn create_session(&self, session: &Session) -> Result<()>;

    /// The session called `name`, or [`Error::SessionNotFound`](crate::Error::SessionNotFound).
    async fn session(&self, name: &str) -> Result<Session>;

    /// Every session, newest first.
    async fn sessions(&self) -> Result<Vec<Session>>;

    /// Removes the session's record, its turns' bindings, its conversation and its queue.
    /// The turns' runs and their logs stay.
    async fn remove_session(&self, name: &str) -> Result<Session>;

    /// The session's turns, in order.
    async fn turns(&self, session_id: &str) -> Result<Vec<SessionTurnRow>>;

    /// Creates the run of the session's next turn with `created` (whose `session` field the
    /// store fills with the turn's number), giving `holder` its first lease, atomically with
    /// the check that every earlier turn has ended: otherwise
    /// [`Error::TurnInProgress`](crate::Error::TurnInProgress) and nothing is written.
    async fn create_turn(
        &self,
        session_id: &str,
        run_id: &RunId,
        created: RunCreated,
        holder: &str,
        ttl: Duration,
    ) -> Result<(Event, Lease, u32)> {
        self.create_turn_keyed(session_id, run_id, created, holder, ttl, None)
            .await
    }

    /// [`SessionStore::create_turn`], and with `key` (a chat front door's message id) the
    /// key recorded in the same write: a key taken already is
    /// [`Error::MessageTaken`](crate::Error::MessageTaken) and nothing is written.
    async fn create_turn_keyed(
        &self,
        session_id: &str,
        run_id: &RunId,
        created: RunCreated,
        holder: &str,
        ttl: Duration,
        key: Option<&str>,
    ) -> Result<(Event, Lease, u32)>;

    /// The turns whose messages are recorded, and those messages: the conversation so far,
    /// as `(turn, message)` in order, for turns before `before_turn`.
    async fn conversation(&self, session_id: &str, before_turn: u32)
    -> Result<Vec<(u32, Message)>>;

    /// The turns whose messages are recorded.
    async fn recorded_turns(&self, session_id: &str) -> Result<Vec<u32>>;

    /// Records an ended turn's own messages. Idempotent: a turn recorded already keeps what
    /// it has.
    async fn record_turn_messages(
        &self,
        session_id: &str,
        turn: u32,
        messages: &[Message],
    ) -> Result<()>;

    /// Queues a message for the session's next turn; returns how many wait now.
    async fn enqueue(&self, session_id: &str, text: &str) -> Result<u32> {
        self.enqueue_keyed(session_id, text, None).await
    }

    /// [`SessionStore::enqueue`], with `key` recorded in the same write (as in
    /// [`SessionStore::create_turn_keyed`]).
    async fn enqueue_keyed(&self, session_id: &str, text: &str, key: Option<&str>) -> Result<u32>;

    /// How many messages wait in the session's queue; a peek, nothing is taken. A caller
    /// that only acts when one waits (a turn checkpoint before
    /// [`SessionStore::start_next_queued`]) asks this first; the answer may be stale by the
    /// time it acts, which the atomic start then settles.
    async fn queued(&self, session_id: &str) -> Result<u32>;

    /// Takes the oldest queued message, if any.
    async fn dequeue(&self, session_id: &str) -> Result<Option<String>>;

    /// Takes the oldest queued message and makes it the session's next turn, in one write:
    /// the run of `created` with the message as its input (as
    /// [`SessionStore::create_turn`]), the message gone from the queue, and its key, if it
    /// was queued with one, kept and now naming the turn's run. `None` (nothing written)
    /// when nothing waits, whether or not a turn runs;
    /// [`Error::TurnInProgress`](crate::Error::TurnInProgress) (nothing written) when a
    /// message waits behind a running turn. A caller that crashed before or after the write
    /// leaves the message queued or its turn made, never neither: a second caller starts
    /// it or finds the turn running.
    async fn start_next_queued(
        &self,
        session_id: &str,
        run_id: &RunId,
        created: RunCreated,
        holder: &str,
        ttl: Duration,
    ) -> Result<Option<QueuedTurn>>;
}

/// A queued message made the session's next turn by
/// [`SessionStore::start_next_queued`].
#[derive(Clone, Debug)]
pub struct QueuedTurn {
    /// The turn's `run_created`.
    pub event: Event,
    /// The caller's lease of the turn's run.
    pub lease: Lease,
    pub turn: u32,
    /// The message, now the turn's input.
    pub text: String,
    /// The key it was queued with, now the turn's.
    pub key: Option<String>,
}
