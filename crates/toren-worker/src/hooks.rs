//! The seams between the worker and its front doors: how a front door watches a run
//! ([`Observer`]) and answers approvals on the spot ([`Approver`]). How sandboxes are
//! opened is `toren_sandbox::SandboxBackend`, implemented by the backends themselves.

use async_trait::async_trait;
use toren_protocol::{ApprovalRequested, Event, RunId};

/// Watches a run as it is driven. Every method has a default that does nothing.
pub trait Observer: Send + Sync {
    /// Streamed model text, for display only.
    fn text(&self, _delta: &str) {}
    /// An event was committed to the log.
    fn event(&self, _event: &Event) {}
    /// The run now waits for a decision on `request` that no [`Approver`] gave.
    fn awaiting_approval(&self, _run: &RunId, _request: &ApprovalRequested) {}
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
    /// Asks about one bash command (`request.attempt > 1`: a re-run of a command that was
    /// interrupted mid-execution and may have had effects). `None` means this approver
    /// cannot answer (e.g. its input closed); the run then waits for a decision from
    /// elsewhere.
    async fn ask(&self, run: &RunId, request: &ApprovalRequested) -> Option<Decision>;
}
