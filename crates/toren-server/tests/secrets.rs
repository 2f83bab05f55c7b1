//! Injected secrets and granted values at the API's front doors: a run or a
//! session whose agent injects a secret this process's environment does not set is refused
//! with 422 naming the variable, before anything is written (`POST /runs`, `POST
//! /sessions`, `POST /sessions/{id}/messages`), when this process drives its runs; an API
//! in front of other processes' workers does not check. What a person sends (a run's
//! input, a session's message) is journaled with granted and injected values redacted.

#![allow(clippy::unwrap_used, clippy::expect_used)]

mod support;

use std::collections::HashMap;
use std::sync::{Arc, Mutex};

use axum::http::StatusCode;
use serde_json::json;
use support::Home;

const GRANTED: &str = "tok-5d1c7e0a-granted";
const INJECTED: &str = "ghp-8b2f4a9d-injected";

/// The process environment the service sees: a map the test changes.
type Env = Arc<Mutex<HashMap<String, String>>>;

/// A home whose service sees `env` and drives its runs (or not), with agent `injector`
/// (granted MY_TOKEN, injected GH_TOKEN for api.test).
async fn home(env: &Env, drives: bool) -> Home {
    let mut home = Home::new().await;
    see(&mut home, env, drives);
    write_agent(&home);
    home
}

/// The home's service sees `env` from now on.
fn see(home: &mut Home, env: &Env, drives: bool) {
    let lookup = Arc::clone(env);
    home.state.service = home.state.service.clone().with_env(
        Arc::new(move |name: &str| lookup.lock().unwrap().get(name).cloned()),
        drives,
    );
}

fn write_agent(home: &Home) {
    let agents = &home.state.agents_dir;
    std::fs::write(
        agents.join("injector.script.yaml"),
        "turns:\n  - text: done\n",
    )
    .unwrap();
    std::fs::write(
        agents.join("injector.yaml"),
        "name: injector\nmodel: scripted/injector.script.yaml\nsandbox:\n  env: [MY_TOKEN]\n  \
         network: [api.test]\n  secrets:\n    GH_TOKEN: {hosts: [api.test], header: \
         \"Authorization: Bearer ${value}\"}\n",
    )
    .unwrap();
}

fn set(env: &Env, name: &str, value: Option<&str>) {
    let mut env = env.lock().unwrap();
    match value {
        Some(value) => env.insert(name.to_owned(), value.to_owned()),
        None => env.remove(name),
    };
}

#[track_caller]
fn refused(reply: &support::Reply) {
    assert_eq!(
        reply.status,
        StatusCode::UNPROCESSABLE_ENTITY,
        "{}",
        reply.text()
    );
    let detail = reply.json()["detail"].as_str().unwrap().to_owned();
    assert!(
        detail.contains("agent `injector` injects GH_TOKEN")
            && detail.contains("set it in the environment of the process that drives"),
        "{detail}"
    );
}

/// The `run_created` input of `run`, from its log.
async fn input_of(home: &Home, run: &str) -> String {
    let events = home
        .state
        .service
        .events(&run.parse().unwrap(), 0)
        .await
        .unwrap();
    match &events[0].kind {
        toren_protocol::EventKind::RunCreated(created) => created.input.clone(),
        other => panic!("the log starts with {other:?}"),
    }
}

#[tokio::test]
async fn an_unset_injected_secret_is_refused_at_every_front_door_with_nothing_written() {
    let env: Env = Arc::default();
    let home = home(&env, true).await;

    refused(&home.create("injector", "work").await);
    assert_eq!(home.get("/runs").await.json()["runs"], json!([]));

    refused(
        &home
            .post("/sessions", json!({"agent": "injector", "name": "s1"}))
            .await,
    );
    assert_eq!(home.get("/sessions/s1").await.status, StatusCode::NOT_FOUND);

    // Made while it was set; unset later (the process was restarted without it): the
    // message is refused, no turn made, nothing queued.
    set(&env, "GH_TOKEN", Some(INJECTED));
    let made = home
        .post("/sessions", json!({"agent": "injector", "name": "s2"}))
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text());
    set(&env, "GH_TOKEN", None);
    refused(
        &home
            .post("/sessions/s2/messages", json!({"text": "hello"}))
            .await,
    );
    let view = home.get("/sessions/s2").await.json();
    assert_eq!(view["turns"], json!([]), "{view}");
    assert_eq!(home.get("/runs").await.json()["runs"], json!([]));

    // Set again: both go through.
    set(&env, "GH_TOKEN", Some(INJECTED));
    assert_eq!(
        home.create("injector", "work").await.status,
        StatusCode::ACCEPTED
    );
    let sent = home
        .post("/sessions/s2/messages", json!({"text": "hello"}))
        .await;
    assert_eq!(sent.status, StatusCode::ACCEPTED, "{}", sent.text());
}

#[tokio::test]
async fn an_api_in_front_of_other_workers_leaves_the_check_to_them() {
    let env: Env = Arc::default();
    let home = home(&env, false).await;
    let created = home.create("injector", "work").await;
    assert_eq!(created.status, StatusCode::ACCEPTED, "{}", created.text());
}

#[tokio::test]
async fn granted_and_injected_values_in_what_a_person_sends_are_journaled_redacted() {
    let env: Env = Arc::default();
    set(&env, "MY_TOKEN", Some(GRANTED));
    set(&env, "GH_TOKEN", Some(INJECTED));
    let home = home(&env, true).await;

    let input = format!("use {GRANTED} and {INJECTED}, then {GRANTED}");
    let created = home.create("injector", &input).await;
    assert_eq!(created.status, StatusCode::ACCEPTED, "{}", created.text());
    let run = created.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(
        input_of(&home, &run).await,
        "use [redacted:MY_TOKEN] and [redacted:GH_TOKEN], then [redacted:MY_TOKEN]"
    );

    let made = home
        .post("/sessions", json!({"agent": "injector", "name": "chat"}))
        .await;
    assert_eq!(made.status, StatusCode::CREATED, "{}", made.text());
    let sent = home
        .post(
            "/sessions/chat/messages",
            json!({ "text": format!("my token is {INJECTED}") }),
        )
        .await;
    assert_eq!(sent.status, StatusCode::ACCEPTED, "{}", sent.text());
    let turn = sent.json()["run"]["id"].as_str().unwrap().to_owned();
    assert_eq!(
        input_of(&home, &turn).await,
        "my token is [redacted:GH_TOKEN]"
    );
}

/// A process that never drove a run (an API-only front, `toren events`) learns the run's
/// values from its own environment when it reads the run, and redacts its log lines of
/// them from then on (`toren_worker::redact_log`, what the binary's log writer calls).
#[tokio::test]
async fn a_process_that_reads_a_run_redacts_its_log_lines_of_the_runs_values() {
    let mut home = Home::new().await;
    write_agent(&home);
    // Made by a process that could not know the value: the input holds it as given.
    let created = home.create("injector", &format!("use {GRANTED}")).await;
    assert_eq!(created.status, StatusCode::ACCEPTED, "{}", created.text());
    let run = created.json()["id"].as_str().unwrap().to_owned();
    assert_eq!(input_of(&home, &run).await, format!("use {GRANTED}"));
    let line = format!("a line with {GRANTED} in it");
    assert_eq!(toren_worker::redact_log(&line), line.as_str());

    // This one has it in its environment and drives nothing; reading the run teaches it.
    let env: Env = Arc::default();
    set(&env, "MY_TOKEN", Some(GRANTED));
    see(&mut home, &env, false);
    assert_eq!(
        home.get(&format!("/runs/{run}")).await.status,
        StatusCode::OK
    );
    assert_eq!(
        toren_worker::redact_log(&line),
        "a line with [redacted:MY_TOKEN] in it"
    );
}
