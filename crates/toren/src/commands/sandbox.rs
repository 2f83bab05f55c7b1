//! `toren sandbox list` and `toren sandbox reap [--dry-run]`: the docker backend's
//! containers and the reaper that removes those no run needs. The same sweep runs once a
//! minute inside every `toren run` and `toren resume` that uses the docker backend. With
//! `TOREN_SANDBOX=e2b`, `reap` sweeps this installation's E2B sandboxes instead (listed by
//! metadata; those of finished runs and removed sessions, and day-old ones of unknown runs
//! and sessions, are killed; a live run's and a live session's never), also once a minute
//! inside `toren run`/`resume` on e2b.

use std::collections::{HashMap, HashSet};
use std::time::Duration;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use toren_protocol::RunId;
use toren_runtime::RunService;
use toren_sandbox_docker::{
    DockerBackend, ORPHAN_AGE, ReapAction, ReapOutcome, ReapReason, RunLiveness, TorenContainer,
};
use toren_sandbox_e2b::E2bBackend;

use crate::exit::Failure;
use crate::wiring;

/// How often long-lived processes sweep.
pub(crate) const SWEEP_EVERY: Duration = Duration::from_secs(60);

/// What the run service says of each container's run. A run that has not ended is live
/// whether or not a process drives it right now (a run waiting to be resumed keeps its
/// container).
async fn liveness(
    service: &RunService,
    containers: &[TorenContainer],
) -> Result<HashMap<String, RunLiveness>, toren_runtime::Error> {
    let mut known = HashMap::new();
    for container in containers {
        let state = match container.run.parse::<RunId>() {
            Err(_) => RunLiveness::Unknown,
            Ok(run) => match service.summary(&run).await {
                Ok(summary) if summary.status.is_terminal() => RunLiveness::Finished,
                Ok(_) => RunLiveness::Live,
                Err(toren_runtime::Error::Store(toren_store::Error::RunNotFound(_))) => {
                    RunLiveness::Unknown
                }
                Err(e) => return Err(e),
            },
        };
        known.insert(container.run.clone(), state);
    }
    Ok(known)
}

/// One reaper sweep over this installation's containers.
pub(crate) async fn sweep(
    docker: &DockerBackend,
    service: &RunService,
    dry_run: bool,
) -> anyhow::Result<Vec<ReapAction>> {
    let containers = docker.list_toren_containers().await?;
    let known = liveness(service, &containers).await?;
    // A run the sweep did not see listed (created since) is live: never remove on doubt.
    let is_live = |run: &str| known.get(run).copied().unwrap_or(RunLiveness::Live);
    Ok(docker.reap(is_live, ORPHAN_AGE, dry_run).await?)
}

/// What the run service says of the run `run` (a run id as sandbox metadata holds it).
async fn e2b_liveness(
    service: &RunService,
    run: &str,
) -> Result<toren_sandbox_e2b::RunLiveness, toren_runtime::Error> {
    use toren_sandbox_e2b::RunLiveness as L;
    let Ok(id) = run.parse::<RunId>() else {
        return Ok(L::Unknown);
    };
    match service.summary(&id).await {
        Ok(summary) if summary.status.is_terminal() => Ok(L::Finished),
        Ok(_) => Ok(L::Live),
        Err(toren_runtime::Error::Store(toren_store::Error::RunNotFound(_))) => Ok(L::Unknown),
        Err(e) => Err(e),
    }
}

/// One reaper sweep over this installation's E2B sandboxes.
pub(crate) async fn sweep_e2b(
    e2b: &E2bBackend,
    service: &RunService,
    dry_run: bool,
) -> anyhow::Result<
    Vec<(
        toren_sandbox_e2b::TorenSandbox,
        toren_sandbox_e2b::ReapReason,
        bool,
    )>,
> {
    let listed = e2b.list_toren_sandboxes().await?;
    let mut known = HashMap::new();
    for sandbox in &listed {
        known.insert(
            sandbox.run.clone(),
            e2b_liveness(service, &sandbox.run).await?,
        );
    }
    // Sessions listed after their sandboxes: a session whose sandbox was listed existed
    // before it, so a session missing here was removed (or is of another store). Without
    // a session store nothing is known of sessions, and every session's sandbox stays.
    let sessions: Option<HashSet<String>> = match service.sessions().await {
        Ok(all) => Some(all.into_iter().map(|s| s.id).collect()),
        Err(toren_runtime::Error::NoSessions) => None,
        Err(e) => return Err(e.into()),
    };
    // A run the sweep did not see listed (created since) is live: never kill on doubt.
    let runs = |run: &str| {
        known
            .get(run)
            .copied()
            .unwrap_or(toren_sandbox_e2b::RunLiveness::Live)
    };
    let sessions = |key: &str| match &sessions {
        Some(ids) if !ids.contains(key) => toren_sandbox_e2b::SessionLiveness::Unknown,
        _ => toren_sandbox_e2b::SessionLiveness::Live,
    };
    Ok(e2b
        .reap(runs, sessions, toren_sandbox_e2b::ORPHAN_AGE, dry_run)
        .await?)
}

/// Sweeps this installation's E2B sandboxes once a minute until `stop` fires.
pub(crate) async fn reap_e2b_periodically(
    e2b: E2bBackend,
    service: RunService,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(SWEEP_EVERY);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = sweep_e2b(&e2b, &service, false).await {
            tracing::warn!("e2b sandbox reaper sweep failed: {e:#}");
        }
    }
}

/// Sweeps once a minute until `stop` fires.
pub(crate) async fn reap_periodically(
    docker: DockerBackend,
    service: RunService,
    stop: CancellationToken,
) {
    let mut tick = tokio::time::interval(SWEEP_EVERY);
    loop {
        tokio::select! {
            () = stop.cancelled() => return,
            _ = tick.tick() => {}
        }
        if let Err(e) = sweep(&docker, &service, false).await {
            tracing::warn!("sandbox reaper sweep failed: {e:#}");
        }
    }
}

pub(crate) async fn list(as_json: bool) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    let docker = wiring::docker(&settings).await?;
    let service = wiring::service_for(&settings).await?;
    let containers = docker
        .list_toren_containers()
        .await
        .map_err(Failure::failed)?;
    let known = liveness(&service, &containers)
        .await
        .map_err(Failure::failed)?;
    let run_state = |c: &TorenContainer| match known.get(&c.run) {
        Some(RunLiveness::Live) => "live",
        Some(RunLiveness::Finished) => "finished",
        Some(RunLiveness::Unknown) | None => "unknown",
    };
    if as_json {
        let array: Vec<_> = containers
            .iter()
            .map(|c| {
                json!({
                    "id": c.id, "name": c.name, "run": c.run, "run_state": run_state(c),
                    "state": c.state, "image": c.image, "workspace": c.workspace,
                    "created": c.created.to_string(),
                })
            })
            .collect();
        println!("{}", serde_json::Value::Array(array));
        return Ok(0);
    }
    println!(
        "{:<14}  {:<32}  {:<8}  {:<10}  {:<20}  IMAGE",
        "CONTAINER", "RUN", "RUN IS", "STATE", "CREATED"
    );
    for c in &containers {
        println!(
            "{:<14}  {:<32}  {:<8}  {:<10}  {:<20}  {}",
            c.id.chars().take(12).collect::<String>(),
            c.run,
            run_state(c),
            c.state,
            c.created.strftime("%Y-%m-%d %H:%M:%S").to_string(),
            c.image
        );
    }
    Ok(0)
}

pub(crate) async fn reap(dry_run: bool) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    if settings.sandbox == toren_config::SandboxChoice::E2b {
        return reap_e2b(&settings, dry_run).await;
    }
    let docker = wiring::docker(&settings).await?;
    let service = wiring::service_for(&settings).await?;
    let actions = sweep(&docker, &service, dry_run)
        .await
        .map_err(Failure::failed)?;
    for action in &actions {
        let reason = match action.reason {
            ReapReason::RunFinished => "its run is finished".to_owned(),
            ReapReason::Orphaned { age } => {
                format!("no known run, {} h old", age.as_secs() / 3600)
            }
        };
        let outcome = match &action.outcome {
            ReapOutcome::WouldRemove => "would remove".to_owned(),
            ReapOutcome::Removed => "removed".to_owned(),
            ReapOutcome::AlreadyGone => "already gone".to_owned(),
            ReapOutcome::Failed(why) => format!("failed ({why})"),
        };
        println!(
            "{outcome}: {} (run {}): {reason}",
            action.container.name, action.container.run
        );
    }
    {
        eprintln!(
            "{} {}; workspaces are never deleted",
            toren_display::count(actions.len(), "container", "containers"),
            if dry_run {
                "would be removed"
            } else {
                "reaped"
            }
        );
    }
    Ok(0)
}

async fn reap_e2b(settings: &toren_config::Settings, dry_run: bool) -> Result<u8, Failure> {
    let e2b = wiring::e2b(settings).await?;
    let service = wiring::service_for(settings).await?;
    let swept = sweep_e2b(&e2b, &service, dry_run)
        .await
        .map_err(Failure::failed)?;
    for (sandbox, reason, killed) in &swept {
        let outcome = match (dry_run, killed) {
            (true, _) => "would kill",
            (false, true) => "killed",
            (false, false) => "already gone",
        };
        println!("{outcome}: {} (run {}): {reason}", sandbox.id, sandbox.run);
    }
    {
        eprintln!(
            "{} E2B sandbox(es) {}; a live run's and a live session's are never touched",
            swept.len(),
            if dry_run { "would be killed" } else { "reaped" }
        );
    }
    Ok(0)
}
