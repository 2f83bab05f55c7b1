//! The bot's commands: `/start` (what this is, which agent, where the workspace is),
//! `/new` (a fresh session; the old one is kept), `/agent NAME`, `/files` (the workspace
//! tree), `/cancel` (the running turn), `/undo` (back to before the last turn, workspace and
//! conversation), `/status`, `/help`.

use tokio::task::JoinSet;
use toren_display::visible;
use toren_runtime::{Actor, ApprovalState};

use super::{Bot, Handling, files};
use crate::channel::TELEGRAM;
use crate::render::escape_html;
use crate::types::User;

const HELP: &str = "Send a message and the agent works on it in its workspace; files you send are saved under uploads/.\n\
/new — a fresh session (the old one is kept)\n\
/agent NAME — a new session with another agent\n\
/files — the workspace's files\n\
/cancel — stop the running turn\n\
/undo — back to before the last turn: its workspace changes and its messages undone\n\
/status — where the session stands";

impl Bot {
    pub(super) async fn command(
        &self,
        chat: i64,
        user: &User,
        text: &str,
        update: &Handling,
        _tasks: &mut JoinSet<()>,
    ) {
        let mut words = text.split_whitespace();
        let command = words.next().unwrap_or_default();
        // `/cmd@botname` in groups.
        let command = command.split('@').next().unwrap_or(command);
        let argument = words.next();
        let reply = match command {
            "/start" | "/help" => self.start(chat, update.id).await,
            "/new" => self.fresh(chat, update.id).await,
            "/agent" => self.agent(chat, argument, update.id).await,
            "/files" => match self.session_of(chat, update.id).await {
                Ok(session) => files::tree(&session).await,
                Err(e) => format!(
                    "Cannot open this chat's session: {}",
                    escape_html(&visible(&e))
                ),
            },
            "/cancel" => self.cancel(chat, user, update).await,
            "/undo" => self.undo(chat, user, update).await,
            "/status" => self.status(chat, update.id).await,
            _ => format!(
                "Unknown command {}.\n{HELP}",
                escape_html(&visible(command))
            ),
        };
        self.say(chat, &reply).await;
    }

    /// `/new`: a session of the chat's agent (the default when none is bound) named by
    /// the update, so the same `/new` handled again makes no second one.
    async fn fresh(&self, chat: i64, update: i64) -> String {
        let name = Self::session_name(chat, update);
        let old = match self.chats.chat_session(&chat.to_string()).await {
            Ok(bound) => bound.filter(|bound| *bound != name),
            Err(e) => {
                return format!(
                    "Cannot read this chat's session: {}",
                    escape_html(&visible(&e.to_string()))
                );
            }
        };
        let agent = match &old {
            Some(old) => self.service.session(old).await.ok().map(|s| s.agent),
            None => None,
        };
        let agent = match agent {
            Some(agent) => agent,
            None => match self.agents.find(&self.settings.agent) {
                Ok(agent) => agent,
                Err(e) => return format!("Cannot load the agent: {}", escape_html(&visible(&e))),
            },
        };
        match self.new_session(chat, agent, update).await {
            Ok(session) => {
                let mut text = format!(
                    "New session <code>{}</code> with agent <b>{}</b>",
                    escape_html(&session.name),
                    escape_html(&visible(&session.agent.name)),
                );
                match old {
                    Some(old) => text.push_str(&format!(
                        "; the old one (<code>{}</code>) is kept.",
                        escape_html(&visible(&old))
                    )),
                    None => text.push('.'),
                }
                text
            }
            Err(e) => format!("Cannot start a new session: {}", escape_html(&visible(&e))),
        }
    }

    async fn start(&self, chat: i64, update: i64) -> String {
        match self.session_of(chat, update).await {
            Ok(session) => {
                let workspace = session
                    .policy
                    .as_ref()
                    .and_then(|p| p.workspace.clone())
                    .unwrap_or_else(|| "none (this agent has no sandbox)".to_owned());
                format!(
                    "This is Toren: you talk to a sandboxed agent that keeps its workspace across days. Commands it wants to run may ask for your approval here.\n\
                     Agent: <b>{}</b> ({})\nSession: <code>{}</code>\nWorkspace: <code>{}</code>\n\n{}",
                    escape_html(&visible(&session.agent.name)),
                    escape_html(&visible(&session.agent.model)),
                    escape_html(&session.name),
                    escape_html(&visible(&workspace)),
                    escape_html(HELP)
                )
            }
            Err(e) => format!(
                "Cannot open this chat's session: {}",
                escape_html(&visible(&e))
            ),
        }
    }

    async fn agent(&self, chat: i64, name: Option<&str>, update: i64) -> String {
        let Some(name) = name else {
            let mut names = vec![self.settings.agent.clone()];
            for name in &self.settings.agents {
                if !names.contains(name) {
                    names.push(name.clone());
                }
            }
            return format!(
                "Usage: /agent NAME, one of: {}",
                escape_html(&names.join(", "))
            );
        };
        if name != self.settings.agent && !self.settings.agents.iter().any(|a| a == name) {
            return format!(
                "There is no agent {} here; TOREN_AGENTS lists those you may pick.",
                escape_html(&visible(name))
            );
        }
        let agent = match self.agents.find(name) {
            Ok(agent) => agent,
            Err(e) => {
                return format!(
                    "Cannot load agent {}: {}",
                    escape_html(&visible(name)),
                    escape_html(&visible(&e))
                );
            }
        };
        match self.new_session(chat, agent, update).await {
            Ok(session) => format!(
                "New session <code>{}</code> with agent <b>{}</b>.",
                escape_html(&session.name),
                escape_html(&visible(&session.agent.name))
            ),
            Err(e) => format!("Cannot start a session: {}", escape_html(&visible(&e))),
        }
    }

    async fn running(&self, chat: i64, update: i64) -> Option<toren_store::SessionTurnRow> {
        let session = self.session_of(chat, update).await.ok()?;
        let view = self.service.session_view(&session.name).await.ok()?;
        view.turns
            .into_iter()
            .rev()
            .find(|t| !t.status.is_terminal())
    }

    /// `/cancel`: its key is taken first, so the same `/cancel` handled again cannot cancel
    /// a later turn (at most once: a crash between the two leaves the turn running).
    async fn cancel(&self, chat: i64, user: &User, update: &Handling) -> String {
        let Some(turn) = self.running(chat, update.id).await else {
            return "No turn is running.".to_owned();
        };
        match self.chats.take_message_key(&update.key, None).await {
            Ok(true) => {}
            Ok(false) => return "This /cancel was handled already.".to_owned(),
            Err(e) => {
                return format!(
                    "Cannot cancel now: {}",
                    escape_html(&visible(&e.to_string()))
                );
            }
        }
        let actor = Actor {
            by: user.decider(),
            via: TELEGRAM.to_owned(),
        };
        match self
            .service
            .cancel(
                &turn.run_id,
                Some("cancelled from Telegram (/cancel)".to_owned()),
                &actor,
            )
            .await
        {
            Ok(_) => format!("Cancelling turn {}.", turn.turn),
            Err(e) => format!("Cannot cancel: {}", escape_html(&visible(&e.to_string()))),
        }
    }

    /// `/undo`: the session back to before its last turn (`RunService::undo_session`); the
    /// update's key is taken first, so the same `/undo` handled again undoes nothing more.
    async fn undo(&self, chat: i64, user: &User, update: &Handling) -> String {
        let session = match self.session_of(chat, update.id).await {
            Ok(session) => session,
            Err(e) => {
                return format!(
                    "Cannot open this chat's session: {}",
                    escape_html(&visible(&e))
                );
            }
        };
        match self.chats.take_message_key(&update.key, None).await {
            Ok(true) => {}
            Ok(false) => return "This /undo was handled already.".to_owned(),
            Err(e) => {
                return format!("Cannot undo now: {}", escape_html(&visible(&e.to_string())));
            }
        }
        let actor = Actor {
            by: user.decider(),
            via: TELEGRAM.to_owned(),
        };
        match self
            .service
            .undo_session(&session, &actor, &self.holder)
            .await
        {
            Ok(done) => format!(
                "Back to before turn {}: {}.",
                done.step.turn,
                match &done.checkpoint {
                    Some(_) => "the workspace is as it was then",
                    None => "the workspace had not changed since",
                }
            ),
            Err(e) => format!("Cannot undo: {}", escape_html(&visible(&e.to_string()))),
        }
    }

    async fn status(&self, chat: i64, update: i64) -> String {
        let session = match self.session_of(chat, update).await {
            Ok(session) => session,
            Err(e) => {
                return format!(
                    "Cannot open this chat's session: {}",
                    escape_html(&visible(&e))
                );
            }
        };
        let view = match self.service.session_view(&session.name).await {
            Ok(view) => view,
            Err(e) => return escape_html(&visible(&e.to_string())),
        };
        let mut text = format!(
            "Session <code>{}</code>, agent <b>{}</b>, {}.",
            escape_html(&session.name),
            escape_html(&visible(&session.agent.name)),
            toren_display::count(view.turns.len(), "turn", "turns")
        );
        if let Some(last) = view.turns.last() {
            text.push_str(&format!(
                "\nLast turn {}: {} (run <code>{}</code>).",
                last.turn, last.status, last.run_id
            ));
            if !last.status.is_terminal()
                && let Ok(approvals) = self.service.approvals(&last.run_id).await
                && approvals.iter().any(|a| a.state == ApprovalState::Pending)
            {
                text.push_str("\nIt waits for your approval.");
            }
        }
        text
    }
}
