//! What a backend that can lose a run's workspace (E2B: a sandbox killed or expired behind
//! Toren's back) puts back into the new instance: a [`RestorePlan`], the files whose
//! content the run's journal knows exactly, asked of a [`RestoreSource`] the worker passes
//! in `EgressHooks::restore` (`toren-tools`' `plan_restore` makes the plan; the worker reads the log).

use std::sync::Arc;

use async_trait::async_trait;
use toren_protocol::NotRestored;

/// The files to rewrite into a replacement instance, and the ones that cannot be.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct RestorePlan {
    /// Workspace-relative path and exact content, in the order the run last wrote them.
    pub files: Vec<(String, String)>,
    /// Paths the run's file tools wrote whose content is not known exactly, with why.
    pub not_restored: Vec<NotRestored>,
}

/// Where a sandbox asks, when its instance was replaced, what to restore.
#[async_trait]
pub trait RestoreSource: Send + Sync {
    /// The plan from the run's journal as it is now; an empty plan if it cannot be read.
    async fn plan(&self) -> RestorePlan;

    /// The instance the run's log recorded last when the sandbox was opened: what a worker
    /// on another machine (no note of its own) finds gone and replaces.
    fn recorded(&self) -> Option<String> {
        None
    }
}

/// A shared [`RestoreSource`].
pub type SharedRestoreSource = Arc<dyn RestoreSource>;
