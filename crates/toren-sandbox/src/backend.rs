//! The [`SandboxBackend`] trait: how a worker opens the sandbox of a run and lets go of it
//! when the run ends. Each backend implements it on its own type — [`crate::LocalBackend`]
//! here, `DockerBackend` in `toren-sandbox-docker` — so a worker holds any of them as
//! `Arc<dyn SandboxBackend>` and picks one by the name a run's pinned policy records.
//! The [`crate::Sandbox`] it opens is what the tools use.

use std::sync::Arc;

use async_trait::async_trait;
use toren_protocol::{ResolvedPolicy, RunId};

use crate::egress::EgressHooks;
use crate::error::Result;
use crate::sandbox::Sandbox;

/// Opens sandboxes of one backend.
#[async_trait]
pub trait SandboxBackend: Send + Sync {
    /// The backend's name as recorded in policies (`local`, `docker`, …).
    fn name(&self) -> &'static str;

    /// Opens (creating if needed) the sandbox of `run` over its pinned workspace. `env`
    /// holds the granted variables' values; they reach commands through their environment
    /// only, never an argv or the log (I-7).
    async fn open(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
    ) -> Result<Arc<dyn Sandbox>>;

    /// [`open`](Self::open), with the run's egress hooks: when the pinned policy lists
    /// hosts, the backend starts the run's egress proxy (`crate::egress`) with `egress`'s
    /// approver and recorder, for as long as the returned sandbox lives. `open` is this
    /// with [`EgressHooks::default`] (asks refused, decisions logged). The default
    /// ignores the hooks: a backend without a proxy gives a host list no network at all.
    async fn open_with(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
        egress: EgressHooks,
    ) -> Result<Arc<dyn Sandbox>> {
        let _ = egress;
        self.open(run, policy, env).await
    }

    /// The run has ended: let go of what its sandbox holds (e.g. remove its container).
    /// The workspace always stays (I-1). Failures are reported, never fatal.
    async fn finish(&self, _run: &RunId) -> Result<()> {
        Ok(())
    }

    /// Whether sandboxes can be opened now, cheaply (a readiness probe asks it often): the
    /// daemon answers, the binary is still there. The error says what is wrong.
    async fn ready(&self) -> Result<()> {
        Ok(())
    }

    /// Lets go of what the sandbox kept under `key` holds (a removed session's: its id is
    /// the key its turns share). The workspace always stays (I-1).
    async fn release(&self, _key: &str) -> Result<()> {
        Ok(())
    }

    /// Ends every process still running in the sandbox kept under `key` (the run's id, or
    /// the session's its turns share), before a rewind restores the workspace: nothing
    /// started earlier may rewrite the restored files. The workspace stays (I-1); the next
    /// command gets a fresh sandbox around it. Called only while no live process drives
    /// the run (the rewind holds its lease). The default does nothing, for a backend none
    /// of whose processes outlive the process that drove them.
    async fn stop_processes(&self, _key: &str) -> Result<()> {
        Ok(())
    }
}
