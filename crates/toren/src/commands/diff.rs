//! `toren diff RUN [--from STEP] [--to STEP]`: what changed in the run's workspace between
//! two points of its log, from the checkpoints its `tool_started` events name (a unified
//! diff for text, one line for binary, directories, symlinks and modes). The workspace at
//! STEP is the checkpoint of the first call started after STEP (it records the workspace
//! after everything before it); `--from` defaults to the first checkpoint, `--to` to the
//! workspace as it is now (checkpointed into the run's store for the comparison).

use anyhow::anyhow;
use toren_checkpoint::{Policy, Store};
use toren_protocol::EventKind;

use crate::cli::DiffArgs;
use crate::commands::resolve_run;
use crate::exit::Failure;
use crate::wiring;

pub(crate) async fn diff(args: &DiffArgs) -> Result<u8, Failure> {
    let service = wiring::service().await?;
    let run_id = resolve_run(&service, &args.run).await?;
    let events = service.events(&run_id, 0).await.map_err(Failure::failed)?;
    let state =
        toren_agent::RunState::from_events(&events).map_err(|e| Failure::failed(anyhow!(e)))?;
    let workspace = state
        .policy
        .as_ref()
        .and_then(|p| p.workspace.clone())
        .or_else(|| state.sandbox.as_ref().map(|s| s.workspace.clone()))
        .ok_or_else(|| Failure::failed(anyhow!("run {run_id} has no workspace")))?;
    let workspace = std::path::PathBuf::from(workspace);
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
    let from = match args.from {
        Some(step) => at(step),
        None => checkpoints.first().map(|(_, id)| id.clone()),
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
