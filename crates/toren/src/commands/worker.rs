//! `toren worker`: a process that only drives runs — no API. It claims runs from the
//! store (the pool shared with `toren serve`, `toren_runtime::pool`), at most
//! `--concurrency` at once, of the workspace volume it serves (`TOREN_WORKSPACE_VOLUME`)
//! and the backend of `TOREN_SANDBOX`, registers in the worker registry under its id
//! (`TOREN_WORKER_ID`, else the host name and a suffix kept in `$TOREN_HOME/worker-id`)
//! and heartbeats there. The first SIGTERM or Ctrl-C stops claiming and lets the calls
//! under way finish and be journaled, for at most `--shutdown-timeout`; then (or at a
//! second signal) what still runs is stopped. Leases are released, the runs stay
//! resumable, and the process exits 0.

use std::sync::Arc;

use anyhow::anyhow;
use serde_json::json;
use tokio::task::JoinSet;
use tokio_util::sync::CancellationToken;
use toren_config::{QueueChoice, SandboxChoice, Settings};
use toren_display::{escape_json, visible};
use toren_server::Metrics;

use crate::cli::WorkerArgs;
use crate::commands::serve;
use crate::exit::Failure;
use crate::wiring;
use toren_runtime::pool;

pub(crate) async fn worker(args: &WorkerArgs) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    refuse_docker_in_container(&settings)?;
    match settings.queue {
        // The store's own queue (on SQLite or Postgres): the pool claims from it.
        QueueChoice::Local | QueueChoice::Postgres => {}
    }
    let service = wiring::service_for(&settings).await?;
    let drain = CancellationToken::new();
    let halt = CancellationToken::new();
    let mut tasks = JoinSet::new();
    let backends = serve::backends(&settings, &service, &drain, &mut tasks).await?;
    let slots = usize::try_from(args.concurrency).unwrap_or(usize::MAX);
    let identity = serve::identity(&settings, slots)?;
    let holder = identity.instance.clone();
    let metrics = Metrics::new();
    let worker = Arc::new(serve::worker(
        &settings,
        &service,
        backends.clone(),
        &metrics,
        &holder,
    ));
    eprintln!(
        "toren worker {}: driving runs ({} at once, volume {}, sandbox: {})",
        identity.id,
        args.concurrency,
        identity.volume.as_deref().unwrap_or("none"),
        backends.first().map_or("none", |b| b.name())
    );
    let signals = tokio::spawn(serve::on_signals(
        drain.clone(),
        halt.clone(),
        args.shutdown_timeout,
    ));
    let pool = pool::Pool {
        claim: serve::claim_request(&settings, &holder, &backends),
        identity: Some(identity),
        service,
        worker,
        slots,
        poll: settings.approval_poll,
        claims: Arc::new(metrics),
    };
    pool.run(drain.clone(), halt.clone()).await;
    tracing::info!("stopped: the runs it drove are released and stay resumable");
    drain.cancel();
    halt.cancel();
    while let Some(done) = tasks.join_next().await {
        if let Err(e) = done {
            tracing::warn!("a worker task ended badly: {e}");
        }
    }
    signals.abort();
    eprintln!("toren worker: stopped");
    Ok(0)
}

/// A worker in a container does not start docker sandboxes (the compose tier's workers
/// use E2B): it would need the host's docker socket, which gives whoever holds it the
/// host. Refused before anything connects, naming the fix.
fn refuse_docker_in_container(settings: &Settings) -> Result<(), Failure> {
    if matches!(settings.sandbox, SandboxChoice::Docker) && wiring::in_container() {
        return Err(Failure::usage(anyhow!(
            "this worker runs inside a container and its sandbox backend resolves to \
             `docker`: local docker sandboxes are not run from inside the compose worker \
             container. Set E2B_API_KEY (TOREN_SANDBOX=auto then picks e2b), or run the \
             worker outside a container to use docker"
        )));
    }
    Ok(())
}

/// `toren workers list`: the live workers, their runs and last heartbeat, and under each
/// the runs it passed over (it cannot drive them) with why.
pub(crate) async fn list(json: bool) -> Result<u8, Failure> {
    let service = wiring::service().await?;
    let workers = service.live_workers().await.map_err(Failure::failed)?;
    let now = jiff::Timestamp::now();
    if json {
        let array: Vec<_> = workers.iter().map(worker_json).collect();
        println!(
            "{}",
            escape_json(&serde_json::Value::Array(array).to_string())
        );
        return Ok(0);
    }
    if workers.is_empty() {
        {
            eprintln!("no live workers; start one with `toren worker` (or `toren serve`)");
        }
        return Ok(0);
    }
    println!(
        "{:<28}  {:<20}  {:<24}  {:>5}  {:<14}  RUNS",
        "WORKER", "HOST", "VOLUME", "SLOTS", "HEARTBEAT"
    );
    for worker in &workers {
        let beat = &worker.beat;
        let ago = now
            .duration_since(worker.heartbeat_at)
            .as_secs_f64()
            .max(0.0);
        let runs: Vec<&str> = beat
            .runs
            .iter()
            .map(toren_protocol::RunId::as_str)
            .collect();
        println!(
            "{:<28}  {:<20}  {:<24}  {:>5}  {:<14}  {}",
            visible(&beat.id),
            visible(&beat.host),
            visible(beat.volume.as_deref().unwrap_or("-")),
            format!("{}/{}", beat.runs.len(), beat.concurrency),
            format!("{ago:.1} s ago"),
            if runs.is_empty() {
                "-".to_owned()
            } else {
                runs.join(",")
            }
        );
        for passed in &beat.passed_over {
            println!(
                "{:<28}  passed over {}: {}",
                "",
                passed.run,
                visible(&passed.reason)
            );
        }
    }
    Ok(0)
}

fn worker_json(worker: &toren_store::WorkerInfo) -> serde_json::Value {
    let beat = &worker.beat;
    json!({
        "id": beat.id,
        "instance": beat.instance,
        "host": beat.host,
        "volume": beat.volume,
        "concurrency": beat.concurrency,
        "started_at": beat.started_at.to_string(),
        "last_heartbeat": worker.heartbeat_at.to_string(),
        "runs": beat.runs,
        "passed_over": beat.passed_over,
    })
}
