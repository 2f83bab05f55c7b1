//! `GET /sessions/{id}/events`: one stream of every turn of a session, in order, each event
//! with the id `<turn>:<seq>`; it waits for turns that start later, resumes after a
//! `Last-Event-ID`, ends when the session is deleted; `?format=json` gives the journaled
//! events of all turns. Bad positions and unknown sessions are 4xx problems.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use axum::http::StatusCode;
use serde_json::{Value, json};
use support::{Home, TOKEN, sse_events_with_ids};

/// Turn 1 answers "one"; turn 2, which carries turn 1's answer, "two". No sandbox.
const TWO_TURNS: &str = "turns:\n  - text: \"one\"\n  - text: \"two\"\n";

async fn send(home: &Home, session: &str, text: &str) -> String {
    let r = home
        .post(
            &format!("/sessions/{session}/messages"),
            json!({ "text": text }),
        )
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    r.json()["run"]["id"].as_str().unwrap().to_owned()
}

fn completions(text: &str) -> usize {
    text.matches("event: run_completed").count()
}

/// The ids a stream's events should have: `<turn>:<seq>` of each event, turn by turn.
fn ids_of(events: &[Value], runs: &[&str]) -> Vec<String> {
    events
        .iter()
        .map(|e| {
            let turn = runs.iter().position(|r| e["run_id"] == *r).unwrap() + 1;
            format!("{turn}:{}", e["seq"])
        })
        .collect()
}

#[tokio::test]
async fn a_session_stream_follows_every_turn_and_resumes_after_its_last_event_id() {
    let home = Home::new().await;
    home.agent("chat", TWO_TURNS, false);
    let r = home
        .post("/sessions", json!({"agent": "chat", "name": "talk"}))
        .await;
    assert_eq!(r.status, StatusCode::CREATED, "{}", r.text());
    let id = r.json()["id"].as_str().unwrap().to_owned();

    // Opened before any turn: it waits for the first, then for the next.
    let mut live = home.open_sse("/sessions/talk/events", None).await;
    let run1 = send(&home, "talk", "hello").await;
    home.drive(&run1).await;
    live.until(|t| completions(t) == 1).await;
    let run2 = send(&home, &id, "again").await;
    home.drive(&run2).await;
    let text = live.until(|t| completions(t) == 2).await.to_owned();
    assert!(!live.ended, "a session's stream does not end with a turn");

    let all = home
        .get(&format!("/sessions/{id}/events?format=json"))
        .await;
    assert_eq!(all.status, StatusCode::OK, "{}", all.text());
    let all: Vec<Value> = serde_json::from_value(all.json()).unwrap();
    let turn1 = all.iter().filter(|e| e["run_id"] == run1.as_str()).count();
    assert!(turn1 >= 3, "{all:?}");
    assert_eq!(all[turn1 - 1]["type"], "run_completed");
    assert_eq!(all.last().unwrap()["type"], "run_completed");
    assert_eq!(all[turn1]["run_id"], run2.as_str(), "turn 2 after turn 1");
    assert!(text.contains("two"), "turn 2 carried turn 1: {text}");

    let runs = [run1.as_str(), run2.as_str()];
    let (ids, events): (Vec<String>, Vec<Value>) = sse_events_with_ids(&text).into_iter().unzip();
    assert_eq!(
        events, all,
        "the stream has every journaled event once, in order"
    );
    assert_eq!(ids, ids_of(&all, &runs), "ids are <turn>:<seq>");

    // Resumed mid-turn, and at the end of turn 1: the rest, nothing repeated.
    for (resume_at, skip) in [(ids[1].clone(), 2), (ids[turn1 - 1].clone(), turn1)] {
        let mut resumed = home
            .open_sse("/sessions/talk/events", Some(&resume_at))
            .await;
        let want = completions(&text) - usize::from(skip == turn1);
        let rest = resumed.until(|t| completions(t) == want).await;
        let rest: Vec<Value> = sse_events_with_ids(rest)
            .into_iter()
            .map(|(_, e)| e)
            .collect();
        assert_eq!(rest, all[skip..].to_vec(), "after {resume_at}");
    }

    // As JSON from a position too.
    let after = "/sessions/talk/events?format=json&after=2:1";
    let tail: Vec<Value> = serde_json::from_value(home.get(after).await.json()).unwrap();
    assert_eq!(tail, all[turn1 + 1..].to_vec());
}

#[tokio::test]
async fn a_session_stream_ends_when_the_session_is_deleted() {
    let home = Home::new().await;
    home.agent("chat", TWO_TURNS, false);
    home.post("/sessions", json!({"agent": "chat", "name": "brief"}))
        .await;
    let mut live = home.open_sse("/sessions/brief/events", None).await;
    let gone = home
        .call("DELETE", "/sessions/brief", Some(TOKEN), None)
        .await;
    assert_eq!(gone.status, StatusCode::OK, "{}", gone.text());
    live.until(|_| false).await;
    assert!(live.ended, "the stream ends once its session is gone");
    assert!(sse_events_with_ids(&live.text).is_empty());
}

#[tokio::test]
async fn bad_session_event_requests_are_4xx_problems() {
    let home = Home::new().await;
    home.agent("chat", TWO_TURNS, false);
    home.post("/sessions", json!({"agent": "chat", "name": "talk"}))
        .await;
    let cases = [
        ("/sessions/nobody/events", None, StatusCode::NOT_FOUND),
        (
            "/sessions/nobody/events?format=json",
            None,
            StatusCode::NOT_FOUND,
        ),
        ("/sessions/talk/events", Some("7"), StatusCode::BAD_REQUEST),
        (
            "/sessions/talk/events",
            Some("0:1"),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/sessions/talk/events",
            Some("a:b"),
            StatusCode::BAD_REQUEST,
        ),
        (
            "/sessions/talk/events?after=3",
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            "/sessions/talk/events?format=xml",
            None,
            StatusCode::BAD_REQUEST,
        ),
        (
            "/sessions/talk/events?since=1:1",
            None,
            StatusCode::BAD_REQUEST,
        ),
    ];
    for (path, last_event_id, status) in cases {
        let r = home.get_with_last_event_id(path, last_event_id).await;
        assert_eq!(r.status, status, "{path} {last_event_id:?}: {}", r.text());
        assert_eq!(r.content_type(), "application/problem+json", "{path}");
        assert_eq!(r.json()["status"], status.as_u16());
    }
    let empty = home.get("/sessions/talk/events?format=json").await;
    assert_eq!(empty.json(), json!([]), "no turns yet");
}
