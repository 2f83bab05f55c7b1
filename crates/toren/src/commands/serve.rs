//! `toren serve`: the HTTP API on `TOREN_API_ADDR` and a pool of in-process workers
//! (`toren_runtime::pool`, shared with `toren worker`) that claim queued or abandoned runs and
//! drive them, at most `--workers` at once (`--workers 0`: an API-only front). The first SIGTERM or Ctrl-C stops claiming and lets the tool and model calls
//! under way finish and be journaled, for at most `--shutdown-timeout`; then (or at a
//! second signal) what still runs is stopped. Leases are released, the runs stay
//! resumable (the next `toren serve` picks them up), and the process exits 0.

mod tokens;

use std::sync::Arc;
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use toren_channel::Channels;
use toren_config::{QueueChoice, Settings};
use toren_runtime::RunService;
use toren_sandbox::SandboxBackend;
use toren_server::{AppState, Metrics};
use toren_store::ClaimRequest;
use toren_tools::{ToolSettings, Toolkit};
use toren_worker::{Observers, Worker, WorkerConfig, holder};

use crate::cli::ServeArgs;
use crate::commands::sandbox;
use crate::exit::Failure;
use crate::wiring;
use toren_runtime::pool::{self, Identity};

/// How long open connections (event streams) may hold up the exit once the runs stopped.
const CLOSE_CONNECTIONS: Duration = Duration::from_secs(5);

pub(crate) async fn serve(args: &ServeArgs) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    match settings.queue {
        // The store's own queue (on SQLite or Postgres): the pool below claims from it.
        QueueChoice::Local | QueueChoice::Postgres => {}
    }
    let (tokens, source) = tokens::tokens(&settings)?;
    // The API refuses a run whose injected secret is unset here only when this process's
    // own workers drive every run it creates (the local queue); an API-only front, or one
    // on a shared Postgres queue, leaves that to the worker that claims the run.
    let drives = args.workers > 0 && settings.queue == QueueChoice::Local;
    let service = wiring::with_env(wiring::service_for(&settings).await?, drives);
    let drain = CancellationToken::new();
    let halt = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let backends = backends(&settings, &service, &drain, &mut tasks).await?;
    // The Telegram bot, when TELEGRAM_BOT_TOKEN is set: its own worker drives its chats.
    let telegram = match args.no_telegram {
        true => None,
        false => crate::commands::telegram::start(&settings, &drain).await?,
    };
    let metrics = Metrics::new();
    let identity = identity(&settings, args.workers)?;
    let holder = identity.instance.clone();
    let worker = Arc::new(worker(
        &settings,
        &service,
        backends.clone(),
        &metrics,
        &holder,
    ));
    let addr = settings.api_addr;
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (TOREN_API_ADDR)"))
        .map_err(Failure::usage)?;
    let local = listener.local_addr().map_err(Failure::failed)?;
    eprintln!(
        "toren serve: listening on http://{local} ({}, sandbox: {})",
        toren_display::count(args.workers, "worker", "workers"),
        backends.first().map_or("none", |b| b.name())
    );
    match &source {
        tokens::Source::Configured(n) => eprintln!(
            "toren serve: {} configured",
            toren_display::count(*n, "API token", "API tokens")
        ),
        tokens::Source::Generated(path) => eprintln!(
            "toren serve: API token in {} (send `Authorization: Bearer $(cat {})`)",
            path.display(),
            path.display()
        ),
    }

    let app = toren_server::app(AppState {
        service: service.clone(),
        agents_dir: settings.agents_dir.clone(),
        tokens: Arc::new(tokens),
        metrics: metrics.clone(),
        backends: backends.clone(),
        shutdown: drain.clone(),
    });
    let signals = tokio::spawn(on_signals(
        drain.clone(),
        halt.clone(),
        args.shutdown_timeout,
    ));
    let pool = pool::Pool {
        claim: claim_request(&settings, &holder, &backends),
        identity: Some(identity),
        service,
        worker,
        slots: args.workers,
        poll: settings.approval_poll,
        claims: Arc::new(metrics),
    };
    let mut pool = tokio::spawn(pool.run(drain.clone(), halt.clone()));
    let mut server = tokio::spawn(
        axum::serve(listener, app)
            .with_graceful_shutdown(drain.clone().cancelled_owned())
            .into_future(),
    );
    // A signal first: the server's own graceful end follows from it.
    let served = tokio::select! {
        biased;
        () = drain.cancelled() => None,
        served = &mut server => Some(served),
    };
    if let Some(served) = served {
        // The server stopped before any signal: that is a failure, not a shutdown.
        drain.cancel();
        halt.cancel();
        let _ = pool.await;
        return match served {
            Ok(Ok(())) => Err(Failure::failed(anyhow!("the API server stopped"))),
            Ok(Err(e)) => Err(Failure::failed(anyhow!(e).context("the API server failed"))),
            Err(e) => Err(Failure::failed(anyhow!("the API server failed: {e}"))),
        };
    }
    tracing::info!("stopping: no new runs are claimed; the calls under way finish");
    if let Err(e) = (&mut pool).await {
        tracing::warn!("the worker pool ended badly: {e}");
    }
    halt.cancel();
    if tokio::time::timeout(CLOSE_CONNECTIONS, &mut server)
        .await
        .is_err()
    {
        tracing::info!("closed the connections still open");
        server.abort();
    }
    while let Some(done) = tasks.join_next().await {
        if let Err(e) = done {
            tracing::warn!("a serve task ended badly: {e}");
        }
    }
    if let Some(bot) = telegram
        && let Err(e) = bot.await
    {
        tracing::warn!("the Telegram bot ended badly: {e}");
    }
    signals.abort();
    eprintln!("toren serve: stopped");
    Ok(0)
}

/// What a pool of this process claims: runs of the backends it serves on this
/// machine's workspace volume (and runs needing neither), within `TOREN_AGENT_CONCURRENCY`,
/// leased to `holder`. No channel: a chat's turns are its own.
pub(crate) fn claim_request(
    settings: &Settings,
    holder: &str,
    backends: &[Arc<dyn SandboxBackend>],
) -> ClaimRequest {
    ClaimRequest {
        volumes: vec![wiring::workspace_volume(settings)],
        backends: backends.iter().map(|b| b.name().to_owned()).collect(),
        per_agent_limit: settings.agent_concurrency,
        ..ClaimRequest::new(holder, settings.lease_ttl)
    }
}

/// How a pool of `slots` of this process appears in the worker registry; its instance
/// is this process's lease holder name: the worker id, then what names this process
/// ([`holder::this_process`]), so that a restarted worker is never taken for the one it
/// replaced and a dead one can be proved gone.
pub(crate) fn identity(settings: &Settings, slots: usize) -> Result<Identity, Failure> {
    let id = wiring::worker_id(settings)?;
    Ok(Identity {
        instance: format!("{id}@{}", holder::this_process()),
        id,
        host: wiring::host_name(),
        volume: Some(wiring::workspace_volume(settings)),
        concurrency: u32::try_from(slots).unwrap_or(u32::MAX),
        started_at: jiff::Timestamp::now(),
    })
}

/// The backend of the operator's `TOREN_SANDBOX`, checked now (and, for docker and e2b,
/// its reaper, until `stop`).
pub(crate) async fn backends(
    settings: &Settings,
    service: &RunService,
    stop: &CancellationToken,
    tasks: &mut JoinSet<()>,
) -> Result<Vec<Arc<dyn SandboxBackend>>, Failure> {
    match wiring::configured_backend(settings).await? {
        Some(backend) => {
            if let Some(docker) = backend.docker {
                tasks.spawn(sandbox::reap_periodically(
                    docker,
                    service.clone(),
                    stop.child_token(),
                ));
            }
            if settings.sandbox == toren_config::SandboxChoice::E2b {
                let e2b = wiring::e2b(settings).await?;
                tasks.spawn(sandbox::reap_e2b_periodically(
                    e2b,
                    service.clone(),
                    stop.child_token(),
                ));
            }
            Ok(vec![backend.seam])
        }
        None => Ok(Vec::new()),
    }
}

pub(crate) fn worker(
    settings: &Settings,
    service: &RunService,
    backends: Vec<Arc<dyn SandboxBackend>>,
    metrics: &Metrics,
    holder: &str,
) -> Worker {
    Worker::new(WorkerConfig {
        store: Arc::clone(service.store()),
        models: Arc::new(wiring::models(settings)),
        backends,
        toolkit: Toolkit::new(ToolSettings::default()),
        env: Arc::new(wiring::env_lookup),
        // The API's followers get every event at once and the streamed text; `/metrics`
        // counts and times what the workers do.
        observer: Arc::new(Observers(vec![
            Arc::new(service.notifier().clone()),
            Arc::new(metrics.clone()),
        ])),
        // Decisions come through the store (the API, `toren approve`).
        approver: None,
        max_tokens: settings.max_tokens,
        approval_poll: settings.approval_poll,
        holder: holder.to_owned(),
        lease_ttl: settings.lease_ttl,
    })
    .with_history(Arc::new(service.clone()))
    .with_channels(Arc::new(Channels::new()))
    // The workspace before each call that can change it, for `toren diff`.
    .with_checkpoints()
    // A run that waits for a person holds no slot: the decision makes it claimable.
    .parking_approvals()
}

/// The first Ctrl-C or SIGTERM fires `drain`; `halt` follows `timeout` later, or at once
/// on a second signal.
pub(crate) async fn on_signals(
    drain: CancellationToken,
    halt: CancellationToken,
    timeout: Duration,
) {
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
    drain.cancel();
    tokio::select! {
        _ = interrupt.recv() => tracing::info!("second signal: stopping what still runs"),
        _ = terminate.recv() => tracing::info!("second signal: stopping what still runs"),
        () = tokio::time::sleep(timeout) => {
            tracing::info!(?timeout, "shutdown timeout: stopping what still runs");
        }
    }
    halt.cancel();
}
