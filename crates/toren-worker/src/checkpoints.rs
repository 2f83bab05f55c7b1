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

/// Whether the checkpoint `id` is still kept in the store beside the workspace `policy`
/// pins (`keep` prunes the oldest): a rewind to it is refused before anything is written
/// rather than left unable to restore.
pub async fn checkpoint_kept(policy: &ResolvedPolicy, id: &str) -> bool {
    let Some(root) = policy
        .workspace
        .as_ref()
        .and_then(|ws| toren_checkpoint::Policy::store_for(std::path::Path::new(ws)))
    else {
        return false;
    };
    let id = id.to_owned();
    tokio::task::spawn_blocking(move || {
        toren_checkpoint::Store::open(root)
            .and_then(|store| store.list())
            .is_ok_and(|ids| ids.contains(&id))
    })
    .await
    .unwrap_or(false)
}
