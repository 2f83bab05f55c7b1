//! `TOREN_DATABASE_URL=postgres://…` through the real binary, on a throwaway cluster: a run
//! and a chat session live in Postgres (no SQLite file is made), and a server that is not
//! there fails within seconds naming its host and port, never the password.

use std::io::Write as _;
use std::process::Stdio;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toren_protocol::AssistantMessage;
use toren_test_support::postgres::Cluster;
use toren_test_support::{FakeAnthropic, Reply};

use super::common::{Toren, read, text};
use super::scripted::{WORK_AGENT, WORK_SCRIPT};

fn cluster() -> Cluster {
    Cluster::start().unwrap_or_else(|e| panic!("cannot start a test Postgres cluster: {e:#}"))
}

#[test]
fn a_run_lives_in_postgres() {
    let cluster = cluster();
    let toren = Toren::new().env("TOREN_DATABASE_URL", &cluster.url());
    toren.file("work.yaml", WORK_SCRIPT);
    toren.agent("worker", WORK_AGENT);

    let out = toren.run(&["run", "worker", "--input", "do the work"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "All done.\n");
    let run = toren.newest_run().unwrap();
    let shown = toren.show(&run);
    assert_eq!(shown["status"], "completed", "{shown}");
    let types = toren.event_types(&run);
    assert_eq!(types.first().map(String::as_str), Some("run_created"));
    assert_eq!(types.last().map(String::as_str), Some("run_completed"));
    let ws = toren.workspace(&run);
    assert_eq!(read(&ws.join("notes/todo.txt")), "one\nTWO\nthree\n");
    assert!(
        !toren.dir.path().join("toren/toren.db").exists(),
        "no SQLite file when the URL names Postgres"
    );
}

#[test]
fn a_chat_session_lives_in_postgres() {
    let cluster = cluster();
    let say = |text: &str| AssistantMessage {
        text: text.into(),
        tool_calls: vec![],
    };
    let fake = FakeAnthropic::start(Reply::turns(vec![
        say("first answer"),
        say("second answer"),
    ]))
    .unwrap();
    let toren = Toren::new()
        .env("TOREN_DATABASE_URL", &cluster.url())
        .env("ANTHROPIC_API_KEY", "k")
        .env("ANTHROPIC_BASE_URL", &fake.base_url());
    toren.agent("claude", "name: claude\nmodel: anthropic/claude-sonnet-5\n");
    let chat = |args: &[&str], input: &str| {
        let mut child = toren
            .command(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        child
            .stdin
            .take()
            .unwrap()
            .write_all(input.as_bytes())
            .unwrap();
        child.wait_with_output().unwrap()
    };
    let out = chat(&["chat", "pg", "--agent", "claude"], "hello\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "first answer\n");
    // A new process continues the session from the database: the model gets turn 1.
    let out = chat(&["chat", "pg"], "and again\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "second answer\n");
    let second = fake.requests()[1].body["messages"].to_string();
    for part in ["hello", "first answer", "and again"] {
        assert!(second.contains(part), "{part} missing from {second}");
    }
    let out = toren.run(&["sessions", "show", "pg", "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(shown["name"], json!("pg"), "{shown}");
}

#[test]
fn an_unreachable_database_fails_fast_naming_host_and_port_not_the_password() {
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let toren = Toren::new().env(
        "TOREN_DATABASE_URL",
        &format!("postgres://toren:hunter2-secret@127.0.0.1:{port}/toren"),
    );
    let started = Instant::now();
    let out = toren.run(&["runs", "list"]);
    let took = started.elapsed();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(took < Duration::from_secs(8), "took {took:?}: {stderr}");
    assert!(stderr.contains(&format!("127.0.0.1:{port}")), "{stderr}");
    assert!(stderr.contains("TOREN_DATABASE_URL"), "{stderr}");
    assert!(!stderr.contains("hunter2"), "the password leaked: {stderr}");
    assert!(text(&out.stdout).is_empty());
}
