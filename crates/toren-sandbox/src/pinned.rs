//! Which workspace a run's sandbox opens: exactly the one pinned in the run's policy when it
//! was created (I-4), never one recomputed from today's sandbox root. A pinned workspace that
//! is gone is an error naming it; nothing is provisioned in its place. Runs created before
//! the path was pinned get the one their sandbox root and id give, as they always did.

use std::path::Path;

use toren_protocol::{ResolvedPolicy, RunId};

use crate::error::Result;
use crate::workspace::Workspace;

/// Opens the workspace of `run` under `policy`; `root` serves only runs that pinned none.
pub fn pinned_workspace(root: &Path, run: &RunId, policy: &ResolvedPolicy) -> Result<Workspace> {
    match &policy.workspace {
        Some(path) => Workspace::open_path(Path::new(path)),
        None => Workspace::create(root, run.as_str()),
    }
}
