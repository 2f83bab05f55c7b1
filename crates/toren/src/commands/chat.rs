//! `toren chat SESSION [--agent AGENT]`: a conversation with a sandbox agent that keeps its
//! history and workspace across turns, days and restarts. Each message is a turn (a run of
//! the session, through the run service) driven here; the model's text is streamed to
//! stdout, tool calls are shown on stderr as they happen, approvals are asked inline.
//!
//! On a terminal it is a line editor (history on disk, a line ending in `\` continues on the
//! next, Ctrl-C cancels the running turn and keeps the session, Ctrl-D leaves). With stdin
//! or stdout not a terminal it reads one message per line, prints plain text, finishes each
//! turn before reading the next, and exits 0 at the end of input; approvals then wait for
//! `toren approve` from elsewhere, as `toren run` does.

use std::io::IsTerminal;
use std::sync::{Arc, Mutex};

use anyhow::anyhow;
use tokio_util::sync::CancellationToken;
use toren_config::Settings;
use toren_display::{visible, visible_lines};
use toren_protocol::{ChannelBinding, Message, RunId, RunStatus};
use toren_runtime::{Actor, RunService, Sent};
use toren_store::{Lease, Session};
use toren_worker::Outcome;

use crate::cli::ChatArgs;
use crate::commands::host::Host;
use crate::exit::Failure;
use crate::printer::say;
use crate::wiring;

mod commands;
mod input;

use input::{editor, history_file, read_message, stdin_lines};

pub(crate) async fn chat(args: ChatArgs) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    let service = wiring::service_for(&settings).await?;
    let session = open_session(&service, &settings, &args).await?;
    let host = Host::for_chat(&session.agent, session.policy.as_ref(), &settings, &service).await?;
    let interactive = std::io::stdin().is_terminal() && std::io::stdout().is_terminal();
    let chat = Chat {
        service,
        session,
        host,
        actor: Actor {
            by: settings.user.clone(),
            via: "chat".to_owned(),
        },
    };
    chat.recap().await?;
    chat.resume_unfinished().await?;
    if interactive {
        chat.interactive(&settings).await
    } else {
        chat.piped().await
    }
}

/// The session `args` names: created (with `--agent`) or continued (its agent must match).
async fn open_session(
    service: &RunService,
    settings: &Settings,
    args: &ChatArgs,
) -> Result<Session, Failure> {
    match service.session(&args.session).await {
        Ok(session) => {
            if args.workspace_from.is_some() {
                return Err(Failure::usage(anyhow!(
                    "session `{}` exists, and its workspace is the one it has worked in; \
                     --workspace-from starts a new session (pick another name)",
                    session.name
                )));
            }
            if let Some(agent) = &args.agent {
                let wanted = toren_config::find_agent(agent, &settings.agents_dir)
                    .map_err(Failure::usage)?;
                if wanted.name != session.agent.name {
                    return Err(Failure::usage(anyhow!(
                        "session `{}` talks to agent `{}`, not `{}`; leave out --agent to \
                         continue it, or pick another session name",
                        session.name,
                        session.agent.name,
                        wanted.name
                    )));
                }
            }
            // Up front, not at the first message: this process drives the session's turns.
            service
                .require_secrets(&session.agent.name, session.policy.as_ref())
                .map_err(|e| Failure::usage(anyhow!(e)))?;
            Ok(session)
        }
        Err(toren_runtime::Error::Store(toren_store::Error::SessionNotFound(_))) => {
            let Some(agent) = &args.agent else {
                return Err(Failure::usage(anyhow!(
                    "there is no session `{}` yet; start it with `toren chat {} --agent AGENT`",
                    args.session,
                    args.session
                )));
            };
            let agent =
                toren_config::find_agent(agent, &settings.agents_dir).map_err(Failure::usage)?;
            let created = match &args.workspace_from {
                Some(from) => {
                    let seed = toren_worker::SeedSource::parse(from);
                    service
                        .create_session_seeded(&args.session, agent, &seed)
                        .await
                }
                None => service.create_session(&args.session, agent).await,
            };
            let session = created.map_err(|e| match e.is_refusal() {
                true => Failure::usage(anyhow!(e)),
                false => Failure::failed(anyhow!(e)),
            })?;
            say!(
                "new session {} with agent {} ({})",
                session.name,
                visible(&session.agent.name),
                visible(&session.agent.model)
            );
            Ok(session)
        }
        Err(e) => Err(Failure::failed(anyhow!(e))),
    }
}

pub(crate) struct Chat {
    pub(crate) service: RunService,
    pub(crate) session: Session,
    host: Host,
    actor: Actor,
}

/// How a turn ended, for the loop.
enum TurnEnd {
    Done,
    /// The run stopped without ending (e.g. a model outage): it can be resumed.
    Stopped,
}

impl Chat {
    /// Where the conversation stopped, when continuing a session.
    async fn recap(&self) -> Result<(), Failure> {
        let conversation = self
            .service
            .conversation(&self.session)
            .await
            .map_err(Failure::failed)?;
        if conversation.is_empty() {
            return Ok(());
        }
        let turns = conversation.last().map_or(0, |(t, _)| *t);
        say!(
            "session {} ({} so far); where it stopped:",
            self.session.name,
            toren_display::count(turns, "turn", "turns")
        );
        let exchanges: Vec<&Message> = conversation
            .iter()
            .map(|(_, m)| m)
            .filter(|m| match m {
                Message::User { .. } => true,
                Message::Assistant(a) => !a.text.is_empty(),
                Message::ToolResults { .. } => false,
            })
            .collect();
        // On stderr: a script reading the answers from stdout gets only the new ones.
        for message in exchanges.iter().rev().take(4).rev() {
            match message {
                Message::User { text } => say!("you> {}", visible_lines(text)),
                Message::Assistant(a) => say!("{}", visible_lines(&a.text)),
                Message::ToolResults { .. } => {}
            }
        }
        Ok(())
    }

    /// A turn a killed process left unfinished is resumed before anything else.
    async fn resume_unfinished(&self) -> Result<(), Failure> {
        let view = self
            .service
            .session_view(&self.session.name)
            .await
            .map_err(Failure::failed)?;
        let Some(last) = view.turns.last() else {
            return Ok(());
        };
        if last.status.is_terminal() {
            return Ok(());
        }
        let summary = self
            .service
            .summary(&last.run_id)
            .await
            .map_err(Failure::failed)?;
        if !RunService::is_resumable(&summary) {
            say!(
                "turn {} (run {}) is running in another process; messages sent now wait for it",
                last.turn,
                last.run_id
            );
            return Ok(());
        }
        say!(
            "resuming turn {} (run {}), which stopped before it finished",
            last.turn,
            last.run_id
        );
        let lease = self.host.acquire(&last.run_id).await?;
        self.drive(lease).await.map(drop)
    }

    /// Sends one message and drives the turn(s) it leads to.
    pub(crate) async fn send(&self, text: &str) -> Result<(), Failure> {
        let sent = self
            .service
            .send(
                &self.session,
                text,
                &self.host.holder(),
                Some(self.channel()),
            )
            .await
            .map_err(Failure::failed)?;
        match sent {
            Sent::Turn { created, .. } => {
                if let TurnEnd::Stopped = self.drive(created.lease).await? {
                    return Ok(());
                }
            }
            Sent::Queued { waiting } => {
                say!(
                    "a turn is running elsewhere; your message waits as the next turn ({waiting} waiting)"
                );
                return Ok(());
            }
        }
        // Messages queued meanwhile (from another front door) are the next turns.
        while let Some(Sent::Turn { created, .. }) = self
            .service
            .next_queued(&self.session, &self.host.holder(), Some(self.channel()))
            .await
            .map_err(Failure::failed)?
        {
            say!("a queued message is the next turn");
            if let TurnEnd::Stopped = self.drive(created.lease).await? {
                break;
            }
        }
        Ok(())
    }

    /// Drives one turn; Ctrl-C cancels it (the session stays).
    async fn drive(&self, lease: Lease) -> Result<TurnEnd, Failure> {
        let run = lease.run_id.clone();
        let started = std::time::Instant::now();
        let stop = CancellationToken::new();
        let cancel_on_ctrl_c = {
            let service = self.service.clone();
            let actor = self.actor.clone();
            let run = run.clone();
            tokio::spawn(async move {
                if tokio::signal::ctrl_c().await.is_ok() {
                    let reason = Some("cancelled from the chat (Ctrl-C)".to_owned());
                    if let Err(e) = service.cancel(&run, reason, &actor).await {
                        tracing::warn!(run = %run, "could not cancel the turn: {e}");
                    }
                }
            })
        };
        let outcome = self.host.drive_turn(lease, &stop).await;
        cancel_on_ctrl_c.abort();
        let took = started.elapsed();
        match outcome {
            Ok(Outcome::Ended {
                status: RunStatus::Completed,
                ..
            }) => {
                // What the turn spent (and its budget, if the agent has one).
                let spent = match self.service.get(&run).await {
                    Ok(view) => view.state.as_ref().map_or_else(String::new, |state| {
                        let budget = super::budget::budget_line(state)
                            .map(|b| format!("; budget {b}"))
                            .unwrap_or_default();
                        format!(" · {}{budget}", super::budget::spending_line(state))
                    }),
                    Err(_) => String::new(),
                };
                say!("({:.1} s{spent})", took.as_secs_f64());
                Ok(TurnEnd::Done)
            }
            Ok(Outcome::Ended {
                status: RunStatus::Cancelled,
                ..
            }) => {
                say!("turn cancelled; the session is kept");
                Ok(TurnEnd::Done)
            }
            Ok(Outcome::Ended { output, .. }) => {
                say!("the turn failed: {}", visible_lines(&output));
                Ok(TurnEnd::Done)
            }
            Ok(
                Outcome::Interrupted | Outcome::AwaitingApproval { .. } | Outcome::AwaitingBudget,
            ) => Ok(TurnEnd::Stopped),
            Err(error) => {
                say!(
                    "the turn stopped: {}; `toren chat {}` resumes it",
                    visible_lines(&error.to_string()),
                    self.session.name
                );
                Ok(TurnEnd::Stopped)
            }
        }
    }

    /// Without a terminal: one message per line until the end of input.
    async fn piped(&self) -> Result<u8, Failure> {
        let mut lines = stdin_lines();
        loop {
            // Ctrl-C while waiting for the next line leaves (a turn's own Ctrl-C cancels it).
            let line = tokio::select! {
                line = lines.recv() => line,
                _ = tokio::signal::ctrl_c() => return Ok(crate::exit::INTERRUPTED),
            };
            let Some(line) = line else { break };
            let line =
                line.map_err(|e| Failure::failed(anyhow!(e).context("cannot read stdin")))?;
            let line = line.trim();
            if line.is_empty() {
                continue;
            }
            match commands::parse(line) {
                Some(commands::Slash::Exit) => break,
                Some(command) => self.slash(command).await?,
                None => self.send(line).await?,
            }
        }
        Ok(0)
    }

    /// On a terminal: the line editor.
    async fn interactive(&self, settings: &Settings) -> Result<u8, Failure> {
        say!("type a message; /help lists the commands; Ctrl-D leaves");
        let history = history_file(&settings.home, &self.session.name);
        let editor = Arc::new(Mutex::new(editor(&history)?));
        loop {
            let input = read_message(Arc::clone(&editor)).await?;
            let Some(text) = input else {
                break;
            };
            let text = text.trim().to_owned();
            if text.is_empty() {
                continue;
            }
            if let Ok(mut editor) = editor.lock() {
                let _ = editor.add_history_entry(text.as_str());
                let _ = editor.save_history(&history);
            }
            match commands::parse(&text) {
                Some(commands::Slash::Exit) => break,
                Some(command) => self.slash(command).await?,
                None => self.send(&text).await?,
            }
        }
        Ok(0)
    }

    /// The run of the session's newest turn, if it has not ended.
    pub(crate) async fn running_turn(&self) -> Result<Option<RunId>, Failure> {
        let view = self
            .service
            .session_view(&self.session.name)
            .await
            .map_err(Failure::failed)?;
        Ok(view
            .turns
            .into_iter()
            .rev()
            .find(|t| !t.status.is_terminal())
            .map(|t| t.run_id))
    }

    /// Where files the agent sends reach the person: this terminal, into the session's
    /// downloads directory.
    fn channel(&self) -> ChannelBinding {
        ChannelBinding {
            kind: toren_channel::TERMINAL.to_owned(),
            address: self.session.name.clone(),
        }
    }

    pub(crate) fn actor(&self) -> &Actor {
        &self.actor
    }

    /// This process as a lease holder.
    pub(crate) fn holder(&self) -> String {
        self.host.holder()
    }
}
