//! A fake E2B service and a backend pointed at it.

use std::time::Duration;

use toren_protocol::{ResolvedPolicy, RunId};
use toren_sandbox::{ExecOutput, ExecRequest, Sandbox};
use toren_sandbox_e2b::{E2bBackend, E2bSettings, Endpoints};
use toren_test_support::e2b::FakeE2b;

pub(crate) const KEY: &str = "e2b_0123456789abcdef";

pub(crate) struct Fixture {
    pub(crate) fake: FakeE2b,
    pub(crate) root: tempfile::TempDir,
}

impl Fixture {
    pub(crate) fn new() -> Self {
        Self {
            fake: FakeE2b::start(KEY).unwrap(),
            root: tempfile::tempdir().unwrap(),
        }
    }

    pub(crate) fn settings(&self, lifetime: Duration) -> E2bSettings {
        E2bSettings {
            endpoints: Endpoints {
                api_key: KEY.to_owned(),
                api_url: self.fake.api_url(),
                sandbox_url: self.fake.sandbox_url(),
            },
            sandbox_root: self.root.path().to_owned(),
            default_template: "base".to_owned(),
            instance: "test".to_owned(),
            lifetime,
        }
    }

    pub(crate) fn backend(&self) -> E2bBackend {
        E2bBackend::new(self.settings(Duration::from_secs(600))).unwrap()
    }
}

/// A policy as `run_created` pins it (built from JSON so that fields added later keep
/// their defaults).
pub(crate) fn policy(extra: serde_json::Value) -> ResolvedPolicy {
    let mut base = serde_json::json!({
        "backend": "e2b",
        "network": false,
        "approval": "never",
        "env": [],
    });
    if let (Some(base), Some(extra)) = (base.as_object_mut(), extra.as_object()) {
        for (k, v) in extra {
            base.insert(k.clone(), v.clone());
        }
    }
    serde_json::from_value(base).unwrap()
}

pub(crate) fn run_id() -> RunId {
    RunId::new()
}

pub(crate) async fn run(sandbox: &dyn Sandbox, command: &str) -> ExecOutput {
    run_for(sandbox, command, Duration::from_secs(20)).await
}

pub(crate) async fn run_for(sandbox: &dyn Sandbox, command: &str, timeout: Duration) -> ExecOutput {
    sandbox
        .exec(ExecRequest {
            command: command.to_owned(),
            timeout,
            output_limit: 30_000,
        })
        .await
        .unwrap()
}
