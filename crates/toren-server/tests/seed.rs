//! A run's workspace started as a clone of a git repository over the API (`POST /runs`
//! with `workspace_from`), held to the agent's network policy, and its result taken out as
//! a patch (`GET /runs/{id}/diff`). Real git over its "dumb" HTTP protocol from a plain
//! file server on loopback, the real local backend, real SQLite.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::path::Path;

use axum::http::{StatusCode, header};
use serde_json::json;
use support::Home;
use toren_test_support::git::{ServedRepository, git};

/// A one-commit repository with `hello.txt`, served at its URL.
fn serve_repository(root: &Path) -> ServedRepository {
    let project = root.join("project");
    std::fs::create_dir_all(&project).unwrap();
    std::fs::write(project.join("hello.txt"), "hello\n").unwrap();
    for args in [
        &["init", "-q"][..],
        &["add", "."],
        &["commit", "-qm", "first"],
    ] {
        git(&project, args).unwrap();
    }
    ServedRepository::start(root, &project).unwrap()
}

fn agent(home: &Home, name: &str, network: bool) {
    let agents = &home.state.agents_dir;
    std::fs::write(
        agents.join(format!("{name}.script.yaml")),
        "turns:\n  - tool_calls:\n      - bash: {command: \"echo changed >> hello.txt\"}\n  - text: \"done\"\n",
    )
    .unwrap();
    std::fs::write(
        agents.join(format!("{name}.yaml")),
        format!(
            "name: {name}\nmodel: scripted/{name}.script.yaml\nsandbox:\n  approval: never\n  network: {network}\n"
        ),
    )
    .unwrap();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_starts_from_a_repository_and_its_result_comes_out_as_a_patch() {
    let home = Home::new().await;
    let served = serve_repository(home.dir.path());
    let url = served.url.clone();
    agent(&home, "open", true);
    agent(&home, "closed", false);

    let created = home
        .post(
            "/runs",
            json!({"agent": "open", "input": "go", "workspace_from": url}),
        )
        .await;
    assert_eq!(created.status, StatusCode::ACCEPTED, "{}", created.text());
    let id = created.json()["id"].as_str().unwrap().to_owned();
    home.drive(&id).await;
    assert_eq!(
        home.get(&format!("/runs/{id}")).await.json()["status"],
        "completed"
    );
    let patch = home.get(&format!("/runs/{id}/diff")).await;
    assert_eq!(patch.status, StatusCode::OK, "{}", patch.text());
    assert!(
        patch.content_type().starts_with("text/x-diff"),
        "{}",
        patch.content_type()
    );
    assert!(
        patch.headers[header::CONTENT_DISPOSITION]
            .to_str()
            .unwrap()
            .starts_with("attachment"),
    );
    assert!(
        patch.text().contains("--- a/hello.txt") && patch.text().contains("+changed"),
        "{}",
        patch.text()
    );

    // Held to the agent's network policy, a directory of the server's disk never taken,
    // and no run made for either.
    for (agent, from, says) in [
        ("closed", url.as_str(), "does not let it reach `127.0.0.1`"),
        (
            "open",
            "/etc",
            "a directory would be read from the server's own disk",
        ),
        (
            "open",
            "https://me:secret@example.test/r.git",
            "credentials",
        ),
    ] {
        let refused = home
            .post(
                "/runs",
                json!({"agent": agent, "input": "go", "workspace_from": from}),
            )
            .await;
        assert_eq!(
            refused.status,
            StatusCode::UNPROCESSABLE_ENTITY,
            "{from}: {}",
            refused.text()
        );
        assert!(
            refused
                .content_type()
                .starts_with("application/problem+json")
        );
        assert!(refused.text().contains(says), "{from}: {}", refused.text());
    }
    let runs = home.get("/runs").await.json();
    assert_eq!(runs["runs"].as_array().map(Vec::len), Some(1), "{runs}");

    // A session's workspace starts the same way, and its files are the repository's.
    let session = home
        .post(
            "/sessions",
            json!({"agent": "open", "name": "proj", "workspace_from": url}),
        )
        .await;
    assert_eq!(session.status, StatusCode::CREATED, "{}", session.text());
    let file = home.get("/sessions/proj/files/hello.txt").await;
    assert_eq!(file.status, StatusCode::OK, "{}", file.text());
    assert_eq!(file.text(), "hello\n");
    let refused = home
        .post(
            "/sessions",
            json!({"agent": "closed", "name": "shut", "workspace_from": url}),
        )
        .await;
    assert_eq!(
        refused.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        refused.text()
    );
    assert_eq!(
        home.get("/sessions/shut").await.status,
        StatusCode::NOT_FOUND
    );

    // A run with no sandbox has no workspace to compare.
    home.agent("plain", "turns:\n  - text: \"hi\"\n", false);
    let plain = home.create("plain", "hi").await.json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let refused = home.get(&format!("/runs/{plain}/diff")).await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text());
    assert!(refused.text().contains("no sandbox"), "{}", refused.text());
}
