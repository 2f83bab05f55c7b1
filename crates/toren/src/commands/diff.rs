//! `toren diff RUN [--from STEP] [--to STEP]`: what changed in the run's workspace between
//! two points of its log, from the checkpoints its `tool_started` events name (a unified
//! diff for text with `a/` and `b/` paths, `git apply`-able; one line for binary,
//! directories, symlinks and modes). The workspace at STEP is the checkpoint of the first
//! call started after STEP (it records the workspace after everything before it); `--from`
//! defaults to the workspace as it began (the project it was seeded with, else the first
//! checkpoint), `--to` to the workspace as it is now (checkpointed into the run's store for
//! the comparison).
//!
//! `toren export RUN DIR`: the workspace as it is now, copied into a new or empty directory
//! through a scratch checkpoint store beside it (read beneath a handle, symlinks copied as
//! links, never followed), removed after.

use anyhow::anyhow;
use toren_checkpoint::{Policy, Store};
use toren_protocol::EventKind;

use crate::cli::{DiffArgs, ExportArgs};
use crate::commands::resolve_run;
use crate::exit::Failure;
use crate::wiring;

/// The host directory of `run`'s workspace, refused for a run whose workspace is elsewhere.
fn workspace_of(
    run_id: &toren_protocol::RunId,
    events: &[toren_protocol::Event],
) -> Result<std::path::PathBuf, Failure> {
    let state =
        toren_agent::RunState::from_events(events).map_err(|e| Failure::failed(anyhow!(e)))?;
    let Some(policy) = state.policy.as_ref() else {
        return Err(Failure::usage(anyhow!(
            "run {run_id} has no sandbox, so it has no workspace"
        )));
    };
    if !matches!(policy.backend.as_str(), "local" | "docker") {
        return Err(Failure::usage(anyhow!(
            "run {run_id}'s workspace is in its `{}` sandbox, not on this host",
            policy.backend
        )));
    }
    let workspace = policy
        .workspace
        .clone()
        .or_else(|| state.sandbox.as_ref().map(|s| s.workspace.clone()))
        .ok_or_else(|| Failure::failed(anyhow!("run {run_id} has no workspace")))?;
    Ok(std::path::PathBuf::from(workspace))
}

pub(crate) async fn export(args: &ExportArgs) -> Result<u8, Failure> {
    let service = wiring::service().await?;
    let run_id = resolve_run(&service, &args.run).await?;
    let events = service.events(&run_id, 0).await.map_err(Failure::failed)?;
    let workspace = workspace_of(&run_id, &events)?;
    let dest = std::path::absolute(&args.dir).map_err(|e| Failure::usage(anyhow!(e)))?;
    match std::fs::read_dir(&dest) {
        Ok(mut entries) => {
            if entries.next().is_some() {
                return Err(Failure::usage(anyhow!(
                    "{} is not empty; give a new directory (or an empty one) to copy the \
                     workspace into",
                    dest.display()
                )));
            }
        }
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => {
            std::fs::create_dir_all(&dest)
                .map_err(|e| Failure::usage(anyhow!("cannot create {}: {e}", dest.display())))?;
        }
        Err(e) => return Err(Failure::usage(anyhow!("{}: {e}", dest.display()))),
    }
    let name = dest
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    let scratch = dest.with_file_name(format!(".{name}.toren-export"));
    let copied = {
        let (scratch, dest) = (scratch.clone(), dest.clone());
        tokio::task::spawn_blocking(move || Store::open(scratch)?.export(&workspace, &dest))
            .await
            .map_err(|e| Failure::failed(anyhow!(e)))?
    };
    if let Err(e) = std::fs::remove_dir_all(&scratch) {
        eprintln!("warning: could not remove {}: {e}", scratch.display());
    }
    let copied = copied.map_err(|e| Failure::failed(anyhow!(e)))?;
    eprintln!(
        "copied run {run_id}'s workspace into {} ({} files and directories, {} bytes{})",
        toren_display::visible(&dest.display().to_string()),
        copied.files,
        copied.bytes,
        if copied.skipped.is_empty() {
            String::new()
        } else {
            format!("; {} special files not copied", copied.skipped.len())
        }
    );
    Ok(0)
}

pub(crate) async fn diff(args: &DiffArgs) -> Result<u8, Failure> {
    let service = wiring::service().await?;
    let run_id = resolve_run(&service, &args.run).await?;
    let events = service.events(&run_id, 0).await.map_err(Failure::failed)?;
    let workspace = workspace_of(&run_id, &events)?;
    let checkpoints: Vec<(u64, String)> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::ToolStarted(s) => s.checkpoint.clone().map(|id| (e.seq, id)),
            _ => None,
        })
        .collect();
    let at = |step: u64| {
        checkpoints
            .iter()
            .find(|(seq, _)| *seq > step)
            .map(|(_, id)| id.clone())
    };
    // The project the workspace was seeded with, when it was.
    let seeded = events.first().and_then(|e| match &e.kind {
        EventKind::RunCreated(c) => c
            .start
            .as_ref()
            .and_then(|s| s.seeded.as_ref())
            .map(|s| s.checkpoint.clone()),
        _ => None,
    });
    let from = match args.from {
        Some(step) => at(step),
        None => seeded.or_else(|| checkpoints.first().map(|(_, id)| id.clone())),
    };
    let Some(from) = from else {
        return Err(Failure::failed(anyhow!(
            "run {run_id} has no workspace checkpoint{}",
            args.from
                .map(|s| format!(" after step {s}"))
                .unwrap_or_default()
        )));
    };
    let to = args.to.and_then(at);
    let (store, to) = tokio::task::spawn_blocking(move || -> anyhow::Result<(Store, String)> {
        let root = Policy::store_for(&workspace)
            .ok_or_else(|| anyhow!("no store for {}", workspace.display()))?;
        let store = Store::open(root)?;
        let to = match to {
            Some(id) => id,
            // Now: the workspace as it is, recorded so that it can be compared.
            None => store.checkpoint(&workspace, &Default::default())?.id,
        };
        Ok((store, to))
    })
    .await
    .map_err(|e| Failure::failed(anyhow!(e)))?
    .map_err(Failure::failed)?;
    let diffs = store
        .diff(&from, &to)
        .map_err(|e| Failure::failed(anyhow!(e)))?;
    for d in &diffs {
        print!("{}", toren_display::visible_lines(&d.text));
    }
    Ok(0)
}
