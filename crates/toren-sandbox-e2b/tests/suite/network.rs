//! A host list on e2b: the sandbox is created with E2B's own allow-list — the
//! whole create body checked — and an injected secret travels in the create request's
//! transform rules only, never to envd; what E2B cannot keep (`ask`) is refused before any
//! sandbox exists.

use std::sync::Arc;

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toren_sandbox::{EgressHooks, SandboxBackend};

use super::support::{Fixture, policy, run, run_id};

const VALUE: &str = "e2b-injected-secret-4711";

fn host_list(ask: bool) -> toren_protocol::ResolvedPolicy {
    policy(json!({
        "egress": {
            "allow": ["api.test", "*.pkg.test"],
            "ask": ask,
            "secrets": [{
                "name": "API_TOKEN",
                "hosts": ["api.test"],
                "header": "Authorization",
                "template": "Bearer ${value}",
            }],
        },
    }))
}

fn hooks(secrets: &[(&str, &str)]) -> EgressHooks {
    EgressHooks {
        secrets: secrets
            .iter()
            .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
            .collect(),
        ..EgressHooks::default()
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn a_host_list_is_created_as_e2b_allow_list_and_the_secret_goes_to_the_control_plane_only() {
    let fx = Fixture::new();
    let backend: Arc<dyn SandboxBackend> = Arc::new(fx.backend());
    let sandbox = backend
        .open_with(
            &run_id(),
            &host_list(false),
            vec![],
            hooks(&[("API_TOKEN", VALUE)]),
        )
        .await
        .unwrap();
    let id = sandbox.instance_id();
    let out = run(sandbox.as_ref(), "env; echo done").await;
    assert!(!out.output.contains(VALUE), "{}", out.output);

    let creates: Vec<Value> = fx
        .fake
        .requests()
        .iter()
        .filter(|r| r.method == "POST" && r.uri == "/sandboxes")
        .map(|r| serde_json::from_str(&r.body).unwrap())
        .collect();
    let metadata = fx.fake.metadata(&id).unwrap();
    assert_eq!(
        creates,
        vec![json!({
            "templateID": "base",
            "timeout": 600,
            "secure": true,
            "allow_internet_access": false,
            "metadata": metadata,
            "network": {
                "allowOut": ["api.test", "*.pkg.test"],
                "denyOut": ["0.0.0.0/0"],
                "rules": {
                    "api.test": [{"transform": {"headers": {"Authorization": format!("Bearer {VALUE}")}}}],
                },
            },
        })]
    );
    assert_eq!(fx.fake.internet(&id), Some(false));
    assert_eq!(fx.fake.env_vars(&id), Some(Default::default()));
    // The value reached E2B once, in that create; no command, upload or other call.
    let carrying: Vec<String> = fx
        .fake
        .requests()
        .iter()
        .filter(|r| r.text().contains(VALUE))
        .map(|r| format!("{} {} {}", r.plane, r.method, r.uri))
        .collect();
    assert_eq!(carrying, ["control POST /sandboxes"]);
}

#[tokio::test(flavor = "multi_thread")]
async fn what_e2b_cannot_keep_is_refused_before_any_sandbox_exists() {
    let fx = Fixture::new();
    let backend: Arc<dyn SandboxBackend> = Arc::new(fx.backend());
    let asked = backend
        .open_with(
            &run_id(),
            &host_list(true),
            vec![],
            hooks(&[("API_TOKEN", VALUE)]),
        )
        .await
        .unwrap_err()
        .to_string();
    assert!(
        asked.contains("E2B cannot keep this agent's network policy")
            && asked.contains("cannot hold a connection")
            && asked.contains("TOREN_SANDBOX=local|docker"),
        "{asked}"
    );
    let unset = backend
        .open_with(&run_id(), &host_list(false), vec![], hooks(&[]))
        .await
        .unwrap_err()
        .to_string();
    assert!(unset.contains("API_TOKEN is not set"), "{unset}");
    assert_eq!(fx.fake.calls("create"), 0);
}
