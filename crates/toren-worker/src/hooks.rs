//! The seams between the worker and its surroundings: how a front door watches a run
//! ([`Observer`]), answers approvals on the spot ([`Approver`]), and how sandboxes are
//! opened ([`SandboxBackend`]).

use std::sync::Arc;

use async_trait::async_trait;
use toren_protocol::{Event, ResolvedPolicy, RunId};
use toren_sandbox::Sandbox;

/// Watches a run as it is driven. Every method has a default that does nothing.
pub trait Observer: Send + Sync {
    /// Streamed model text, for display only.
    fn text(&self, _delta: &str) {}
    /// An event was committed to the log.
    fn event(&self, _event: &Event) {}
    /// The run now waits for a decision on `call_id` that no [`Approver`] gave.
    fn awaiting_approval(&self, _run: &RunId, _call_id: &str, _command: &str) {}
}

/// A human decision made through a front door.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Decision {
    pub approved: bool,
    pub reason: Option<String>,
    /// Who decided.
    pub by: String,
    /// Where (`terminal`, …).
    pub via: String,
}

/// Asks a human right where the run is hosted (e.g. on the terminal of `toren run`).
#[async_trait]
pub trait Approver: Send + Sync {
    /// Asks about one bash command. `None` means this approver cannot answer (e.g. its
    /// input closed); the run then waits for a decision from elsewhere.
    async fn ask(&self, run: &RunId, call_id: &str, command: &str) -> Option<Decision>;
}

/// Opens sandboxes of one backend.
#[async_trait]
pub trait SandboxBackend: Send + Sync {
    /// The backend's name as recorded in policies (`local`, …).
    fn name(&self) -> &'static str;
    /// Opens (creating if needed) the sandbox of `run` over its workspace. `env` holds
    /// the granted variables' values.
    async fn open(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
    ) -> Result<Arc<dyn Sandbox>, toren_sandbox::Error>;

    /// The run has ended: let go of what its sandbox holds (e.g. remove its container).
    /// The workspace always stays (I-1). Failures are reported, never fatal.
    async fn finish(&self, _run: &RunId) -> Result<(), toren_sandbox::Error> {
        Ok(())
    }
}
