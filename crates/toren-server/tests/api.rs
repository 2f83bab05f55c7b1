//! The API through its router (no socket): a real SQLite store in a temp dir, agents in
//! a temp agents directory with scripted models, and a worker over the real `local`
//! bubblewrap backend when a run must be driven.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use axum::http::StatusCode;
use serde_json::{Value, json};
use support::{Home, TOKEN};

const DONE: &str = "turns:\n  - text: \"done\"\n";

#[tokio::test]
async fn every_route_but_healthz_needs_the_token() {
    let home = Home::new().await;
    let health = home.call("GET", "/healthz", None, None).await;
    assert_eq!(health.status, StatusCode::OK);

    for (method, path) in [
        ("GET", "/runs"),
        ("POST", "/runs"),
        ("GET", "/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV"),
        ("GET", "/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/events"),
        ("POST", "/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/approvals/call_1"),
        ("GET", "/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/files"),
        ("GET", "/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/files/a.txt"),
        ("GET", "/sessions"),
        ("POST", "/sessions"),
        ("GET", "/sessions/notes"),
        ("DELETE", "/sessions/notes"),
        ("POST", "/sessions/notes/messages"),
        ("GET", "/sessions/notes/files/a.txt"),
    ] {
        for token in [None, Some("wrong"), Some("")] {
            let r = home.call(method, path, token, None).await;
            assert_eq!(
                r.status,
                StatusCode::UNAUTHORIZED,
                "{method} {path} {token:?}"
            );
            assert_eq!(r.content_type(), "application/problem+json");
            assert_eq!(r.json()["status"], 401);
        }
    }
    // A token that only starts like the real one is no token.
    let prefix = &TOKEN[..TOKEN.len() - 1];
    let r = home.call("GET", "/runs", Some(prefix), None).await;
    assert_eq!(r.status, StatusCode::UNAUTHORIZED);
    let r = home.call("GET", "/runs", Some(TOKEN), None).await;
    assert_eq!(r.status, StatusCode::OK);
}

#[tokio::test]
async fn a_created_run_is_queued_and_listed_newest_first() {
    let home = Home::new().await;
    home.agent("quick", DONE, false);
    let first = home.create("quick", "one").await;
    assert_eq!(first.status, StatusCode::ACCEPTED);
    let first = first.json();
    assert_eq!(first["agent"], "quick");
    assert_eq!(first["status"], "queued");
    assert!(first["created_at"].is_string());
    let id = first["id"].as_str().unwrap().to_owned();

    let got = home.get(&format!("/runs/{id}")).await;
    assert_eq!(got.status, StatusCode::OK);
    // Nobody holds it: any worker may claim it.
    assert_eq!(got.json()["resumable"], true);

    let second = home.create("quick", "two").await.json();
    let list = home.get("/runs?limit=10").await.json();
    let ids: Vec<&str> = list["runs"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["id"].as_str().unwrap())
        .collect();
    assert_eq!(ids, vec![second["id"].as_str().unwrap(), id.as_str()]);
    let one = home.get("/runs?limit=1").await.json();
    assert_eq!(one["runs"].as_array().unwrap().len(), 1);
}

#[tokio::test]
async fn bad_requests_are_4xx_problems() {
    let home = Home::new().await;
    home.agent("quick", DONE, false);
    std::fs::write(
        home.dir.path().join("outside.yaml"),
        "name: outside\nmodel: scripted/x\n",
    )
    .unwrap();
    let cases: Vec<(&str, &str, Option<String>, StatusCode)> = vec![
        (
            "POST",
            "/runs",
            Some("{not json".into()),
            StatusCode::BAD_REQUEST,
        ),
        (
            "POST",
            "/runs",
            Some(json!({"agent": "quick"}).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "POST",
            "/runs",
            Some(json!({"agent": "quick", "input": 3}).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "POST",
            "/runs",
            Some(json!({"agent": "quick", "input": "x", "extra": 1}).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "POST",
            "/runs",
            Some(json!({"agent": "nobody", "input": "x"}).to_string()),
            StatusCode::NOT_FOUND,
        ),
        (
            "POST",
            "/runs",
            Some(json!({"agent": "../outside", "input": "x"}).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "POST",
            "/runs",
            Some(json!({"agent": home.dir.path().join("outside.yaml"), "input": "x"}).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "POST",
            "/runs",
            Some(json!({"agent": "outside.yaml", "input": "x"}).to_string()),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (
            "POST",
            "/runs",
            Some(json!({"agent": "quick", "input": "x".repeat(2 * 1024 * 1024)}).to_string()),
            StatusCode::PAYLOAD_TOO_LARGE,
        ),
        ("GET", "/runs/nonsense", None, StatusCode::NOT_FOUND),
        (
            "GET",
            "/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV",
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            "GET",
            "/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/events?format=json",
            None,
            StatusCode::NOT_FOUND,
        ),
        (
            "POST",
            "/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/cancel",
            None,
            StatusCode::NOT_FOUND,
        ),
        ("GET", "/runs?limit=many", None, StatusCode::BAD_REQUEST),
        ("GET", "/nowhere", None, StatusCode::NOT_FOUND),
    ];
    for (method, path, body, status) in cases {
        let r = home.call(method, path, Some(TOKEN), body).await;
        assert_eq!(r.status, status, "{method} {path}: {}", r.text());
        assert_eq!(
            r.content_type(),
            "application/problem+json",
            "{method} {path}"
        );
        let problem = r.json();
        assert_eq!(problem["status"], status.as_u16());
        assert!(problem["title"].is_string() && problem["detail"].is_string());
        assert!(
            !r.text().contains(home.dir.path().to_str().unwrap()),
            "{}",
            r.text()
        );
    }
    assert_eq!(
        home.get("/runs").await.json()["runs"],
        json!([]),
        "nothing was created"
    );
}

#[tokio::test]
async fn events_as_json_and_sse_resuming_after_last_event_id() {
    let home = Home::new().await;
    home.agent("quick", DONE, false);
    let id = home.create("quick", "go").await.json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    home.drive(&id).await;

    let all = home.get(&format!("/runs/{id}/events?format=json")).await;
    assert_eq!(all.status, StatusCode::OK);
    let all: Vec<Value> = serde_json::from_value(all.json()).unwrap();
    let seqs: Vec<u64> = all.iter().map(|e| e["seq"].as_u64().unwrap()).collect();
    assert_eq!(seqs, (1..=all.len() as u64).collect::<Vec<_>>());
    assert_eq!(all.last().unwrap()["type"], "run_completed");

    // The whole stream: every journaled event once, with its seq as id, then the end.
    let sse = home.get(&format!("/runs/{id}/events")).await;
    assert_eq!(sse.content_type(), "text/event-stream");
    assert_eq!(support::sse_events(&sse.text()), all);

    // Resumed after seq 2: the rest, none repeated.
    let resumed = home.sse_after(&id, 2).await;
    assert_eq!(resumed, all[2..].to_vec());
    let r = home.sse_after(&id, all.len() as u64).await;
    assert!(r.is_empty(), "{r:?}");
}

#[tokio::test]
async fn a_second_decision_gets_409_with_the_one_that_stands() {
    let home = Home::new().await;
    home.agent(
        "careful",
        "turns:\n  - tool_calls:\n      - bash: {command: \"touch ran.txt\"}\n  - text: \"done\"\n",
        true,
    );
    let id = home.create("careful", "go").await.json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let driving = home.spawn_drive(&id).await;
    let call = home.pending_call(&id).await;

    let path = format!("/runs/{id}/approvals/{call}");
    let approve = json!({"decision": "approve", "reason": "looks fine"}).to_string();
    let first = home.call("POST", &path, Some(TOKEN), Some(approve)).await;
    assert_eq!(first.status, StatusCode::OK, "{}", first.text());
    assert_eq!(first.json()["by"], "api-client");
    assert_eq!(first.json()["via"], "api");

    let deny = json!({"decision": "deny"}).to_string();
    let second = home.call("POST", &path, Some(TOKEN), Some(deny)).await;
    assert_eq!(second.status, StatusCode::CONFLICT, "{}", second.text());
    assert_eq!(second.content_type(), "application/problem+json");
    assert_eq!(second.json()["decision"], "approve");

    let bad = home
        .call(
            "POST",
            &path,
            Some(TOKEN),
            Some(json!({"decision": "maybe"}).to_string()),
        )
        .await;
    assert_eq!(bad.status, StatusCode::UNPROCESSABLE_ENTITY);

    driving.await.unwrap();
    let run = home.get(&format!("/runs/{id}")).await.json();
    assert_eq!(run["status"], "completed");
    assert!(home.workspace(&id).join("ran.txt").exists());
    let none = home.get(&format!("/runs/{id}/approvals")).await.json();
    assert_eq!(none["pending"], json!([]));
}

#[tokio::test]
async fn a_live_stream_resumed_with_last_event_id_misses_and_repeats_nothing() {
    let home = Home::new().await;
    home.agent(
        "slow",
        "turns:\n  - tool_calls:\n      - bash: {command: \"while [ ! -f go ]; do sleep 0.02; done\"}\n  - text: \"done\"\n",
        true,
    );
    std::fs::write(
        home.dir.path().join("agents/slow.yaml"),
        "name: slow\nmodel: scripted/slow.script.yaml\nsandbox:\n  approval: never\n",
    )
    .unwrap();
    let id = home.create("slow", "go").await.json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let driving = home.spawn_drive(&id).await;

    // Live: read until the command has started, then go away.
    let first = home
        .sse_until(&id, None, |text| text.contains("event: tool_started"))
        .await;
    let first = support::sse_events(&first);
    let seen = first.last().unwrap()["seq"].as_u64().unwrap();
    assert_eq!(first.last().unwrap()["type"], "tool_started");

    // Reconnect from the last id seen; the run goes on meanwhile and ends.
    std::fs::write(home.workspace(&id).join("go"), "").unwrap();
    let rest = home
        .sse_until(&id, Some(seen), |text| {
            text.contains("event: run_completed")
        })
        .await;
    let rest = support::sse_events(&rest);
    driving.await.unwrap();

    let all = home
        .get(&format!("/runs/{id}/events?format=json"))
        .await
        .json();
    let joined: Vec<Value> = first.into_iter().chain(rest).collect();
    assert_eq!(Value::from(joined), all);
}

#[tokio::test]
async fn readyz_needs_no_token_and_says_503_when_the_store_does_not_answer() {
    let home = Home::new().await;
    let ready = home.call("GET", "/readyz", None, None).await;
    assert_eq!(ready.status, StatusCode::OK, "{}", ready.text());
    assert_eq!(ready.json()["status"], "ready");

    home.close_store().await;
    let down = home.call("GET", "/readyz", None, None).await;
    assert_eq!(
        down.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        down.text()
    );
    assert_eq!(down.content_type(), "application/problem+json");
    assert_eq!(down.json()["status"], 503);
    assert!(!down.text().contains(home.dir.path().to_str().unwrap()));
    // Liveness is not readiness.
    let alive = home.call("GET", "/healthz", None, None).await;
    assert_eq!(alive.status, StatusCode::OK);
}

#[tokio::test]
async fn readyz_says_503_naming_the_sandbox_backend_when_it_cannot_open_sandboxes() {
    let mut home = Home::new().await;
    // bubblewrap where there is none: the local backend cannot open a sandbox.
    let broken = toren_sandbox::LocalBackend::new(toren_sandbox::LocalSettings {
        sandbox_root: home.dir.path().join("sandboxes"),
        bwrap: Some(home.dir.path().join("no-bwrap-here")),
    });
    home.state.backends = vec![std::sync::Arc::new(broken)];
    let down = home.call("GET", "/readyz", None, None).await;
    assert_eq!(
        down.status,
        StatusCode::SERVICE_UNAVAILABLE,
        "{}",
        down.text()
    );
    assert_eq!(down.content_type(), "application/problem+json");
    assert!(
        down.json()["detail"].as_str().unwrap().contains("local"),
        "{}",
        down.text()
    );
    assert!(!down.text().contains(home.dir.path().to_str().unwrap()));
}

#[tokio::test]
async fn a_run_paused_at_its_budget_is_raised_over_the_api_and_completes() {
    use toren_protocol::{BudgetLimit, BudgetLimits, BudgetReached, EventKind, Spending};

    let home = Home::new().await;
    let agents = &home.state.agents_dir;
    std::fs::write(agents.join("thrifty.script.yaml"), DONE).unwrap();
    std::fs::write(
        agents.join("thrifty.yaml"),
        "name: thrifty\nmodel: scripted/thrifty.script.yaml\nbudget: {tokens: 10}\n",
    )
    .unwrap();
    let id = home.create("thrifty", "go").await.json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let path = format!("/runs/{id}/budget");

    // Not paused yet: nothing to raise.
    let early = home.post(&path, json!({"add_tokens": 5})).await;
    assert_eq!(early.status, StatusCode::CONFLICT, "{}", early.text());
    assert_eq!(early.content_type(), "application/problem+json");

    // Paused as a worker pauses it: `budget_reached` under the run's lease.
    let store = home.state.service.store();
    let run: toren_protocol::RunId = id.parse().unwrap();
    let lease = store
        .acquire_lease(&run, "test", std::time::Duration::from_secs(30))
        .await
        .unwrap();
    let reached = BudgetReached {
        reached: vec![BudgetLimit::Tokens],
        spent: Spending {
            tokens: 12,
            usd: Some(toren_protocol::Usd::ZERO),
            wall_secs: 0,
        },
        limits: BudgetLimits {
            tokens: Some(10),
            ..BudgetLimits::default()
        },
    };
    store
        .append(&lease, 1, vec![EventKind::BudgetReached(reached)])
        .await
        .unwrap();
    store.release_lease(&lease).await.unwrap();
    let paused = home.get(&format!("/runs/{id}")).await.json();
    assert_eq!(paused["status"], "awaiting_budget");
    assert_eq!(paused["spending"]["reached"], json!(["tokens"]));
    assert_eq!(
        paused["spending"]["limits"],
        json!({"tokens": 10, "usd": null, "wall_secs": null})
    );

    for (body, status) in [
        (json!({}), StatusCode::UNPROCESSABLE_ENTITY),
        (json!({"add_usd": 2.0}), StatusCode::UNPROCESSABLE_ENTITY),
        (
            json!({"add_wall": "soon"}),
            StatusCode::UNPROCESSABLE_ENTITY,
        ),
        (json!({"add_tokens": -1}), StatusCode::UNPROCESSABLE_ENTITY),
        (json!({"add_tokenz": 1}), StatusCode::UNPROCESSABLE_ENTITY),
    ] {
        let reply = home.post(&path, body.clone()).await;
        assert_eq!((&body, reply.status), (&body, status), "{}", reply.text());
    }
    let unknown = home
        .post(
            "/runs/01ARZ3NDEKTSV4RRFFQ69G5FAV/budget",
            json!({"add_tokens": 1}),
        )
        .await;
    assert_eq!(unknown.status, StatusCode::NOT_FOUND, "{}", unknown.text());

    let raised = home.post(&path, json!({"add_tokens": 1000})).await;
    assert_eq!(raised.status, StatusCode::ACCEPTED, "{}", raised.text());
    assert_eq!(raised.json()["status"], "running");
    let again = home.post(&path, json!({"add_tokens": 1000})).await;
    assert_eq!(again.status, StatusCode::CONFLICT, "{}", again.text());

    home.drive(&id).await;
    let done = home.get(&format!("/runs/{id}")).await.json();
    assert_eq!(done["status"], "completed");
    assert_eq!(done["spending"]["limits"]["tokens"], 1_010);
    assert_eq!(done["spending"]["reached"], json!([]));
    let events = home.sse_after(&id, 0).await;
    let raise = events
        .iter()
        .find(|e| e["type"] == "budget_raised")
        .unwrap();
    assert_eq!(
        (&raise["by"], &raise["via"]),
        (&json!("api-client"), &json!("api"))
    );
}

#[tokio::test]
async fn a_host_request_whose_call_ended_is_not_pending_and_its_decision_gets_409() {
    use toren_protocol::{
        AssistantMessage, EventKind, HostApprovalRequested, ModelResponded, ToolCall,
        ToolCompleted, ToolStarted, Usage,
    };

    let home = Home::new().await;
    let agents = &home.state.agents_dir;
    std::fs::write(agents.join("fetcher.script.yaml"), DONE).unwrap();
    std::fs::write(
        agents.join("fetcher.yaml"),
        "name: fetcher\nmodel: scripted/fetcher.script.yaml\n",
    )
    .unwrap();
    let id = home.create("fetcher", "go").await.json()["id"]
        .as_str()
        .unwrap()
        .to_owned();

    // As a worker writes it: call c1 runs and its command reaches a host the policy asks
    // about; nobody answers, and the call completes (its connection gave up).
    let store = home.state.service.store();
    let run: toren_protocol::RunId = id.parse().unwrap();
    let lease = store
        .acquire_lease(&run, "test", std::time::Duration::from_secs(30))
        .await
        .unwrap();
    let responded = EventKind::ModelResponded(ModelResponded {
        message: AssistantMessage {
            text: String::new(),
            tool_calls: vec![ToolCall::new(
                "c1",
                "bash",
                json!({"command": "pip install x"}),
            )],
        },
        stop_reason: "tool_use".into(),
        usage: Usage::default(),
        model: "m".into(),
    });
    let started = EventKind::ToolStarted(ToolStarted {
        call_id: "c1".into(),
        tool: "bash".into(),
        attempt: 1,
        checkpoint: None,
    });
    let asked = EventKind::HostApprovalRequested(HostApprovalRequested::new(
        "pypi.test",
        443,
        Some(("c1".into(), "pip install x".into())),
    ));
    store
        .append(&lease, 1, vec![responded, started, asked])
        .await
        .unwrap();
    let listed = home.get(&format!("/runs/{id}/approvals")).await.json();
    assert_eq!(
        listed["pending"][0]["call_id"], "host:pypi.test",
        "{listed}"
    );

    let completed = EventKind::ToolCompleted(ToolCompleted {
        call_id: "c1".into(),
        output: "connection refused".into(),
        is_error: true,
        exit_code: Some(1),
        truncated: false,
    });
    store.append(&lease, 4, vec![completed]).await.unwrap();
    store.release_lease(&lease).await.unwrap();

    let listed = home.get(&format!("/runs/{id}/approvals")).await.json();
    assert_eq!(listed["pending"], json!([]), "{listed}");
    let path = format!("/runs/{id}/approvals/host:pypi.test");
    for decision in ["approve", "deny"] {
        let reply = home.post(&path, json!({ "decision": decision })).await;
        assert_eq!(reply.status, StatusCode::CONFLICT, "{}", reply.text());
        assert_eq!(reply.content_type(), "application/problem+json");
        assert!(reply.text().contains("has ended"), "{}", reply.text());
    }
    let run = home.get(&format!("/runs/{id}")).await.json();
    assert_eq!(run["last_seq"], 5, "nothing written: {run}");
}
