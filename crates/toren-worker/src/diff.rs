//! What changed in a run's workspace between two points of its log, from the checkpoints
//! its events name (a unified diff for text with `a/` and `b/` paths, which `git apply`
//! takes; one line for binary files, directories, symlinks and modes). The workspace at a
//! step is the checkpoint of the first call started after it (that checkpoint records the
//! workspace after everything before it); `from` defaults to the workspace as it began
//! (the project it was seeded with, else its first checkpoint), `to` to the workspace as
//! it is now (checkpointed into the run's store for the comparison).

use std::path::PathBuf;

use toren_checkpoint::{Policy, Store};
use toren_protocol::{Event, EventKind};

use crate::Error;

/// The run's workspace on this host (a `local` or `docker` sandbox's), for `run_id`'s log
/// `events`; the error says why there is none.
pub fn host_workspace(events: &[Event]) -> Result<PathBuf, Error> {
    let state = toren_agent::RunState::from_events(events)?;
    crate::rewind::workspace(&state).map_err(|why| Error::Diff {
        run: state.run_id.to_string(),
        why,
    })
}

/// The diff of the run whose log is `events` between steps `from` and `to` (see the
/// module doc), as the patch's text.
pub async fn workspace_diff(
    events: &[Event],
    from: Option<u64>,
    to: Option<u64>,
) -> Result<String, Error> {
    let workspace = host_workspace(events)?;
    let run = events
        .first()
        .map(|e| e.run_id.to_string())
        .unwrap_or_default();
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
    let seeded = events.first().and_then(|e| match &e.kind {
        EventKind::RunCreated(c) => c
            .start
            .as_ref()
            .and_then(|s| s.seeded.as_ref())
            .map(|s| s.checkpoint.clone()),
        _ => None,
    });
    let from_id = match from {
        Some(step) => at(step),
        None => seeded.or_else(|| checkpoints.first().map(|(_, id)| id.clone())),
    };
    let Some(from_id) = from_id else {
        return Err(Error::Diff {
            run,
            why: format!(
                "it has no workspace checkpoint{}",
                from.map(|s| format!(" after step {s}")).unwrap_or_default()
            ),
        });
    };
    let to_id = to.and_then(at);
    let diffed = tokio::task::spawn_blocking(move || -> Result<String, toren_checkpoint::Error> {
        let root =
            Policy::store_for(&workspace).ok_or_else(|| toren_checkpoint::Error::BadPath {
                path: workspace.display().to_string(),
                id: String::new(),
            })?;
        let store = Store::open(root)?;
        let to_id = match to_id {
            Some(id) => id,
            // Now: the workspace as it is, recorded so that it can be compared.
            None => store.checkpoint(&workspace, &Default::default())?.id,
        };
        Ok(store
            .diff(&from_id, &to_id)?
            .into_iter()
            .map(|d| d.text)
            .collect())
    })
    .await;
    match diffed {
        Ok(Ok(text)) => Ok(text),
        Ok(Err(e)) => Err(Error::Diff {
            run,
            why: e.to_string(),
        }),
        Err(join) => Err(Error::Diff {
            run,
            why: format!("the comparison failed: {join}"),
        }),
    }
}
