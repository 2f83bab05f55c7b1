//! The OpenAPI document: the checked-in copy (`crates/toren-server/openapi.json`) is the one
//! the code generates, `/openapi.json` serves it without a token, and it states the
//! API-wide rules — the bearer token on every route but the public ones, every error as
//! `application/problem+json`, request bodies closed to unknown members — which the
//! schemathesis check (`scripts/schemathesis`) then holds the running server to.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use axum::http::StatusCode;
use serde_json::Value;
use support::{Home, TOKEN};

const CHECKED_IN: &str = concat!(env!("CARGO_MANIFEST_DIR"), "/openapi.json");
const FIX: &str = "rewrite it with `TOREN_UPDATE_OPENAPI=1 cargo nextest run -p toren-server -E 'binary(openapi)'` and commit it";

/// The routes anyone may call.
const PUBLIC: [&str; 3] = ["/healthz", "/readyz", "/openapi.json"];
const METHODS: [&str; 8] = [
    "get", "put", "post", "delete", "options", "head", "patch", "trace",
];

fn document() -> Value {
    serde_json::to_value(toren_server::openapi()).unwrap()
}

/// Every operation of the document: (path, method, operation).
fn operations(doc: &Value) -> Vec<(String, String, Value)> {
    let mut found = Vec::new();
    for (path, item) in doc["paths"].as_object().unwrap() {
        for method in METHODS {
            if let Some(operation) = item.get(method) {
                found.push((path.clone(), method.to_owned(), operation.clone()));
            }
        }
    }
    found
}

#[test]
fn the_checked_in_document_is_the_one_the_code_generates() {
    let current = format!("{}\n", toren_server::openapi().to_pretty_json().unwrap());
    // The test's own update mode: the way to rewrite the copy after changing the API.
    if std::env::var_os("TOREN_UPDATE_OPENAPI").is_some() {
        std::fs::write(CHECKED_IN, &current).unwrap();
        return;
    }
    let Ok(checked_in) = std::fs::read_to_string(CHECKED_IN) else {
        panic!("crates/toren-server/openapi.json is missing; {FIX}");
    };
    if checked_in != current {
        let line = checked_in
            .lines()
            .zip(current.lines())
            .position(|(a, b)| a != b)
            .unwrap_or_else(|| checked_in.lines().count().min(current.lines().count()));
        panic!(
            "crates/toren-server/openapi.json is stale (from line {}: the checked-in `{}`, the code's `{}`); {FIX}",
            line + 1,
            checked_in.lines().nth(line).unwrap_or("<end>").trim(),
            current.lines().nth(line).unwrap_or("<end>").trim(),
        );
    }
}

#[tokio::test]
async fn the_document_is_served_without_a_token() {
    let home = Home::new().await;
    let reply = home.call("GET", "/openapi.json", None, None).await;
    assert_eq!(reply.status, StatusCode::OK, "{}", reply.text());
    assert_eq!(reply.content_type(), "application/json");
    assert_eq!(reply.json(), document());
    assert_eq!(reply.json()["openapi"], "3.1.0");
}

#[test]
fn every_route_but_the_public_ones_needs_the_bearer_token_and_says_so() {
    let doc = document();
    assert_eq!(
        doc["components"]["securitySchemes"]["bearer"],
        serde_json::json!({ "type": "http", "scheme": "bearer" })
    );
    let operations = operations(&doc);
    assert!(operations.len() >= 18, "{} operations", operations.len());
    for (path, method, operation) in operations {
        let security = &operation["security"];
        if PUBLIC.contains(&path.as_str()) {
            assert_eq!(security, &Value::Null, "{method} {path} is public");
            assert_eq!(operation["responses"].get("401"), None, "{method} {path}");
        } else {
            assert_eq!(
                security,
                &serde_json::json!([{ "bearer": [] }]),
                "{method} {path}"
            );
            assert!(
                operation["responses"].get("401").is_some(),
                "{method} {path} documents its 401"
            );
        }
    }
}

#[test]
fn every_error_response_is_a_problem_document() {
    let doc = document();
    let problem = serde_json::json!({ "schema": { "$ref": "#/components/schemas/Problem" } });
    for (path, method, operation) in operations(&doc) {
        for (status, response) in operation["responses"].as_object().unwrap() {
            if status.starts_with('4') || status.starts_with('5') {
                assert_eq!(
                    response["content"],
                    serde_json::json!({ "application/problem+json": problem }),
                    "{method} {path} {status}"
                );
            }
        }
    }
    let schema = &doc["components"]["schemas"]["Problem"];
    let mut required: Vec<&str> = schema["required"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap())
        .collect();
    required.sort_unstable();
    assert_eq!(required, ["detail", "status", "title", "type"]);
}

#[test]
fn request_bodies_refuse_unknown_members_and_routes_use_openapi_templates() {
    let doc = document();
    let schemas = &doc["components"]["schemas"];
    let mut bodies = Vec::new();
    for (path, method, operation) in operations(&doc) {
        assert!(
            !path.contains('*'),
            "{path}: a template, not axum's wildcard"
        );
        if let Some(body) = operation.get("requestBody") {
            let reference = body["content"]["application/json"]["schema"]["$ref"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path}: a JSON body by reference"));
            let name = reference.trim_start_matches("#/components/schemas/");
            assert_eq!(
                schemas[name]["additionalProperties"],
                Value::Bool(false),
                "{method} {path}: {name} is closed, as its type denies unknown fields"
            );
            bodies.push(name.to_owned());
        }
    }
    bodies.sort();
    assert_eq!(
        bodies,
        [
            "CreateRun",
            "CreateSession",
            "Decision",
            "Message",
            "RaiseBudget",
            "RewindRequest",
            "SessionRewindRequest"
        ]
    );
}

#[tokio::test]
async fn a_method_a_path_does_not_have_is_405_with_allow_and_a_problem() {
    let home = Home::new().await;
    let reply = home.call("DELETE", "/runs", Some(TOKEN), None).await;
    assert_eq!(reply.status, StatusCode::METHOD_NOT_ALLOWED);
    assert_eq!(reply.content_type(), "application/problem+json");
    let allow = reply.headers["allow"].to_str().unwrap();
    let mut allowed: Vec<&str> = allow.split(',').map(str::trim).collect();
    allowed.sort_unstable();
    assert_eq!(allowed, ["GET", "HEAD", "POST"]);
    assert_eq!(reply.json()["status"], 405);
}

#[test]
fn operation_ids_are_unique() {
    let doc = document();
    let mut ids: Vec<String> = operations(&doc)
        .into_iter()
        .map(|(path, method, operation)| {
            operation["operationId"]
                .as_str()
                .unwrap_or_else(|| panic!("{method} {path} has an operationId"))
                .to_owned()
        })
        .collect();
    let all = ids.len();
    ids.sort();
    ids.dedup();
    assert_eq!(ids.len(), all, "{ids:?}");
}

#[tokio::test]
async fn a_seq_beyond_the_documented_int64_is_refused_and_the_largest_is_taken() {
    let home = Home::new().await;
    home.agent("hello", "turns:\n  - text: \"hi\"\n", false);
    let id = home.create("hello", "go").await.json()["id"]
        .as_str()
        .unwrap()
        .to_owned();
    let largest = i64::MAX;
    let taken = home
        .get(&format!("/runs/{id}/events?format=json&after={largest}"))
        .await;
    assert_eq!(taken.status, StatusCode::OK, "{}", taken.text());
    assert_eq!(taken.json(), serde_json::json!([]));

    let beyond = u64::try_from(largest).unwrap() + 1;
    let refused = home
        .get(&format!("/runs/{id}/events?format=json&after={beyond}"))
        .await;
    assert_eq!(
        refused.status,
        StatusCode::BAD_REQUEST,
        "{}",
        refused.text()
    );
    assert_eq!(refused.content_type(), "application/problem+json");
    // Even beside a Last-Event-ID that would have been used instead.
    let beside = home
        .get_with_last_event_id(
            &format!("/runs/{id}/events?format=json&after={beyond}"),
            Some("0"),
        )
        .await;
    assert_eq!(beside.status, StatusCode::BAD_REQUEST, "{}", beside.text());
}
