//! Workspace files over the API: a file the agent wrote comes back byte for byte with its
//! content type, a directory as a listing, and no path (`..`, encoded `..`, absolute, a
//! symlink out of the workspace) ever reaches a file outside it.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use axum::http::StatusCode;
use serde_json::{Value, json};
use support::Home;

const WRITER: &str = "turns:
  - tool_calls:
      - write_file: {path: \"out/report.json\", content: \"{\\\"ok\\\": true}\\n\"}
      - write_file: {path: \"notes.txt\", content: \"caf\\u00e9 \\u2615\\n\"}
      - write_file: {path: \"blob.bin\", content: \"raw\"}
  - text: \"done\"
";

async fn finished_run(home: &Home) -> String {
    home.agent("writer", WRITER, true);
    let id = home.create("writer", "write").await.json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    home.drive(&id).await;
    assert_eq!(
        home.get(&format!("/runs/{id}")).await.json()["status"],
        "completed"
    );
    id
}

#[tokio::test]
async fn a_file_the_agent_wrote_is_downloaded_byte_for_byte_with_its_type() {
    let home = Home::new().await;
    let id = finished_run(&home).await;

    let report = home.get(&format!("/runs/{id}/files/out/report.json")).await;
    assert_eq!(report.status, StatusCode::OK, "{}", report.text());
    assert_eq!(report.content_type(), "application/json");
    assert_eq!(report.body, b"{\"ok\": true}\n");

    let notes = home.get(&format!("/runs/{id}/files/notes.txt")).await;
    assert_eq!(notes.content_type(), "text/plain");
    assert_eq!(notes.body, "caf\u{e9} \u{2615}\n".as_bytes());
    let on_disk = std::fs::read(home.workspace(&id).join("notes.txt")).unwrap();
    assert_eq!(notes.body, on_disk);

    let blob = home.get(&format!("/runs/{id}/files/blob.bin")).await;
    assert_eq!(blob.content_type(), "application/octet-stream");
    assert_eq!(blob.body, b"raw");

    // The root and a directory are listings.
    for path in [format!("/runs/{id}/files"), format!("/runs/{id}/files/")] {
        let root = home.get(&path).await;
        assert_eq!(root.status, StatusCode::OK, "{path}");
        assert_eq!(root.content_type(), "application/json");
        let names: Vec<String> = root
            .json()
            .as_array()
            .unwrap()
            .iter()
            .map(|e| e["name"].as_str().unwrap().to_owned())
            .collect();
        assert_eq!(names, ["blob.bin", "notes.txt", "out"], "{path}");
    }
    let out = home.get(&format!("/runs/{id}/files/out/")).await.json();
    assert_eq!(
        out,
        json!([{"name": "report.json", "kind": "file", "size": 13}])
    );
    let root = home.get(&format!("/runs/{id}/files")).await.json();
    assert_eq!(
        root[2],
        json!({"name": "out", "kind": "directory", "size": 0})
    );

    let missing = home.get(&format!("/runs/{id}/files/nothing.txt")).await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.content_type(), "application/problem+json");
}

#[tokio::test]
async fn no_path_reaches_a_file_outside_the_workspace() {
    let home = Home::new().await;
    let id = finished_run(&home).await;
    let workspace = home.workspace(&id);
    // A secret beside the workspace, and links the agent could have made with bash.
    let secret = workspace.parent().unwrap().join("secret.txt");
    std::fs::write(&secret, "top secret").unwrap();
    std::os::unix::fs::symlink("/etc/passwd", workspace.join("passwd")).unwrap();
    std::os::unix::fs::symlink(&secret, workspace.join("secret")).unwrap();
    std::os::unix::fs::symlink("../secret.txt", workspace.join("up")).unwrap();
    std::os::unix::fs::symlink("/etc", workspace.join("etc")).unwrap();

    let passwd = std::fs::read_to_string("/etc/passwd").unwrap();
    for path in [
        "../secret.txt",
        "%2e%2e/secret.txt",
        "%2E%2E%2Fsecret.txt",
        "out/../../secret.txt",
        "/etc/passwd",
        "%2Fetc%2Fpasswd",
        "passwd",
        "secret",
        "up",
        "etc",
        "etc/passwd",
        "..",
        "../",
    ] {
        let r = home.get(&format!("/runs/{id}/files/{path}")).await;
        assert!(
            r.status.is_client_error(),
            "{path}: {} {}",
            r.status,
            r.text()
        );
        assert_eq!(r.content_type(), "application/problem+json", "{path}");
        let text = r.text();
        assert!(
            !text.contains("top secret") && !text.contains("root:"),
            "{path}: {text}"
        );
        assert!(!text.contains(&passwd), "{path}");
        assert!(
            !text.contains(home.dir.path().to_str().unwrap()),
            "{path}: {text}"
        );
    }
    // The listing names the links but follows none out.
    let root: Value = home.get(&format!("/runs/{id}/files")).await.json();
    let passwd_entry = root
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["name"] == "passwd")
        .unwrap();
    assert_eq!(passwd_entry["kind"], "other");
}

#[tokio::test]
async fn a_file_over_the_limit_is_refused_with_413() {
    let home = Home::new().await;
    let id = finished_run(&home).await;
    let big = home.workspace(&id).join("big.bin");
    let file = std::fs::File::create(&big).unwrap();
    file.set_len(toren_server::FILE_LIMIT + 1).unwrap();
    let r = home.get(&format!("/runs/{id}/files/big.bin")).await;
    assert_eq!(r.status, StatusCode::PAYLOAD_TOO_LARGE, "{}", r.text());
    assert_eq!(r.content_type(), "application/problem+json");
    assert!(r.json()["detail"].as_str().unwrap().contains("big.bin"));
}

#[tokio::test]
async fn files_of_an_unknown_run_or_a_run_without_a_workspace_are_404() {
    let home = Home::new().await;
    home.agent("plain", "turns:\n  - text: \"done\"\n", false);
    let id = home.create("plain", "go").await.json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    for path in [
        format!("/runs/{id}/files/x.txt"),
        "/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/files/x.txt".to_owned(),
        "/runs/nonsense/files".to_owned(),
        "/sessions/nobody/files/x.txt".to_owned(),
    ] {
        let r = home.get(&path).await;
        assert_eq!(r.status, StatusCode::NOT_FOUND, "{path}: {}", r.text());
        assert_eq!(r.content_type(), "application/problem+json");
    }
}

#[tokio::test]
async fn events_over_the_api_name_no_path_of_the_server() {
    let home = Home::new().await;
    let id = finished_run(&home).await;
    let server_dir = home.dir.path().to_str().unwrap().to_owned();
    let json = home.get(&format!("/runs/{id}/events?format=json")).await;
    let sse = home.get(&format!("/runs/{id}/events")).await;
    for (what, text) in [("json", json.text()), ("sse", sse.text())] {
        assert!(
            text.contains("run_created") && text.contains("sandbox_provisioned"),
            "{what}: {text}"
        );
        assert!(
            !text.contains(&server_dir),
            "{what} shows a server path: {text}"
        );
    }
    // The workspace is still there for the files routes.
    let notes = home.get(&format!("/runs/{id}/files/notes.txt")).await;
    assert_eq!(notes.status, StatusCode::OK);
}
