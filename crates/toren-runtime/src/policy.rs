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
    /// Whether the backend can hold a sandbox's connection while a person decides on a host
    /// outside the agent's list (`network: {allow: [...], ask: true}`): local and docker
    /// can (Toren's egress proxy holds it); e2b cannot (E2B's own firewall decides, and
    /// has no hook), so such an agent is refused when a run is created, never run with
    /// its asks silently refused or widened.
    pub asks_hosts: bool,
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
    if !settings.asks_hosts && sandbox.egress.as_ref().is_some_and(|egress| egress.ask) {
        return Err(Error::HostAskUnsupported {
            agent: agent.name.clone(),
            backend: backend.clone(),
        });
    }
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

#[cfg(test)]
mod tests {
    use super::*;

    fn agent(network: serde_json::Value) -> AgentSpec {
        serde_json::from_value(serde_json::json!({
            "name": "asker",
            "model": "scripted/x.yaml",
            "max_turns": 5,
            "sandbox": {"egress": network},
        }))
        .unwrap()
    }

    fn settings(backend: &str, asks_hosts: bool) -> PolicySettings {
        PolicySettings {
            backend: Some(backend.to_owned()),
            sandbox_root: PathBuf::from("/nonexistent"),
            volume: None,
            asks_hosts,
        }
    }

    #[test]
    fn ask_is_refused_where_the_backend_cannot_hold_a_connection() {
        let asking = agent(serde_json::json!({"allow": ["pypi.org"], "ask": true}));
        let refused = resolve_policy(&asking, &settings("e2b", false)).unwrap_err();
        assert!(refused.is_refusal());
        let text = refused.to_string();
        assert!(
            text.contains("agent `asker` asks about hosts")
                && text.contains("the e2b sandbox backend cannot hold a connection")
                && text.contains("TOREN_SANDBOX=local or TOREN_SANDBOX=docker"),
            "{text}"
        );
        // A plain list is E2B's own allow-list; ask is kept where a proxy holds it.
        let listed = agent(serde_json::json!({"allow": ["pypi.org"]}));
        assert!(resolve_policy(&listed, &settings("e2b", false)).is_ok());
        let pinned = resolve_policy(&asking, &settings("local", true)).unwrap();
        assert!(pinned.and_then(|p| p.egress).is_some_and(|e| e.ask));
    }
}
