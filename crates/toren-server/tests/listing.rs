//! `GET /runs` filtered by status and agent and paged with its cursor (pages neither skip
//! nor repeat runs created in between), and `GET /runs/{id}/approvals` with every approval
//! of a run: approved, denied, pending, and left unanswered by a cancelled run. Bad
//! parameters are 400 problems.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use axum::http::StatusCode;
use serde_json::{Value, json};
use support::{Home, TOKEN};

const DONE: &str = "turns:\n  - text: \"done\"\n";

async fn new_run(home: &Home, agent: &str) -> String {
    let r = home.create(agent, "go").await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    r.json()["id"].as_str().unwrap().to_owned()
}

fn ids(page: &Value) -> Vec<String> {
    page["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap().to_owned())
        .collect()
}

async fn page(home: &Home, path: &str) -> Value {
    let r = home.get(path).await;
    assert_eq!(r.status, StatusCode::OK, "{path}: {}", r.text());
    r.json()
}

#[tokio::test]
async fn runs_are_filtered_by_status_and_agent() {
    let home = Home::new().await;
    home.agent("quick", DONE, false);
    home.agent("other", DONE, false);
    let done = new_run(&home, "quick").await;
    home.drive(&done).await;
    let cancelled = new_run(&home, "quick").await;
    let r = home
        .post(&format!("/runs/{cancelled}/cancel"), json!({}))
        .await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    let queued = new_run(&home, "quick").await;
    let theirs = new_run(&home, "other").await;

    for (path, want) in [
        ("/runs", vec![&theirs, &queued, &cancelled, &done]),
        ("/runs?status=completed", vec![&done]),
        ("/runs?status=completed,cancelled", vec![&cancelled, &done]),
        (
            "/runs?status=completed&status=cancelled",
            vec![&cancelled, &done],
        ),
        ("/runs?agent=quick", vec![&queued, &cancelled, &done]),
        ("/runs?agent=other&status=queued", vec![&theirs]),
        ("/runs?agent=quick&status=queued", vec![&queued]),
        ("/runs?status=running", vec![]),
        ("/runs?status=awaiting_approval", vec![]),
        ("/runs?agent=nobody", vec![]),
    ] {
        let got = page(&home, path).await;
        let want: Vec<String> = want.into_iter().cloned().collect();
        assert_eq!(ids(&got), want, "{path}");
        assert_eq!(got["next_cursor"], Value::Null, "{path}: one page");
        assert_eq!(got["links"]["next"], Value::Null, "{path}: one page");
    }
    let one = page(&home, "/runs?status=cancelled").await;
    assert_eq!(one["runs"][0]["status"], "cancelled");
    assert_eq!(one["runs"][0]["agent"], "quick");
}

#[tokio::test]
async fn pages_follow_the_cursor_without_skipping_or_repeating_new_runs() {
    let home = Home::new().await;
    home.agent("quick", DONE, false);
    home.agent("other", DONE, false);
    let mut older = Vec::new();
    for _ in 0..5 {
        older.push(new_run(&home, "quick").await);
        // Another agent's runs in between are not on these pages.
        new_run(&home, "other").await;
    }
    older.reverse();

    let first = page(&home, "/runs?agent=quick&limit=2").await;
    assert_eq!(ids(&first), older[..2].to_vec());
    let cursor = first["next_cursor"].as_str().unwrap().to_owned();
    assert_eq!(
        first["links"]["next"],
        format!("/runs?agent=quick&limit=2&cursor={cursor}")
    );

    // Runs created between pages are newer than the cursor: not on the later pages.
    let newer = [new_run(&home, "quick").await, new_run(&home, "quick").await];

    let second = page(&home, first["links"]["next"].as_str().unwrap()).await;
    assert_eq!(ids(&second), older[2..4].to_vec());
    let third = page(&home, second["links"]["next"].as_str().unwrap()).await;
    assert_eq!(ids(&third), older[4..].to_vec());
    assert_eq!(third["next_cursor"], Value::Null, "the last page");
    assert_eq!(third["links"]["next"], Value::Null);

    // The cursor is a position: with other filters it pages those runs from there.
    let after = page(&home, &format!("/runs?limit=100&cursor={cursor}")).await;
    // Newest first: n1 n0 o4 q4 o3 q3 | o2 q2 o1 q1 o0 q0 (q3 is the cursor).
    assert_eq!(
        ids(&after).len(),
        6,
        "3 of quick and 3 of other after the cursor"
    );
    assert_eq!(ids(&after)[1], older[2]);
    let first_now = page(&home, "/runs?agent=quick&limit=2").await;
    assert_eq!(ids(&first_now), vec![newer[1].clone(), newer[0].clone()]);
}

#[tokio::test]
async fn bad_listing_parameters_are_400_problems() {
    let home = Home::new().await;
    home.agent("quick", DONE, false);
    new_run(&home, "quick").await;
    let foreign_cursor: String = "c1|yesterday|run_x"
        .bytes()
        .map(|b| format!("{b:02x}"))
        .collect();
    for (path, says) in [
        (
            "/runs?status=done".to_owned(),
            "queued, running, awaiting_approval, awaiting_budget, completed, failed, cancelled",
        ),
        (
            "/runs?status=completed,finished".to_owned(),
            "unknown status `finished`",
        ),
        ("/runs?cursor=bogus".to_owned(), "cursor"),
        (format!("/runs?cursor={foreign_cursor}"), "cursor"),
        ("/runs?limit=many".to_owned(), "whole number"),
        ("/runs?limit=-1".to_owned(), "whole number"),
        ("/runs?order=asc".to_owned(), "unknown query parameter"),
        ("/runs?limit=1&limit=2".to_owned(), "more than once"),
    ] {
        let r = home.get(&path).await;
        assert_eq!(r.status, StatusCode::BAD_REQUEST, "{path}: {}", r.text());
        assert_eq!(r.content_type(), "application/problem+json", "{path}");
        let problem = r.json();
        assert_eq!(problem["status"], 400);
        let detail = problem["detail"].as_str().unwrap();
        assert!(detail.contains(says), "{path}: {detail}");
    }
}

/// Two bash calls (the first approved, the second denied), then done.
const TWO_CALLS: &str = "turns:
  - tool_calls:
      - bash: {command: \"touch first.txt\"}
  - tool_calls:
      - bash: {command: \"touch second.txt\"}
  - text: \"done\"
";

async fn decide(home: &Home, run: &str, call: &str, body: Value) {
    let path = format!("/runs/{run}/approvals/{call}");
    let r = home
        .call("POST", &path, Some(TOKEN), Some(body.to_string()))
        .await;
    assert_eq!(r.status, StatusCode::OK, "{}", r.text());
}

/// The approvals without their times, which are checked to be times.
fn without_times(approvals: &Value) -> Value {
    let mut approvals = approvals.clone();
    for a in approvals.as_array_mut().unwrap() {
        let requested = a.as_object_mut().unwrap().remove("requested_at").unwrap();
        assert!(
            requested
                .as_str()
                .unwrap()
                .parse::<jiff::Timestamp>()
                .is_ok()
        );
        if let Some(decision) = a["decision"].as_object_mut() {
            let decided = decision.remove("decided_at").unwrap();
            assert!(decided.as_str().unwrap().parse::<jiff::Timestamp>().is_ok());
        }
    }
    approvals
}

#[tokio::test]
async fn approvals_lists_every_approval_pending_and_decided() {
    let home = Home::new().await;
    home.agent("careful", TWO_CALLS, true);
    let run = new_run(&home, "careful").await;
    let none = page(&home, &format!("/runs/{run}/approvals")).await;
    assert_eq!(none, json!({"approvals": [], "pending": []}));

    let driving = home.spawn_drive(&run).await;
    let first = home.pending_call(&run).await;
    decide(&home, &run, &first, json!({"decision": "approve"})).await;
    let second = home.pending_call(&run).await;
    assert_ne!(first, second);

    let waiting = page(&home, &format!("/runs/{run}/approvals")).await;
    let approved = json!({
        "call_id": first,
        "tool": "bash",
        "command": "touch first.txt",
        "attempt": 1,
        "status": "approved",
        "decision": {"approved": true, "by": "api-client", "via": "api", "reason": null},
    });
    assert_eq!(
        without_times(&waiting["approvals"]),
        json!([
            approved,
            {
                "call_id": second,
                "tool": "bash",
                "command": "touch second.txt",
                "attempt": 1,
                "status": "pending",
                "decision": null,
            },
        ])
    );
    assert_eq!(
        waiting["pending"],
        json!([{"call_id": second, "tool": "bash", "command": "touch second.txt"}]),
        "pending, as before: what the run waits for"
    );

    decide(
        &home,
        &run,
        &second,
        json!({"decision": "deny", "reason": "one is enough"}),
    )
    .await;
    driving.await.unwrap();
    let decided = page(&home, &format!("/runs/{run}/approvals")).await;
    assert_eq!(
        without_times(&decided["approvals"]),
        json!([
            approved,
            {
                "call_id": second,
                "tool": "bash",
                "command": "touch second.txt",
                "attempt": 1,
                "status": "denied",
                "decision": {
                    "approved": false, "by": "api-client", "via": "api", "reason": "one is enough",
                },
            },
        ])
    );
    assert_eq!(decided["pending"], json!([]));
    assert!(home.workspace(&run).join("first.txt").exists());
    assert!(!home.workspace(&run).join("second.txt").exists());
}

#[tokio::test]
async fn an_approval_of_a_cancelled_run_is_unanswered() {
    let home = Home::new().await;
    home.agent("careful", TWO_CALLS, true);
    let run = new_run(&home, "careful").await;
    let driving = home.spawn_drive(&run).await;
    let call = home.pending_call(&run).await;
    let r = home.post(&format!("/runs/{run}/cancel"), json!({})).await;
    assert_eq!(r.status, StatusCode::ACCEPTED, "{}", r.text());
    driving.await.unwrap();

    let approvals = page(&home, &format!("/runs/{run}/approvals")).await;
    assert_eq!(approvals["approvals"][0]["call_id"], call.as_str());
    assert_eq!(approvals["approvals"][0]["status"], "unanswered");
    assert_eq!(approvals["approvals"][0]["decision"], Value::Null);
    assert_eq!(
        approvals["pending"],
        json!([]),
        "nothing can be decided now"
    );

    let missing = home
        .get("/runs/run_01arz3ndektsv4rrffq69g5fav/approvals")
        .await;
    assert_eq!(missing.status, StatusCode::NOT_FOUND);
    assert_eq!(missing.content_type(), "application/problem+json");
}
