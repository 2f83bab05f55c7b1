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
