//! `toren telegram`: the Telegram bot as a process of its own (and, through [`start`],
//! inside `toren serve` when TELEGRAM_BOT_TOKEN is set). It builds the bot's worker — the
//! operator's sandbox backend, the model providers, the Telegram channel for
//! `send_to_channel`, the bot's observer for streaming into the chat — and runs
//! `toren_telegram::Bot` until SIGTERM or Ctrl-C. The turns of Telegram chats are driven
//! here: a run bound to a `telegram` channel is left alone by the pools of `toren serve` and
//! `toren worker` (they have no Telegram channel), and the bot resumes its unfinished turns
//! when it starts.

use std::sync::Arc;

use anyhow::anyhow;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use toren_channel::Channels;
use toren_config::{Settings, TelegramSettings};
use toren_protocol::AgentSpec;
use toren_runtime::RunService;
use toren_store::ChatStore;
use toren_telegram::{AgentFinder, Bot, BotApi, BotSettings, TELEGRAM, TelegramChannels, Turns};
use toren_tools::{ToolSettings, Toolkit};
use toren_worker::{Observers, Worker, WorkerConfig, holder};

use crate::cli::TelegramArgs;
use crate::commands::sandbox;
use crate::exit::Failure;
use crate::wiring;

/// Agents by name from the agents directory.
struct AgentsDir(std::path::PathBuf);

impl AgentFinder for AgentsDir {
    fn find(&self, name: &str) -> Result<AgentSpec, String> {
        toren_config::find_agent(name, &self.0).map_err(|e| e.to_string())
    }
}

pub(crate) async fn telegram(args: &TelegramArgs) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    let telegram = wiring::telegram_settings()?;
    if telegram.token.is_none() {
        return Err(Failure::usage(anyhow!(
            "TELEGRAM_BOT_TOKEN is not set: create a bot with @BotFather and set its token"
        )));
    }
    let (service, chats) = wiring::service_and_chats(&settings).await?;
    let stop = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let Some(bot) = build(&settings, &telegram, &service, chats, &stop, &mut tasks).await? else {
        return Ok(0);
    };
    if telegram.users.is_empty() {
        tracing::warn!("TOREN_TELEGRAM_USERS is empty: the bot refuses everyone");
    }
    let _ = args;
    eprintln!(
        "toren telegram: bot {} polling for {}, agent {}",
        toren_telegram::bot_id(telegram.token.as_ref().map_or("", |t| t.expose())),
        toren_display::count(telegram.users.len(), "allowed user", "allowed users"),
        telegram.agent
    );
    let signals = tokio::spawn(stop_on_signal(stop.clone()));
    let outcome = bot.run(stop.clone()).await;
    stop.cancel();
    signals.abort();
    while tasks.join_next().await.is_some() {}
    match outcome {
        Ok(()) => Ok(0),
        Err(e) if e.is_unauthorized() => Err(Failure::usage(anyhow!(
            "Telegram refused the bot token ({e}); check TELEGRAM_BOT_TOKEN"
        ))),
        Err(e) => Err(Failure::failed(anyhow!(e))),
    }
}

/// The bot inside `toren serve`: `None` when TELEGRAM_BOT_TOKEN is unset. Runs until
/// `stop`.
pub(crate) async fn start(
    settings: &Settings,
    stop: &CancellationToken,
) -> Result<Option<tokio::task::JoinHandle<()>>, Failure> {
    let telegram = wiring::telegram_settings()?;
    if telegram.token.is_none() {
        return Ok(None);
    }
    let (service, chats) = wiring::service_and_chats(settings).await?;
    let mut tasks = JoinSet::new();
    let Some(bot) = build(settings, &telegram, &service, chats, stop, &mut tasks).await? else {
        return Ok(None);
    };
    eprintln!(
        "toren serve: Telegram bot on for {}",
        toren_display::count(telegram.users.len(), "allowed user", "allowed users")
    );
    let stop = stop.clone();
    Ok(Some(tokio::spawn(async move {
        if let Err(e) = bot.run(stop).await {
            tracing::error!("the Telegram bot stopped: {e}");
        }
        while tasks.join_next().await.is_some() {}
    })))
}

/// Fails (a usage error) unless the agent of new chats loads: found by name in the agents
/// directory and valid. Found out at start-up, not when the first person writes and gets
/// an error instead of an answer.
fn require_agent(settings: &Settings, telegram: &TelegramSettings) -> Result<(), Failure> {
    toren_config::find_agent(&telegram.agent, &settings.agents_dir)
        .map(drop)
        .map_err(|e| {
            Failure::usage(anyhow!(e).context(format!(
                "TOREN_TELEGRAM_AGENT is `{}`, the agent of every new chat, and it cannot be \
                 loaded from the agents directory {} (TOREN_AGENTS)",
                telegram.agent,
                settings.agents_dir.display()
            )))
        })
}

/// The bot and its worker.
async fn build(
    settings: &Settings,
    telegram: &TelegramSettings,
    service: &RunService,
    chats: Arc<dyn ChatStore>,
    stop: &CancellationToken,
    tasks: &mut JoinSet<()>,
) -> Result<Option<Bot>, Failure> {
    let Some(token) = &telegram.token else {
        return Ok(None);
    };
    require_agent(settings, telegram)?;
    let api = BotApi::new(&telegram.api_url, token.expose()).map_err(Failure::failed)?;
    let backends = match wiring::configured_backend(settings).await? {
        Some(backend) => {
            if let Some(docker) = backend.docker {
                tasks.spawn(sandbox::reap_periodically(
                    docker,
                    service.clone(),
                    stop.child_token(),
                ));
            }
            vec![backend.seam]
        }
        None => Vec::new(),
    };
    let turns = Arc::new(Turns::new());
    let holder = holder::this_process();
    let worker = Worker::new(WorkerConfig {
        store: Arc::clone(service.store()),
        models: Arc::new(wiring::models(settings)),
        backends,
        toolkit: Toolkit::new(ToolSettings::default()),
        env: Arc::new(wiring::env_lookup),
        observer: Arc::new(Observers(vec![
            turns.clone(),
            Arc::new(service.notifier().clone()),
        ])),
        // Decisions come through the store: the buttons, `toren approve`, the API.
        approver: None,
        max_tokens: settings.max_tokens,
        approval_poll: settings.approval_poll,
        holder: holder.clone(),
        lease_ttl: settings.lease_ttl,
    })
    .with_history(Arc::new(service.clone()))
    .with_checkpoints()
    .with_channels(Arc::new(Channels::new().with(
        TELEGRAM,
        Arc::new(TelegramChannels::new(api.clone(), Arc::clone(&chats))),
    )));
    let agents = toren_config::list_agents(&settings.agents_dir)
        .map(|list| list.into_iter().map(|a| a.name).collect())
        .unwrap_or_default();
    Ok(Some(Bot::new(
        api,
        service.clone(),
        chats,
        Arc::new(worker),
        turns,
        Arc::new(AgentsDir(settings.agents_dir.clone())),
        BotSettings {
            users: telegram.users.clone(),
            groups: telegram.groups.clone(),
            agent: telegram.agent.clone(),
            agents,
            poll_timeout: std::time::Duration::from_secs(50),
            edit_interval: std::time::Duration::from_millis(1200),
        },
        holder,
    )))
}

/// Fires `stop` on the first Ctrl-C or SIGTERM.
async fn stop_on_signal(stop: CancellationToken) {
    use tokio::signal::unix::{SignalKind, signal};
    let (Ok(mut interrupt), Ok(mut terminate)) = (
        signal(SignalKind::interrupt()),
        signal(SignalKind::terminate()),
    ) else {
        tracing::warn!("cannot listen for Ctrl-C/SIGTERM");
        return;
    };
    tokio::select! {
        _ = interrupt.recv() => {}
        _ = terminate.recv() => {}
    }
    stop.cancel();
}
