//! The worker registry: which worker processes are alive, what volume they serve and
//! which runs they drive (and which they passed over, with why). [`WorkerRegistry`] is the contract (its conformance checks are in
//! `conformance/workers.rs`); a worker registers with its first heartbeat, heartbeats while
//! it runs and deregisters when it stops. Liveness is only a heartbeat younger than a ttl:
//! it informs people (`toren workers list`, `toren runs show` saying a run waits for a
//! volume nobody serves) and never decides who may drive a run — leases do that.

use async_trait::async_trait;
use jiff::Timestamp;
use toren_protocol::RunId;

use crate::Result;

/// What a worker reports of itself with each heartbeat.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerBeat {
    /// The worker's identity, stable across restarts (`TOREN_WORKER_ID`).
    pub id: String,
    /// This process's name, unique to it (its lease holder name): tells a restarted
    /// worker from the process it replaced.
    pub instance: String,
    /// The host the worker runs on, for people.
    pub host: String,
    /// The workspace volume it serves; `None`: only runs without one.
    pub volume: Option<String>,
    /// How many runs it drives at once at most.
    pub concurrency: u32,
    /// When this process started.
    pub started_at: Timestamp,
    /// The runs it drives now.
    pub runs: Vec<RunId>,
    /// The runs it claimed and could not drive, so it leaves them alone from then on, each
    /// with why (what `toren runs show` and `toren workers list` tell people).
    pub passed_over: Vec<PassedOver>,
}

/// A run a worker could not drive, and why.
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct PassedOver {
    pub run: RunId,
    pub reason: String,
}

/// A registered worker as others see it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct WorkerInfo {
    /// What it said in its last heartbeat.
    pub beat: WorkerBeat,
    /// When the store recorded that heartbeat (the store's clock).
    pub heartbeat_at: Timestamp,
}

/// Where workers say they are alive.
#[async_trait]
pub trait WorkerRegistry: Send + Sync {
    /// Registers the worker or renews its registration with what `beat` says, stamped with
    /// the store's now; returns the record as stored. A beat of another instance under the
    /// same id (the worker restarted) replaces the old one.
    async fn heartbeat_worker(&self, beat: &WorkerBeat) -> Result<WorkerInfo>;

    /// Removes the worker `id`, but only while `instance` is the one registered under it (a
    /// process that was replaced does not remove its successor). Removing a worker that is
    /// not registered does nothing and succeeds.
    async fn deregister_worker(&self, id: &str, instance: &str) -> Result<()>;

    /// The workers whose last heartbeat is less than `within` old by the store's clock,
    /// ordered by id.
    async fn live_workers(&self, within: std::time::Duration) -> Result<Vec<WorkerInfo>>;
}
