//! Sessions through the run service: a conversation of many turns with one agent, in one
//! workspace. A session pins its agent spec and policy when it is created (the workspace
//! `$TOREN_SANDBOX_ROOT/<session id>/workspace`, and the session's id as the sandbox key, so
//! one container serves all its turns); each message becomes a turn, a run bound to the
//! session that starts from the conversation so far. One turn runs at a time: a message
//! sent while one runs is queued as the next turn. The conversation of an ended turn is
//! recorded in the session store (computed from its log, deterministically), so the next
//! turn, and a resumed turn, start from exactly the same history.

use std::sync::Arc;

use async_trait::async_trait;
use toren_agent::RunState;
use toren_protocol::{
    AgentSpec, ChannelBinding, Message, RunCreated, RunId, SessionTurn, TurnStart,
};
use toren_sandbox::Workspace;
use toren_store::{Session, SessionStore, SessionTurnRow};

use crate::{Created, Error, Result, RunService};

/// What became of a message sent to a session.
#[derive(Clone, Debug)]
pub enum Sent {
    /// It is the session's new turn, created with the caller's lease.
    Turn { created: Box<Created>, turn: u32 },
    /// A turn is running: the message waits as the next turn (`waiting` messages now).
    Queued { waiting: u32 },
}

/// A session with its turns.
#[derive(Clone, Debug)]
pub struct SessionView {
    pub session: Session,
    pub turns: Vec<SessionTurnRow>,
    /// The workspace's host path.
    pub workspace: Option<String>,
}

/// The prefix of a session id (`ses_…`): a name cannot start with it, so that a name
/// never shadows an id wherever a session is looked up by either.
pub const SESSION_ID_PREFIX: &str = "ses_";

/// The prefixes of the names chat front doors give their sessions (`telegram-CHAT-UPDATE`):
/// only [`RunService::create_channel_session`] makes such a session, so another front door
/// cannot make one that a chat would then adopt.
pub const CHANNEL_SESSION_PREFIXES: [&str; 1] = ["telegram-"];

/// A valid session name: what people type, safe in paths and terminals, never an id's
/// look-alike; `channel`: made by a chat front door, whose names it may take.
fn check_name(name: &str, channel: bool) -> Result<()> {
    let ok = !name.is_empty()
        && name.len() <= 64
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.'))
        && !name.starts_with('.');
    if !ok {
        return Err(Error::BadSessionName {
            name: name.to_owned(),
        });
    }
    if name.starts_with(SESSION_ID_PREFIX) {
        return Err(Error::ReservedSessionName {
            name: name.to_owned(),
            why: format!("names starting with `{SESSION_ID_PREFIX}` are session ids"),
        });
    }
    if !channel
        && let Some(prefix) = CHANNEL_SESSION_PREFIXES
            .iter()
            .find(|p| name.starts_with(**p))
    {
        return Err(Error::ReservedSessionName {
            name: name.to_owned(),
            why: format!("names starting with `{prefix}` are a chat front door's sessions"),
        });
    }
    Ok(())
}

impl RunService {
    pub(crate) fn session_store(&self) -> Result<&Arc<dyn SessionStore>> {
        self.sessions.as_ref().ok_or(Error::NoSessions)
    }

    /// Creates the session `name` of `agent`: its policy resolved and pinned, its workspace
    /// made.
    pub async fn create_session(&self, name: &str, agent: AgentSpec) -> Result<Session> {
        self.create_named_session(name, agent, false, None).await
    }

    /// [`Self::create_session`] with the session's workspace first filled with `seed` (a
    /// copy of a directory, or a clone of a repository the agent's network policy lets it
    /// reach: `toren_worker::seed_workspace`). Nothing is created when the seed is
    /// refused; the first turn's checkpoint holds the copy, so going back to before turn
    /// 1 gives it back.
    pub async fn create_session_seeded(
        &self,
        name: &str,
        agent: AgentSpec,
        seed: &toren_worker::SeedSource,
    ) -> Result<Session> {
        self.create_named_session(name, agent, false, Some(seed))
            .await
    }

    /// [`Self::create_session`] for a chat front door, whose own names
    /// ([`CHANNEL_SESSION_PREFIXES`]) only it may take.
    pub async fn create_channel_session(&self, name: &str, agent: AgentSpec) -> Result<Session> {
        self.create_named_session(name, agent, true, None).await
    }

    async fn create_named_session(
        &self,
        name: &str,
        agent: AgentSpec,
        channel: bool,
        seed: Option<&toren_worker::SeedSource>,
    ) -> Result<Session> {
        check_name(name, channel)?;
        let store = self.session_store()?;
        let id = new_session_id();
        let policy = match self.resolve_policy(&agent)? {
            Some(mut policy) => {
                let workspace = Workspace::create(&self.settings.policy.sandbox_root, &id)
                    .map_err(Error::Workspace)?;
                policy.workspace = Some(workspace.path().display().to_string());
                policy.sandbox_key = Some(id.clone());
                Some(policy)
            }
            None => None,
        };
        if let Some(seed) = seed {
            let Some(policy) = &policy else {
                return Err(toren_worker::Error::Seed {
                    why: format!(
                        "agent `{}` has no sandbox, so it has no workspace to start as a copy \
                         of a project; give it one (`sandbox: true` in its agent file)",
                        agent.name
                    ),
                }
                .into());
            };
            if let Err(e) = toren_worker::seed_workspace(policy, seed, self.seed_limits).await {
                crate::service::discard_new_workspace(policy);
                return Err(e.into());
            }
        }
        let session = Session {
            id,
            name: name.to_owned(),
            agent,
            policy,
            created_at: jiff::Timestamp::now(),
        };
        store.create_session(&session).await?;
        Ok(session)
    }

    /// The session called `name`.
    pub async fn session(&self, name: &str) -> Result<Session> {
        Ok(self.session_store()?.session(name).await?)
    }

    /// Every session, newest first.
    pub async fn sessions(&self) -> Result<Vec<Session>> {
        Ok(self.session_store()?.sessions().await?)
    }

    /// The session called `name` with its turns.
    pub async fn session_view(&self, name: &str) -> Result<SessionView> {
        let store = self.session_store()?;
        let session = store.session(name).await?;
        let turns = store.turns(&session.id).await?;
        let workspace = session.policy.as_ref().and_then(|p| p.workspace.clone());
        Ok(SessionView {
            session,
            turns,
            workspace,
        })
    }

    /// Removes the session's record (its turns' runs and logs stay). Refused while a turn
    /// runs.
    pub async fn remove_session(&self, name: &str) -> Result<Session> {
        let store = self.session_store()?;
        let session = store.session(name).await?;
        if let Some(open) = store
            .turns(&session.id)
            .await?
            .into_iter()
            .find(|t| !t.status.is_terminal())
        {
            return Err(Error::Store(toren_store::Error::TurnInProgress {
                session: session.name,
                turn: open.turn,
                run_id: open.run_id,
            }));
        }
        Ok(store.remove_session(name).await?)
    }

    /// Sends `text` to the session: it becomes the next turn at once (with `holder`'s
    /// lease, bound to `channel`: where files the agent sends reach the person), or waits as
    /// the next turn if one is running.
    pub async fn send(
        &self,
        session: &Session,
        text: &str,
        holder: &str,
        channel: Option<ChannelBinding>,
    ) -> Result<Sent> {
        self.send_keyed(session, text, holder, channel, None).await
    }

    /// [`RunService::send`] of a message a chat front door names by `key` (e.g.
    /// `telegram:<bot>:<update id>`): the key is recorded in the same write as the turn or
    /// the queued message, so the same message sent again (a front door that crashed
    /// before remembering it had handled it) is
    /// `Error::Store(toren_store::Error::MessageTaken)` and makes no second turn.
    pub async fn send_keyed(
        &self,
        session: &Session,
        text: &str,
        holder: &str,
        channel: Option<ChannelBinding>,
        key: Option<&str>,
    ) -> Result<Sent> {
        // Refused before anything is written if a secret the session injects is unset
        // here; what is kept (a turn's input, a queued message) is redacted of its values.
        self.require_secrets(&session.agent.name, session.policy.as_ref())?;
        let text = &self.redact_input(session.policy.as_ref(), text.to_owned());
        let store = self.session_store()?;
        let turns = store.turns(&session.id).await?;
        if turns.iter().any(|t| !t.status.is_terminal()) {
            let waiting = store.enqueue_keyed(&session.id, text, key).await?;
            return Ok(Sent::Queued { waiting });
        }
        self.new_turn(session, text, holder, channel, key).await
    }

    /// The oldest queued message as the next turn (bound to `channel`), once no turn runs.
    /// Taking it off the queue and making its turn are one write
    /// ([`SessionStore::start_next_queued`]): a process that dies around it leaves the
    /// message queued or its turn made (which a worker resumes), and a queued message's
    /// chat key stays with its turn. The turn's checkpoint is taken just before that write,
    /// and only when a message waits.
    pub async fn next_queued(
        &self,
        session: &Session,
        holder: &str,
        channel: Option<ChannelBinding>,
    ) -> Result<Option<Sent>> {
        let store = self.session_store()?;
        let turns = store.turns(&session.id).await?;
        if turns.iter().any(|t| !t.status.is_terminal()) {
            return Ok(None);
        }
        // The turn's checkpoint (a walk of the workspace) is taken only when a message
        // waits to become a turn: most calls (after every turn of a chat) find none.
        if store.queued(&session.id).await? == 0 {
            return Ok(None);
        }
        self.record_ended_turns(session).await?;
        let run_id = RunId::new();
        match store
            .start_next_queued(
                &session.id,
                &run_id,
                self.turn_created(session, String::new(), channel).await,
                holder,
                self.settings.lease_ttl,
            )
            .await
        {
            Ok(Some(started)) => Ok(Some(Sent::Turn {
                created: Box::new(Created {
                    run_id,
                    lease: started.lease,
                    policy: session.policy.clone(),
                }),
                turn: started.turn,
            })),
            Ok(None) => Ok(None),
            // Another process started a turn meanwhile (perhaps this very message's).
            Err(toren_store::Error::TurnInProgress { .. }) => Ok(None),
            Err(e) => Err(e.into()),
        }
    }

    /// The `run_created` of a turn of `session` with `input`, bound to `channel` (the store
    /// fills in the turn), with a checkpoint of the workspace taken now, before the turn
    /// begins (`TurnStart::checkpoint`; a rewind goes back to it).
    pub(crate) async fn turn_created(
        &self,
        session: &Session,
        input: String,
        channel: Option<ChannelBinding>,
    ) -> RunCreated {
        let checkpoint = match &session.policy {
            Some(policy) => toren_worker::checkpoint_workspace(policy).await,
            None => None,
        };
        RunCreated {
            agent: session.agent.clone(),
            policy: session.policy.clone(),
            input,
            session: None,
            channel,
            start: Some(TurnStart {
                checkpoint,
                rewound: None,
                forked: None,
                seeded: None,
            }),
        }
    }

    async fn new_turn(
        &self,
        session: &Session,
        text: &str,
        holder: &str,
        channel: Option<ChannelBinding>,
        key: Option<&str>,
    ) -> Result<Sent> {
        let store = self.session_store()?;
        // The conversation of every ended turn is recorded before a new one starts.
        self.record_ended_turns(session).await?;
        let run_id = RunId::new();
        let created = self.turn_created(session, text.to_owned(), channel).await;
        match store
            .create_turn_keyed(
                &session.id,
                &run_id,
                created,
                holder,
                self.settings.lease_ttl,
                key,
            )
            .await
        {
            Ok((_, lease, turn)) => Ok(Sent::Turn {
                created: Box::new(Created {
                    run_id,
                    lease,
                    policy: session.policy.clone(),
                }),
                turn,
            }),
            // Another process started a turn meanwhile: this message waits for it.
            Err(toren_store::Error::TurnInProgress { .. }) => {
                let waiting = store.enqueue_keyed(&session.id, text, key).await?;
                Ok(Sent::Queued { waiting })
            }
            Err(e) => Err(e.into()),
        }
    }

    /// Records the conversation of each ended turn not recorded yet, in order: its own
    /// messages, folded from its log on top of the turns before it.
    pub(crate) async fn record_ended_turns(&self, session: &Session) -> Result<()> {
        let store = self.session_store()?;
        let turns = store.turns(&session.id).await?;
        let recorded: std::collections::BTreeSet<u32> = store
            .recorded_turns(&session.id)
            .await?
            .into_iter()
            .collect();
        for turn in turns.iter().filter(|t| t.status.is_terminal()) {
            if recorded.contains(&turn.turn) {
                continue;
            }
            let history = self.conversation_before(&session.id, turn.turn).await?;
            let events = self.store().read(&turn.run_id, 0).await?;
            // A turn whose log cannot be folded adds nothing to the conversation.
            let own = RunState::from_events_with_history(&history, &events)
                .map(|state| state.own_messages())
                .unwrap_or_default();
            store
                .record_turn_messages(&session.id, turn.turn, &own)
                .await?;
        }
        Ok(())
    }

    /// The conversation turn `turn` continues: the session's line before it
    /// (`session_line`: its recorded turns, after its rewinds).
    async fn conversation_before(&self, session_id: &str, turn: u32) -> Result<Vec<Message>> {
        Ok(self
            .line_before(session_id, turn)
            .await?
            .conversation
            .into_iter()
            .map(|(_, message)| message)
            .collect())
    }

    /// The whole conversation of the session so far (ended turns), for display.
    pub async fn conversation(&self, session: &Session) -> Result<Vec<(u32, Message)>> {
        self.record_ended_turns(session).await?;
        Ok(self.line_before(&session.id, u32::MAX).await?.conversation)
    }
}

#[async_trait]
impl toren_worker::HistorySource for RunService {
    async fn history(&self, turn: &SessionTurn) -> Result<Vec<Message>, String> {
        let store = self.session_store().map_err(|e| e.to_string())?;
        let session = store.session(&turn.name).await.map_err(|e| e.to_string())?;
        if session.id != turn.id {
            return Err(format!(
                "the session `{}` was removed and made anew since this turn began",
                turn.name
            ));
        }
        self.record_ended_turns(&session)
            .await
            .map_err(|e| e.to_string())?;
        self.conversation_before(&session.id, turn.turn)
            .await
            .map_err(|e| e.to_string())
    }
}

/// A session id: `ses_` and a ULID, lower case like run ids (sortable by creation).
fn new_session_id() -> String {
    format!("ses_{}", ulid::Ulid::generate().to_string().to_lowercase())
}
