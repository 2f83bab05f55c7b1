//! Resolving an agent's sandbox demands against the operator's choice of backend: the
//! policy pinned in a new run.

use std::path::PathBuf;

use toren_protocol::{AgentSpec, ResolvedPolicy};

use crate::{Error, Result};

/// What the operator chose for sandboxes.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PolicySettings {
    /// The backend new runs are pinned to (`local`, `docker`, …); `None` when sandboxes are
    /// disabled (`TOREN_SANDBOX=none`).
    pub backend: Option<String>,
    /// Where new runs' workspaces are made (`TOREN_SANDBOX_ROOT`).
    pub sandbox_root: PathBuf,
    /// The workspace volume new runs are pinned to (`TOREN_WORKSPACE_VOLUME`, by default
    /// this machine): only workers serving it may drive them. `None` when the backend keeps
    /// workspaces off this machine's disk (a remote sandbox), so any worker may.
    pub volume: Option<String>,
}

/// The policy a new run of `agent` is pinned to: `None` for an agent without a sandbox. The
/// workspace is filled in when the run is created.
pub fn resolve_policy(
    agent: &AgentSpec,
    settings: &PolicySettings,
) -> Result<Option<ResolvedPolicy>> {
    let Some(sandbox) = &agent.sandbox else {
        return Ok(None);
    };
    let Some(backend) = &settings.backend else {
        return Err(Error::SandboxesDisabled {
            agent: agent.name.clone(),
        });
    };
    Ok(Some(ResolvedPolicy {
        backend: backend.clone(),
        image: sandbox.image.clone(),
        network: sandbox.network,
        egress: sandbox.egress.clone(),
        approval: sandbox.approval,
        env: sandbox.env.clone(),
        limits: sandbox.limits,
        workspace: None,
        on_interrupt: sandbox.on_interrupt,
        sandbox_key: None,
        volume: settings.volume.clone(),
        checkpoints: sandbox.checkpoints.clone(),
    }))
}
