//! An agent that asks about hosts outside its list (`network: {allow: [...], ask: true}`) on a backend that cannot hold a connection while a person decides (e2b, whose
//! own firewall decides there): `POST /runs` refuses it with 422 naming the fix and writes
//! nothing (sessions go through the same `resolve_policy`). A plain host list is accepted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::sync::Arc;
use std::time::Duration;

use axum::http::StatusCode;
use serde_json::json;
use support::Home;
use toren_runtime::{PolicySettings, RunService, ServiceSettings};

/// A home whose service pins new runs to e2b, which cannot hold a host's connection.
async fn e2b_home() -> Home {
    let mut home = Home::new().await;
    let store = Arc::clone(home.state.service.store());
    home.state.service = RunService::new(
        store,
        ServiceSettings {
            policy: PolicySettings {
                backend: Some("e2b".into()),
                sandbox_root: home.dir.path().join("sandboxes"),
                volume: None,
                asks_hosts: false,
            },
            lease_ttl: Duration::from_secs(30),
            follow_poll: Duration::from_millis(50),
            streams: None,
        },
    );
    let agents = &home.state.agents_dir;
    std::fs::write(
        agents.join("asking.script.yaml"),
        "turns:\n  - text: done\n",
    )
    .unwrap();
    std::fs::write(
        agents.join("asking.yaml"),
        "name: asking\nmodel: scripted/asking.script.yaml\nsandbox:\n  network: {allow: \
         [pypi.org], ask: true}\n",
    )
    .unwrap();
    std::fs::write(
        agents.join("listed.script.yaml"),
        "turns:\n  - text: done\n",
    )
    .unwrap();
    std::fs::write(
        agents.join("listed.yaml"),
        "name: listed\nmodel: scripted/listed.script.yaml\nsandbox:\n  network: [pypi.org]\n",
    )
    .unwrap();
    home
}

#[tokio::test]
async fn an_agent_that_asks_about_hosts_is_refused_where_no_connection_can_be_held() {
    let home = e2b_home().await;
    let reply = home.create("asking", "go").await;
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reply.text()
    );
    let detail = reply.json()["detail"].as_str().unwrap().to_owned();
    assert!(
        detail.contains("agent `asking` asks about hosts outside its network list")
            && detail.contains("the e2b sandbox backend cannot hold a connection")
            && detail.contains("TOREN_SANDBOX=local or TOREN_SANDBOX=docker"),
        "{detail}"
    );
    let runs = home.get("/runs").await;
    assert_eq!(runs.json()["runs"], json!([]), "{}", runs.text());

    // A plain list is E2B's own allow-list: created, pinned as listed.
    let listed = home.create("listed", "go").await;
    assert_eq!(listed.status, StatusCode::ACCEPTED, "{}", listed.text());
}
