//! [`Bot`]: the long-polling loop. Each update is handled, then the stored offset moves past
//! it, so a restart loses none. An update handled again (the process died, or the offset
//! could not be stored, after handling it) has no second effect: its key
//! `telegram:<bot>:<update id>` is recorded in the same write as the turn or the queued
//! message it made (and taken by a reason or `/cancel`), and a taken key is skipped; the
//! sessions it makes are named by it (`telegram-<chat>-<update id>`), so `/new` makes one;
//! an upload already saved is found by its bytes; a button press decides at most once (the
//! first decision stands). A notice the bot sent may be sent again: Telegram has no
//! idempotent send. Messages from people not allowed get one polite refusal naming their
//! id (remembered in the store, so once across restarts); group chats are refused unless
//! listed. An allowed person's message is a turn of the session their chat is bound to,
//! driven on its own task by this process's worker (which has the Telegram channel);
//! presses decide approvals. Commands: `/start`, `/new`, `/agent NAME`, `/files`,
//! `/cancel`, `/status`.

use std::sync::Arc;
use std::time::Duration;

use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use toren_protocol::{AgentSpec, ChannelBinding, EventKind, RunStatus};
use toren_runtime::{RunService, Sent};
use toren_store::{ChatStore, Lease, Session};
use toren_worker::{Outcome, Worker};

use crate::api::BotApi;
use crate::channel::TELEGRAM;
use crate::error::Result;
use crate::render::{self, escape_html};
use crate::turn::{TurnView, Turns};
use crate::types::{Message, Update, User};
use toren_display::visible;

mod approvals;
mod budget;
mod commands;
mod files;

/// Finds an agent file by name (the binary's agents directory).
pub trait AgentFinder: Send + Sync {
    fn find(&self, name: &str) -> std::result::Result<AgentSpec, String>;
}

/// How the bot behaves.
#[derive(Clone, Debug)]
pub struct BotSettings {
    /// The Telegram user ids that may talk to it.
    pub users: Vec<i64>,
    /// The group chats it answers in.
    pub groups: Vec<i64>,
    /// The agent of new chats' sessions.
    pub agent: String,
    /// The agents `/agent NAME` may pick (the default is always allowed).
    pub agents: Vec<String>,
    /// `getUpdates`' long-polling timeout.
    pub poll_timeout: Duration,
    /// The least time between two edits of a streaming reply.
    pub edit_interval: Duration,
}

/// The bot. Cheap to clone (everything shared).
#[derive(Clone)]
pub struct Bot {
    pub(crate) api: BotApi,
    pub(crate) service: RunService,
    pub(crate) chats: Arc<dyn ChatStore>,
    pub(crate) worker: Arc<Worker>,
    pub(crate) turns: Arc<Turns>,
    pub(crate) agents: Arc<dyn AgentFinder>,
    pub(crate) settings: Arc<BotSettings>,
    pub(crate) holder: String,
    stop: CancellationToken,
}

impl Bot {
    /// A bot driving its turns with `worker` (built with `turns` among its observers and
    /// the Telegram channel), deciding and sending through `service`.
    #[expect(
        clippy::too_many_arguments,
        reason = "the bot's parts, each built by the binary"
    )]
    pub fn new(
        api: BotApi,
        service: RunService,
        chats: Arc<dyn ChatStore>,
        worker: Arc<Worker>,
        turns: Arc<Turns>,
        agents: Arc<dyn AgentFinder>,
        settings: BotSettings,
        holder: String,
    ) -> Self {
        Self {
            api,
            service,
            chats,
            worker,
            turns,
            agents,
            settings: Arc::new(settings),
            holder,
            stop: CancellationToken::new(),
        }
    }

    fn stream(&self) -> String {
        format!("telegram:{}", self.api.bot_id())
    }

    /// Polls and handles updates until `stop` fires; turns being driven then stop where
    /// they are (they stay resumable, and the next start resumes them). Fails only when
    /// Telegram refuses the token.
    pub async fn run(self, stop: CancellationToken) -> Result<()> {
        let mut tasks = JoinSet::new();
        self.resume_unfinished(&mut tasks).await;
        let stream = self.stream();
        let mut backoff = Duration::from_secs(1);
        while !stop.is_cancelled() {
            let offset = match self.chats.chat_offset(&stream).await {
                Ok(offset) => offset,
                Err(e) => {
                    tracing::warn!("cannot read the Telegram offset: {e}");
                    pause(&stop, &mut backoff).await;
                    continue;
                }
            };
            let updates = tokio::select! {
                () = stop.cancelled() => break,
                updates = self.api.get_updates(offset, self.settings.poll_timeout) => updates,
            };
            let updates = match updates {
                Ok(updates) => {
                    backoff = Duration::from_secs(1);
                    updates
                }
                Err(e) if e.is_unauthorized() => {
                    self.stop.cancel();
                    return Err(e);
                }
                Err(e) => {
                    tracing::warn!("cannot get Telegram updates (trying again): {e}");
                    pause(&stop, &mut backoff).await;
                    continue;
                }
            };
            for update in updates {
                let id = update.update_id;
                self.handle(update, &mut tasks).await;
                // Moved past only once handled.
                if let Err(e) = self.chats.advance_chat_offset(&stream, id + 1).await {
                    tracing::warn!("cannot store the Telegram offset: {e}");
                }
            }
            while tasks.try_join_next().is_some() {}
        }
        self.stop.cancel();
        while tasks.join_next().await.is_some() {}
        Ok(())
    }

    async fn handle(&self, update: Update, tasks: &mut JoinSet<()>) {
        if let Some(press) = update.callback_query {
            self.press(press).await;
        } else if let Some(message) = update.message {
            let key = format!("{}:{}", self.stream(), update.update_id);
            match self.chats.message_taken(&key).await {
                Ok(false) => {}
                Ok(true) => {
                    tracing::info!(
                        update = update.update_id,
                        "a message handled before is not handled again"
                    );
                    return;
                }
                Err(e) => tracing::warn!("cannot tell whether a message was handled: {e}"),
            }
            let update = Handling {
                id: update.update_id,
                key,
            };
            self.message(message, &update, tasks).await;
        }
    }

    fn allowed(&self, user: &User) -> bool {
        self.settings.users.contains(&user.id)
    }

    /// Says once to a stranger (or a group) that the bot is not for them: remembered in the
    /// store before it is said, so at most once across restarts.
    async fn refuse(&self, chat: i64, text: String, key: String) {
        match self
            .chats
            .refuse_once(&format!("{}:{key}", self.stream()))
            .await
        {
            Ok(true) => {
                tracing::info!(chat, "refused a message from someone not allowed ({key})");
                self.say(chat, &text).await;
            }
            Ok(false) => {}
            Err(e) => tracing::warn!("cannot record a refusal (not sent): {e}"),
        }
    }

    /// Sends a plain notice (HTML), logging a failure.
    pub(crate) async fn say(&self, chat: i64, html: &str) {
        for part in render::split(html, render::MESSAGE_LIMIT) {
            if let Err(e) = self.api.send_message(chat, &part, true, None).await {
                tracing::warn!("cannot send to Telegram: {e}");
            }
        }
    }

    async fn message(&self, message: Message, update: &Handling, tasks: &mut JoinSet<()>) {
        let chat = message.chat.id;
        let Some(user) = message.from.clone() else {
            return;
        };
        if message.chat.kind != "private" && !self.settings.groups.contains(&chat) {
            self.refuse(
                chat,
                format!(
                    "Sorry, this bot does not work in this group. An operator can allow it by adding {chat} to TOREN_TELEGRAM_GROUPS."
                ),
                format!("group:{chat}"),
            )
            .await;
            return;
        }
        if !self.allowed(&user) {
            self.refuse(
                chat,
                format!(
                    "Sorry, you may not talk to this bot. If you should, ask its operator to add your Telegram user id {} to TOREN_TELEGRAM_USERS.",
                    user.id
                ),
                format!("user:{}", user.id),
            )
            .await;
            return;
        }
        let text = message
            .text
            .clone()
            .or_else(|| message.caption.clone())
            .unwrap_or_default();
        if message.text.is_some() && text.starts_with('/') {
            self.command(chat, &user, &text, update, tasks).await;
            return;
        }
        if message.text.is_some() && self.reason(chat, &user, &text, update).await {
            return;
        }
        let session = match self.session_of(chat, update.id).await {
            Ok(session) => session,
            Err(e) => {
                self.say(
                    chat,
                    &format!(
                        "Cannot open this chat's session: {}",
                        escape_html(&visible(&e))
                    ),
                )
                .await;
                return;
            }
        };
        let mut input = text;
        if message.photo.is_some() || message.document.is_some() {
            match files::save_upload(self, &session, &message).await {
                Ok(note) => {
                    if !input.is_empty() {
                        input.push_str("\n\n");
                    }
                    input.push_str(&note);
                }
                Err(e) => {
                    self.say(
                        chat,
                        &format!("Cannot save your file: {}", escape_html(&visible(&e))),
                    )
                    .await;
                    return;
                }
            }
        }
        if input.trim().is_empty() {
            return;
        }
        self.send(chat, &session, &input, update, tasks).await;
    }

    /// The message becomes a turn (driven on its own task) or waits behind the running one.
    async fn send(
        &self,
        chat: i64,
        session: &Session,
        input: &str,
        update: &Handling,
        tasks: &mut JoinSet<()>,
    ) {
        let sent = self
            .service
            .send_keyed(
                session,
                input,
                &self.holder,
                Some(binding(chat)),
                Some(&update.key),
            )
            .await;
        match sent {
            Ok(Sent::Turn { created, .. }) => {
                let bot = self.clone();
                let session = session.clone();
                tasks.spawn(async move { bot.drive(chat, session, created.lease).await });
            }
            Ok(Sent::Queued { waiting }) => {
                self.say(
                    chat,
                    &format!("A turn is still running; your message waits as the next turn ({waiting} waiting)."),
                )
                .await;
            }
            // Handled before: the turn (or the queue) has it; the turn resumes on its own.
            Err(toren_runtime::Error::Store(toren_store::Error::MessageTaken { .. })) => {
                tracing::info!(update = update.id, "a message handled before made no turn");
            }
            Err(e) => {
                self.say(
                    chat,
                    &format!(
                        "Cannot start the turn: {}",
                        escape_html(&visible(&e.to_string()))
                    ),
                )
                .await;
            }
        }
    }

    /// The session `chat` talks to: its bound one, or a new one of the default agent
    /// (named by the update that needed it).
    pub(crate) async fn session_of(
        &self,
        chat: i64,
        update: i64,
    ) -> std::result::Result<Session, String> {
        let key = chat.to_string();
        if let Some(name) = self
            .chats
            .chat_session(&key)
            .await
            .map_err(|e| e.to_string())?
        {
            match self.service.session(&name).await {
                Ok(session) => return Ok(session),
                Err(toren_runtime::Error::Store(toren_store::Error::SessionNotFound(_))) => {}
                Err(e) => return Err(e.to_string()),
            }
        }
        let agent = self.agents.find(&self.settings.agent)?;
        self.new_session(chat, agent, update).await
    }

    /// The name of the session the update `update` of `chat` makes.
    pub(crate) fn session_name(chat: i64, update: i64) -> String {
        format!("telegram-{chat}-{update}")
    }

    /// A new session of `agent` for `chat`, named by the update `update` that asks for it,
    /// bound to it (the old one is kept). The same update handled again finds the session
    /// it made and binds that.
    pub(crate) async fn new_session(
        &self,
        chat: i64,
        agent: AgentSpec,
        update: i64,
    ) -> std::result::Result<Session, String> {
        let name = Self::session_name(chat, update);
        let session = match self.service.create_channel_session(&name, agent).await {
            Ok(session) => session,
            Err(toren_runtime::Error::Store(toren_store::Error::SessionExists(_))) => self
                .service
                .session(&name)
                .await
                .map_err(|e| e.to_string())?,
            Err(e) => return Err(e.to_string()),
        };
        self.chats
            .bind_chat(&chat.to_string(), &session.name)
            .await
            .map_err(|e| e.to_string())?;
        Ok(session)
    }

    /// Drives a turn of `session` and shows it in `chat`; then the messages that waited.
    async fn drive(&self, chat: i64, session: Session, lease: Lease) {
        let mut lease = Some(lease);
        while let Some(current) = lease.take() {
            let ended = self.drive_one(chat, current).await;
            if !ended || self.stop.is_cancelled() {
                return;
            }
            match self
                .service
                .next_queued(&session, &self.holder, Some(binding(chat)))
                .await
            {
                Ok(Some(Sent::Turn { created, .. })) => lease = Some(created.lease),
                Ok(_) => {}
                Err(e) => tracing::warn!("cannot start the next queued turn: {e}"),
            }
        }
    }

    /// One turn; whether it ended.
    async fn drive_one(&self, chat: i64, lease: Lease) -> bool {
        let run = lease.run_id.clone();
        let mut signals = self.turns.register(&run);
        let mut view = TurnView::new(
            self.api.clone(),
            Arc::clone(&self.chats),
            chat,
            run.clone(),
            self.settings.edit_interval,
        );
        let typing = {
            let api = self.api.clone();
            let done = CancellationToken::new();
            let stop = done.clone();
            tokio::spawn(async move {
                loop {
                    if let Err(e) = api.typing(chat).await {
                        tracing::debug!("cannot show typing: {e}");
                    }
                    tokio::select! {
                        () = stop.cancelled() => break,
                        () = tokio::time::sleep(Duration::from_secs(4)) => {}
                    }
                }
            });
            done
        };
        let drive = self.worker.drive(lease, &self.stop);
        let mut drive = std::pin::pin!(drive);
        let outcome = loop {
            let wait = view.due();
            tokio::select! {
                outcome = &mut drive => break outcome,
                Some(signal) = signals.recv() => view.apply(signal).await,
                () = sleep_opt(wait) => view.flush().await,
            }
        };
        typing.cancel();
        self.turns.unregister(&run);
        while let Ok(signal) = signals.try_recv() {
            view.apply(signal).await;
        }
        let (note, ended) = match outcome {
            Ok(Outcome::Ended {
                status: RunStatus::Completed,
                ..
            }) => (None, true),
            Ok(Outcome::Ended {
                status: RunStatus::Cancelled,
                ..
            }) => (
                Some("_Turn cancelled; the session is kept._".to_owned()),
                true,
            ),
            Ok(Outcome::Ended { output, .. }) => (Some(format!("The turn failed: {output}")), true),
            // Not returned by this worker, which does not park: a turn paused at its budget
            // waits in its task, its chat offered a "Raise the budget" button (`turn.rs`).
            Ok(
                Outcome::Interrupted | Outcome::AwaitingApproval { .. } | Outcome::AwaitingBudget,
            ) => (None, false),
            Err(e) => (
                Some(format!(
                    "The turn stopped: {e}. It resumes when the bot starts again."
                )),
                false,
            ),
        };
        view.finish(note).await;
        ended
    }

    /// Turns of Telegram chats a stopped process left unfinished are driven again.
    async fn resume_unfinished(&self, tasks: &mut JoinSet<()>) {
        let Ok(sessions) = self.service.sessions().await else {
            return;
        };
        for session in sessions {
            let Ok(view) = self.service.session_view(&session.name).await else {
                continue;
            };
            let Some(last) = view.turns.last() else {
                continue;
            };
            if last.status.is_terminal() {
                continue;
            }
            let Ok(events) = self.service.events(&last.run_id, 0).await else {
                continue;
            };
            let chat = events.iter().find_map(|e| match &e.kind {
                EventKind::RunCreated(created) => created
                    .channel
                    .as_ref()
                    .filter(|c| c.kind == TELEGRAM)
                    .and_then(|c| c.address.parse::<i64>().ok()),
                _ => None,
            });
            let Some(chat) = chat else { continue };
            let Ok(summary) = self.service.summary(&last.run_id).await else {
                continue;
            };
            if !RunService::is_resumable(&summary) {
                continue;
            }
            match self.worker.acquire(&last.run_id).await {
                Ok(lease) => {
                    tracing::info!(run_id = %last.run_id, chat, "resuming a Telegram turn");
                    let bot = self.clone();
                    tasks.spawn(async move { bot.drive(chat, session, lease).await });
                }
                Err(e) => tracing::warn!(run_id = %last.run_id, "cannot resume the turn: {e}"),
            }
        }
    }
}

/// The update being handled: its id and its message key.
pub(crate) struct Handling {
    pub(crate) id: i64,
    pub(crate) key: String,
}

/// A run bound to `chat`.
pub(crate) fn binding(chat: i64) -> ChannelBinding {
    ChannelBinding {
        kind: TELEGRAM.to_owned(),
        address: chat.to_string(),
    }
}

async fn sleep_opt(wait: Option<Duration>) {
    match wait {
        Some(wait) => tokio::time::sleep(wait).await,
        None => std::future::pending().await,
    }
}

/// Waits `backoff` (or until `stop`), doubling it up to 30 s.
async fn pause(stop: &CancellationToken, backoff: &mut Duration) {
    tokio::select! {
        () = stop.cancelled() => {}
        () = tokio::time::sleep(*backoff) => {}
    }
    *backoff = (*backoff * 2).min(Duration::from_secs(30));
}
