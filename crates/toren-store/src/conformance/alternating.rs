//! [`Alternating`]: an [`EventLog`] that sends each call to the next of two stores in turn.
//!
//! A backend's tests open two stores on one database (two pools, as two processes would
//! have) and run the suite through this, so racing writers go through different pools and
//! only the database's own locking keeps them apart.

use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use async_trait::async_trait;
use toren_protocol::{ApprovalDecided, Event, EventKind, RunCancelled, RunCreated, RunId};

use crate::{
    ClaimQuery, ClaimRequest, EventLog, Lease, Result, RunCounts, RunPage, RunQuery, RunSummary,
};

/// Sends each call to `first`, then `second`, then `first` again, and so on.
pub struct Alternating {
    stores: [Arc<dyn EventLog>; 2],
    next: AtomicUsize,
}

impl Alternating {
    /// Alternates between `first` and `second`, starting with `first`.
    pub fn new(first: Arc<dyn EventLog>, second: Arc<dyn EventLog>) -> Self {
        Self {
            stores: [first, second],
            next: AtomicUsize::new(0),
        }
    }

    fn pick(&self) -> &dyn EventLog {
        &*self.stores[self.next.fetch_add(1, Ordering::Relaxed) % 2]
    }
}

#[async_trait]
impl EventLog for Alternating {
    async fn create_run(
        &self,
        run_id: &RunId,
        created: RunCreated,
        holder: &str,
        ttl: Duration,
    ) -> Result<(Event, Lease)> {
        self.pick().create_run(run_id, created, holder, ttl).await
    }

    async fn create_queued(&self, run_id: &RunId, created: RunCreated) -> Result<Event> {
        self.pick().create_queued(run_id, created).await
    }

    async fn append(
        &self,
        lease: &Lease,
        after_seq: u64,
        kinds: Vec<EventKind>,
    ) -> Result<Vec<Event>> {
        self.pick().append(lease, after_seq, kinds).await
    }

    async fn read(&self, run_id: &RunId, after_seq: u64) -> Result<Vec<Event>> {
        self.pick().read(run_id, after_seq).await
    }

    async fn run(&self, run_id: &RunId) -> Result<RunSummary> {
        self.pick().run(run_id).await
    }

    async fn list_runs(&self, limit: u32) -> Result<Vec<RunSummary>> {
        self.pick().list_runs(limit).await
    }

    async fn query_runs(&self, query: &RunQuery) -> Result<RunPage> {
        self.pick().query_runs(query).await
    }

    async fn claimable_runs(&self, query: &ClaimQuery) -> Result<Vec<RunSummary>> {
        self.pick().claimable_runs(query).await
    }

    async fn claim(&self, request: &ClaimRequest) -> Result<Option<(RunSummary, Lease)>> {
        self.pick().claim(request).await
    }

    async fn decide_approval(&self, run_id: &RunId, decision: ApprovalDecided) -> Result<Event> {
        self.pick().decide_approval(run_id, decision).await
    }

    async fn cancel_run(&self, run_id: &RunId, cancelled: RunCancelled) -> Result<Event> {
        self.pick().cancel_run(run_id, cancelled).await
    }

    async fn raise_budget(
        &self,
        run_id: &RunId,
        raised: toren_protocol::BudgetRaised,
    ) -> Result<Event> {
        self.pick().raise_budget(run_id, raised).await
    }

    async fn acquire_lease(&self, run_id: &RunId, holder: &str, ttl: Duration) -> Result<Lease> {
        self.pick().acquire_lease(run_id, holder, ttl).await
    }

    async fn take_over_lease(
        &self,
        run_id: &RunId,
        dead_holder: &str,
        holder: &str,
        ttl: Duration,
    ) -> Result<Lease> {
        self.pick()
            .take_over_lease(run_id, dead_holder, holder, ttl)
            .await
    }

    async fn renew_lease(&self, lease: &Lease, ttl: Duration) -> Result<Lease> {
        self.pick().renew_lease(lease, ttl).await
    }

    async fn release_lease(&self, lease: &Lease) -> Result<()> {
        self.pick().release_lease(lease).await
    }

    async fn count_runs(&self) -> Result<RunCounts> {
        self.pick().count_runs().await
    }
}
