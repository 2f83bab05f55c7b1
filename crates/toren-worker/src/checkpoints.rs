//! A run's pinned `checkpoints` policy as `toren-checkpoint` applies it: the worker takes
//! checkpoints by it, and `toren diff`/`toren rewind` read and restore by the same excludes.

use toren_protocol::ResolvedPolicy;

/// The checkpoint policy a run is pinned to: `Ok(None)` when its checkpoints are off.
/// An exclude pattern that does not parse (the agent file's checker refuses those, so only
/// a log written by hand has one) is an error, never a silently wider checkpoint.
pub fn checkpoint_policy(
    policy: &ResolvedPolicy,
) -> Result<Option<toren_checkpoint::Policy>, toren_checkpoint::Error> {
    let pinned = &policy.checkpoints;
    if !pinned.enabled {
        return Ok(None);
    }
    Ok(Some(toren_checkpoint::Policy {
        exclude: toren_checkpoint::Exclude::new(&pinned.exclude)?,
        keep: usize::try_from(pinned.keep).unwrap_or(usize::MAX).max(1),
    }))
}

/// A checkpoint of the workspace `policy` pins, if it is on this host (a `local` or
/// `docker` backend, its directory here) and checkpoints are on: a session's turn takes one
/// before it begins. A checkpoint that fails is logged and `None` comes back: undo is lost
/// for that step, the turn is not.
pub async fn checkpoint_workspace(policy: &ResolvedPolicy) -> Option<String> {
    if !matches!(policy.backend.as_str(), "local" | "docker") {
        return None;
    }
    let workspace = std::path::PathBuf::from(policy.workspace.as_ref()?);
    if !workspace.is_dir() {
        return None;
    }
    let checkpoints = match checkpoint_policy(policy) {
        Ok(policy) => policy?,
        Err(error) => {
            tracing::warn!(%error, "the pinned checkpoint policy does not parse; no checkpoint");
            return None;
        }
    };
    let taken = tokio::task::spawn_blocking(move || checkpoints.checkpoint(&workspace)).await;
    match taken {
        Ok(Ok(checkpoint)) => {
            tracing::debug!(checkpoint = %checkpoint.id, hashed = checkpoint.stats.hashed, "workspace checkpoint before a turn");
            Some(checkpoint.id)
        }
        Ok(Err(error)) => {
            tracing::warn!(%error, "workspace checkpoint before a turn failed; the turn goes on without one");
            None
        }
        Err(error) => {
            tracing::warn!(%error, "workspace checkpoint task failed; the turn goes on without one");
            None
        }
    }
}

/// Whether the checkpoint `id` in the store beside the workspace `policy` pins can be
/// restored: still kept (`keep` prunes the oldest), readable, and all its content there. A
/// rewind to it is refused before anything is written rather than left unable to restore;
/// the error says why not, for people.
pub async fn checkpoint_restorable(policy: &ResolvedPolicy, id: &str) -> Result<(), String> {
    match &policy.workspace {
        Some(ws) => restorable(std::path::Path::new(ws), id).await,
        None => Err("the run has no workspace on this host".to_owned()),
    }
}

/// [`checkpoint_restorable`] for the workspace at `workspace`.
pub(crate) async fn restorable(workspace: &std::path::Path, id: &str) -> Result<(), String> {
    let Some(root) = toren_checkpoint::Policy::store_for(workspace) else {
        return Err(format!(
            "the workspace {} has no checkpoint store beside it",
            workspace.display()
        ));
    };
    let id = id.to_owned();
    let checked = tokio::task::spawn_blocking(move || {
        toren_checkpoint::Store::open(root).and_then(|store| store.check_restorable(&id))
    })
    .await;
    match checked {
        Ok(Ok(())) => Ok(()),
        Ok(Err(toren_checkpoint::Error::NotFound { id, .. })) => Err(format!(
            "checkpoint {id} is no longer kept (the oldest are pruned past \
             `sandbox.checkpoints.keep`)"
        )),
        Ok(Err(e)) => Err(format!("its checkpoint cannot be restored: {e}")),
        Err(join) => Err(format!("the check of its checkpoint failed: {join}")),
    }
}
