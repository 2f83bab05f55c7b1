//! `toren serve`: the HTTP API on `TOREN_API_ADDR` and a pool of in-process workers that
//! claim queued or abandoned runs (whose lease is gone, expired or held by a dead
//! process) and drive them, at most `--workers` at once. SIGTERM or Ctrl-C stops claiming,
//! interrupts the runs being driven (they stay resumable: the next `toren serve` picks
//! them up) and exits 0.

use std::collections::HashSet;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use anyhow::{Context as _, anyhow};
use tokio::sync::Semaphore;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use toren_channel::Channels;
use toren_config::Settings;
use toren_protocol::RunId;
use toren_runtime::RunService;
use toren_sandbox::SandboxBackend;
use toren_server::{AppState, Token};
use toren_tools::{ToolSettings, Toolkit};
use toren_worker::{Worker, WorkerConfig, holder};

use crate::cli::ServeArgs;
use crate::commands::sandbox;
use crate::exit::Failure;
use crate::wiring;

/// How many of the newest runs each claim pass looks at.
const CLAIM_SCAN: u32 = 500;
/// How long open connections (event streams) may hold up the exit after a signal.
const CLOSE_CONNECTIONS: Duration = Duration::from_secs(5);

#[expect(clippy::print_stderr, reason = "the address is for the operator")]
pub(crate) async fn serve(args: &ServeArgs) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    let addr = settings.api_addr;
    let Some(token) = settings.api_token.clone() else {
        return Err(Failure::usage(anyhow!(
            "set TOREN_API_TOKEN: the API needs a bearer token{}",
            if addr.ip().is_loopback() {
                ""
            } else {
                ", above all on a non-loopback address"
            }
        )));
    };
    let service = wiring::service_for(&settings).await?;
    let stop = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let backends = backends(&settings, &service, &stop, &mut tasks).await?;
    let worker = Arc::new(worker(&settings, &service, backends));
    let listener = tokio::net::TcpListener::bind(addr)
        .await
        .with_context(|| format!("cannot listen on {addr} (TOREN_API_ADDR)"))
        .map_err(Failure::usage)?;
    let local = listener.local_addr().map_err(Failure::failed)?;
    eprintln!(
        "toren serve: listening on http://{local} ({} workers)",
        args.workers
    );

    let app = toren_server::app(AppState {
        service: service.clone(),
        agents_dir: settings.agents_dir.clone(),
        tokens: Arc::new(vec![Token {
            name: "api".to_owned(),
            secret: token.expose().to_owned(),
        }]),
    });
    let signals = tokio::spawn(stop_on_signal(stop.clone()));
    tasks.spawn(claim(
        service,
        worker,
        args.workers,
        settings.approval_poll,
        stop.clone(),
    ));
    let graceful = stop.clone().cancelled_owned();
    let server = axum::serve(listener, app).with_graceful_shutdown(graceful);
    let closed = async {
        stop.cancelled().await;
        tokio::time::sleep(CLOSE_CONNECTIONS).await;
    };
    tokio::select! {
        result = server => result.context("the API server failed").map_err(Failure::failed)?,
        () = closed => tracing::info!("closed the connections still open"),
    }
    stop.cancel();
    while let Some(done) = tasks.join_next().await {
        if let Err(e) = done {
            tracing::warn!("a serve task ended badly: {e}");
        }
    }
    signals.abort();
    eprintln!("toren serve: stopped");
    Ok(0)
}

/// The backend of the operator's `TOREN_SANDBOX`, checked now (and, for docker, its reaper).
async fn backends(
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
            Ok(vec![backend.seam])
        }
        None => Ok(Vec::new()),
    }
}

fn worker(
    settings: &Settings,
    service: &RunService,
    backends: Vec<Arc<dyn SandboxBackend>>,
) -> Worker {
    Worker::new(WorkerConfig {
        store: Arc::clone(service.store()),
        models: Arc::new(wiring::models(settings)),
        backends,
        toolkit: Toolkit::new(ToolSettings::default()),
        env: Arc::new(wiring::env_lookup),
        // The API's followers get every event at once and the streamed text.
        observer: Arc::new(service.notifier().clone()),
        // Decisions come through the store (the API, `toren approve`).
        approver: None,
        max_tokens: settings.max_tokens,
        approval_poll: settings.approval_poll,
        holder: holder::this_process(),
        lease_ttl: settings.lease_ttl,
    })
    .with_history(Arc::new(service.clone()))
    .with_channels(Arc::new(Channels::new()))
}

/// Claims resumable runs, oldest first, and drives each on its own task, at most
/// `workers` at once, until `stop` fires; then waits for the runs being driven to stop.
async fn claim(
    service: RunService,
    worker: Arc<Worker>,
    workers: usize,
    poll: Duration,
    stop: CancellationToken,
) {
    let slots = Arc::new(Semaphore::new(workers));
    // Runs driven now, and runs this process cannot drive (logged once, not retried).
    let active: Arc<Mutex<HashSet<RunId>>> = Arc::default();
    let failed: Arc<Mutex<HashSet<RunId>>> = Arc::default();
    let mut driving = JoinSet::new();
    while workers > 0 && !stop.is_cancelled() {
        let claimed = claim_one(
            &service,
            &worker,
            &slots,
            &active,
            &failed,
            &stop,
            &mut driving,
        )
        .await;
        if !claimed {
            tokio::select! {
                () = stop.cancelled() => {}
                () = tokio::time::sleep(poll) => {}
                Some(_) = driving.join_next(), if !driving.is_empty() => {}
            }
        }
    }
    while driving.join_next().await.is_some() {}
}

/// Claims one run if a slot is free and a run is waiting; whether it did.
async fn claim_one(
    service: &RunService,
    worker: &Arc<Worker>,
    slots: &Arc<Semaphore>,
    active: &Arc<Mutex<HashSet<RunId>>>,
    failed: &Arc<Mutex<HashSet<RunId>>>,
    stop: &CancellationToken,
    driving: &mut JoinSet<()>,
) -> bool {
    let Ok(slot) = Arc::clone(slots).try_acquire_owned() else {
        return false;
    };
    let runs = match service.list(CLAIM_SCAN).await {
        Ok(runs) => runs,
        Err(e) => {
            tracing::warn!("cannot list the runs to claim: {e}");
            return false;
        }
    };
    let skip = |id: &RunId| {
        let busy = active.lock().is_ok_and(|a| a.contains(id));
        busy || failed.lock().is_ok_and(|f| f.contains(id))
    };
    for run in runs.iter().rev() {
        if !RunService::is_resumable(run) || skip(&run.id) {
            continue;
        }
        // Another process may claim it first: then it is skipped.
        let Ok(lease) = worker.acquire(&run.id).await else {
            continue;
        };
        let id = run.id.clone();
        if let Ok(mut a) = active.lock() {
            a.insert(id.clone());
        }
        tracing::info!(run_id = %id, "claimed");
        let (worker, active, failed, stop) = (
            Arc::clone(worker),
            Arc::clone(active),
            Arc::clone(failed),
            stop.clone(),
        );
        driving.spawn(async move {
            let outcome = worker.drive(lease, &stop).await;
            match outcome {
                Ok(outcome) => tracing::info!(run_id = %id, ?outcome, "run stopped"),
                Err(e) => {
                    tracing::warn!(run_id = %id, "cannot drive the run: {e}");
                    if let Ok(mut f) = failed.lock() {
                        f.insert(id.clone());
                    }
                }
            }
            if let Ok(mut a) = active.lock() {
                a.remove(&id);
            }
            drop(slot);
        });
        return true;
    }
    false
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
