//! The seams between the worker and its front doors: how a front door watches a run
//! ([`Observer`]) and answers approvals on the spot ([`Approver`]), and how a run's model
//! provider is made from its agent spec ([`ModelFactory`]). How sandboxes are
//! opened is `toren_sandbox::SandboxBackend`, implemented by the backends themselves.

use async_trait::async_trait;
use std::path::Path;
use std::sync::Arc;
use std::time::Duration;

use toren_model::{ModelProvider, ProviderSettings};
use toren_protocol::HostApprovalRequested;
use toren_protocol::{
    AgentSpec, ApprovalRequested, BudgetReached, Event, Message, RunId, SessionTurn,
};

/// Watches a run as it is driven. Every method has a default that does nothing.
pub trait Observer: Send + Sync {
    /// Streamed model text of `run`, for display only.
    fn text(&self, _run: &RunId, _delta: &str) {}
    /// An event was committed to the log.
    fn event(&self, _event: &Event) {}
    /// The run now waits for a decision on `request` that no [`Approver`] gave.
    fn awaiting_approval(&self, _run: &RunId, _request: &ApprovalRequested) {}
    /// A command of `run` connected to a host outside the list and the connection waits
    /// for a decision on `request` (allow the host for the run, or deny it). By default
    /// shown like a tool approval: tool `network`, the request's summary as what is
    /// approved, and its id (`host:<name>`) as the call id a decision names.
    fn awaiting_host_approval(&self, run: &RunId, request: &HostApprovalRequested) {
        self.awaiting_approval(run, &request.as_approval());
    }
    /// The run paused at its budget (`reached`) and waits for someone to raise it.
    fn awaiting_budget(&self, _run: &RunId, _reached: &BudgetReached) {}
    /// The model answered one call of `run` after `elapsed` (from the request to the
    /// end of its answer, the provider's own retries included), before the answer is
    /// journaled. Calls that fail are not reported. For latency metrics: no event marks
    /// a model call's start.
    fn model_call(&self, _run: &RunId, _elapsed: Duration) {}
}

/// Several observers watching the same runs, told in order.
pub struct Observers(pub Vec<Arc<dyn Observer>>);

impl Observer for Observers {
    fn text(&self, run: &RunId, delta: &str) {
        self.0.iter().for_each(|o| o.text(run, delta));
    }

    fn event(&self, event: &Event) {
        self.0.iter().for_each(|o| o.event(event));
    }

    fn awaiting_approval(&self, run: &RunId, request: &ApprovalRequested) {
        self.0
            .iter()
            .for_each(|o| o.awaiting_approval(run, request));
    }

    fn awaiting_host_approval(&self, run: &RunId, request: &HostApprovalRequested) {
        self.0
            .iter()
            .for_each(|o| o.awaiting_host_approval(run, request));
    }

    fn awaiting_budget(&self, run: &RunId, reached: &BudgetReached) {
        self.0.iter().for_each(|o| o.awaiting_budget(run, reached));
    }

    fn model_call(&self, run: &RunId, elapsed: Duration) {
        self.0.iter().for_each(|o| o.model_call(run, elapsed));
    }
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

    /// Asks whether a command of `run` may reach a host outside the list (for the rest of
    /// the run). By default asked like a tool approval ([`HostApprovalRequested::as_approval`]).
    async fn ask_host(&self, run: &RunId, request: &HostApprovalRequested) -> Option<Decision> {
        self.ask(run, &request.as_approval()).await
    }
}

/// Builds a run's model provider from its pinned agent spec (by the `provider/…` prefix of
/// `agent.model`).
pub trait ModelFactory: Send + Sync {
    fn model(&self, agent: &AgentSpec) -> Result<Arc<dyn ModelProvider>, toren_model::Error>;
}

/// The providers of `toren-model`, configured once for every agent.
impl ModelFactory for ProviderSettings {
    fn model(&self, agent: &AgentSpec) -> Result<Arc<dyn ModelProvider>, toren_model::Error> {
        let agent_dir = agent
            .source
            .as_deref()
            .map(Path::new)
            .and_then(Path::parent);
        toren_model::build_provider(&agent.model, agent_dir, self)
    }
}

/// One provider for every run, whatever its spec names (tests, and hosts of one agent).
impl ModelFactory for Arc<dyn ModelProvider> {
    fn model(&self, _agent: &AgentSpec) -> Result<Arc<dyn ModelProvider>, toren_model::Error> {
        Ok(Arc::clone(self))
    }
}

/// Where a session turn's conversation so far comes from (the session store, through the
/// run service). Runs that are not session turns have none.
#[async_trait]
pub trait HistorySource: Send + Sync {
    /// The conversation before `turn`, exactly as it was when the turn was created.
    async fn history(&self, turn: &SessionTurn) -> Result<Vec<Message>, String>;
}
