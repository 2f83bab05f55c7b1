//! Sessions over the API: created with a name or a generated one, listed, read by id or
//! name with their turns, sent messages that become turns queued for any worker, and
//! deleted with or without their workspace. A second turn starts from the first one's
//! conversation and works in the same workspace.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use axum::http::StatusCode;
use serde_json::{Value, json};
use support::Home;

/// Turn 1 of the session answers with script turns 0–1; turn 2, if it carries turn 1's
/// two assistant messages, with script turns 2–3 (the scripted model picks its answer by
/// the assistant messages it is sent). Without turn 1 in it, turn 2 would write again.
const TWO_TURNS: &str = "turns:
  - tool_calls:
      - write_file: {path: \"memo.txt\", content: \"from turn one\\n\"}
  - text: \"wrote the memo\"
  - tool_calls:
      - read_file: {path: \"memo.txt\"}
  - text: \"read the memo\"
";

async fn send(home: &Home, session: &str, text: &str) -> Value {
    let r = home
        .post(
            &format!("/sessions/{session}/messages"),
            json!({ "text": text }),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    r.json()
}

async fn events(home: &Home, run: &str) -> Vec<Value> {
    serde_json::from_value(
        home.get(&format!("/runs/{run}/events?format=json"))
            .await
            .json(),
    )
    .unwrap()
}

#[tokio::test]
async fn a_two_turn_session_carries_the_first_turn_into_the_second() {
    let home = Home::new().await;
    home.agent("memo", TWO_TURNS, true);
    let created = home
        .post("/sessions", json!({"agent": "memo", "name": "notes"}))
        .await;
    assert_eq!(created.status, StatusCode::CREATED, "{}", created.text());
    let session = created.json();
    let id = session["id"].as_str().unwrap().to_owned();
    assert!(id.starts_with("ses_"), "{id}");
    assert_eq!(session["name"], "notes");

    let first = send(&home, "notes", "write a memo").await;
    assert_eq!(first["queued"], false);
    assert_eq!(first["turn"], 1);
    let run1 = first["run"]["id"].as_str().unwrap().to_owned();
    // Queued for any worker: nobody holds it.
    assert_eq!(
        home.get(&format!("/runs/{run1}")).await.json()["resumable"],
        true
    );
    home.drive(&run1).await;

    // By id this time.
    let second = send(&home, &id, "read it back").await;
    assert_eq!(second["turn"], 2);
    let run2 = second["run"]["id"].as_str().unwrap().to_owned();
    home.drive(&run2).await;

    let turn2 = events(&home, &run2).await;
    let kinds: Vec<&str> = turn2.iter().map(|e| e["type"].as_str().unwrap()).collect();
    assert_eq!(kinds.last(), Some(&"run_completed"), "{kinds:?}");
    let text = serde_json::to_string(&turn2).unwrap();
    assert!(text.contains("read the memo"), "{text}");
    assert!(!text.contains("write_file"), "turn 2 wrote again: {text}");
    assert!(
        text.contains("from turn one"),
        "the memo was not read: {text}"
    );

    let view = home.get(&format!("/sessions/{id}")).await;
    assert_eq!(view.status, StatusCode::OK);
    let view = view.json();
    let turns = view["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2);
    assert_eq!(turns[0]["run_id"], run1.as_str());
    assert_eq!(turns[1]["run_id"], run2.as_str());
    assert!(turns.iter().all(|t| t["status"] == "completed"), "{view}");
    assert_eq!(home.get("/sessions/notes").await.json()["id"], id.as_str());

    // The session's workspace is served too.
    let memo = home.get(&format!("/sessions/{id}/files/memo.txt")).await;
    assert_eq!(memo.status, StatusCode::OK, "{}", memo.text());
    assert_eq!(memo.body, b"from turn one\n");
}

#[tokio::test]
async fn a_message_sent_while_a_turn_runs_waits_and_goes_next() {
    let home = Home::new().await;
    home.agent("memo", TWO_TURNS, true);
    home.post("/sessions", json!({"agent": "memo", "name": "busy"}))
        .await;
    let first = send(&home, "busy", "write a memo").await;
    let run1 = first["run"]["id"].as_str().unwrap().to_owned();
    let waiting = send(&home, "busy", "read it back").await;
    assert_eq!(waiting, json!({"queued": true, "waiting": 1}));
    let refused = home
        .call("DELETE", "/sessions/busy", Some(support::TOKEN), None)
        .await;
    assert_eq!(refused.status, StatusCode::CONFLICT, "{}", refused.text());
    home.drive(&run1).await;

    // The next message starts the waiting one first; itself it waits behind it.
    let third = send(&home, "busy", "and again").await;
    assert_eq!(third["queued"], true, "{third}");
    let view = home.get("/sessions/busy").await.json();
    let turns = view["turns"].as_array().unwrap();
    assert_eq!(turns.len(), 2, "{view}");
    let run2 = turns[1]["run_id"].as_str().unwrap().to_owned();
    home.drive(&run2).await;
    let turn2 = serde_json::to_string(&events(&home, &run2).await).unwrap();
    assert!(turn2.contains("from turn one"), "{turn2}");
}

#[tokio::test]
async fn sessions_are_listed_named_when_unnamed_and_deleted() {
    let home = Home::new().await;
    home.agent("memo", TWO_TURNS, true);
    let unnamed = home.post("/sessions", json!({"agent": "memo"})).await;
    assert_eq!(unnamed.status, StatusCode::CREATED, "{}", unnamed.text());
    let unnamed = unnamed.json();
    let generated = unnamed["name"].as_str().unwrap().to_owned();
    assert!(!generated.is_empty());
    let kept = home
        .post("/sessions", json!({"agent": "memo", "name": "kept"}))
        .await
        .json();

    let taken = home
        .post("/sessions", json!({"agent": "memo", "name": "kept"}))
        .await;
    assert_eq!(taken.status, StatusCode::CONFLICT, "{}", taken.text());
    for (body, status) in [
        (
            json!({"agent": "memo", "name": "../x"}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (json!({"agent": "nobody"}), StatusCode::NOT_FOUND),
        (
            json!({"agent": "memo", "extra": 1}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
    ] {
        let r = home.post("/sessions", body.clone()).await;
        assert_eq!(r.status, status, "{body}: {}", r.text());
        assert_eq!(r.content_type(), "application/problem+json");
    }

    let list = home.get("/sessions").await.json();
    let names: Vec<&str> = list["sessions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|s| s["name"].as_str().unwrap())
        .collect();
    assert_eq!(names, vec!["kept", generated.as_str()]);

    // Deleted: the workspace stays unless asked for.
    let kept_ws = home
        .dir
        .path()
        .join("sandboxes")
        .join(kept["id"].as_str().unwrap());
    std::fs::write(kept_ws.join("workspace/x.txt"), "x").unwrap();
    let gone = home
        .call("DELETE", "/sessions/kept", Some(support::TOKEN), None)
        .await;
    assert_eq!(gone.status, StatusCode::OK, "{}", gone.text());
    assert_eq!(gone.json()["workspace_deleted"], false);
    assert!(kept_ws.join("workspace/x.txt").exists());
    let again = home.get("/sessions/kept").await;
    assert_eq!(again.status, StatusCode::NOT_FOUND);

    let id = unnamed["id"].as_str().unwrap();
    let unnamed_ws = home.dir.path().join("sandboxes").join(id);
    assert!(unnamed_ws.exists());
    let gone = home
        .call(
            "DELETE",
            &format!("/sessions/{id}?delete_workspace=true"),
            Some(support::TOKEN),
            None,
        )
        .await;
    assert_eq!(gone.status, StatusCode::OK, "{}", gone.text());
    assert_eq!(gone.json()["workspace_deleted"], true);
    assert!(!unnamed_ws.exists());
    assert_eq!(home.get("/sessions").await.json()["sessions"], json!([]));
    let missing = home
        .call("DELETE", "/sessions/nobody", Some(support::TOKEN), None)
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
}
