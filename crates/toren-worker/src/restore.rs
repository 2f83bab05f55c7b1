//! The worker's side of restoring a lost workspace: a [`RestoreSource`] that reads the
//! run's journal when its sandbox asks (an E2B sandbox replaced because the old one was
//! gone) and hands it to `toren_tools::plan_restore`, which decides; the backend writes.

use std::sync::Arc;

use async_trait::async_trait;
use toren_protocol::RunId;
use toren_sandbox::{RestorePlan, RestoreSource};
use toren_store::EventLog;

/// The run `run`'s journal in `store`, as a restore source.
pub(crate) struct JournalRestore {
    pub(crate) store: Arc<dyn EventLog>,
    pub(crate) run: RunId,
    /// The instance the log recorded last when the sandbox was opened.
    pub(crate) recorded: Option<String>,
}

#[async_trait]
impl RestoreSource for JournalRestore {
    async fn plan(&self) -> RestorePlan {
        match self.store.read(&self.run, 0).await {
            Ok(events) => toren_tools::plan_restore(events.iter().map(|e| &e.kind)),
            Err(err) => {
                tracing::warn!(run = %self.run, %err, "could not read the log to restore a lost workspace");
                RestorePlan::default()
            }
        }
    }

    fn recorded(&self) -> Option<String> {
        self.recorded.clone()
    }
}
