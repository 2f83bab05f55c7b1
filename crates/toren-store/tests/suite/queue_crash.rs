//! A queued message survives its starter dying: a child process (this test binary, running
//! only `queue_crash_child`) makes the session's queued message its next turn with
//! `start_next_queued` and aborts at once, before driving it or telling anyone; the parent
//! reopens the file as the next process would and finds the message as exactly one turn,
//! its key kept, nothing left in the queue, and a second start finding the turn made.
//! (With the old two writes, dequeue then create_turn, a death between them lost it.)

use std::process::Command;
use std::time::Duration;

use toren_protocol::{AgentSpec, EventKind, RunCompleted, RunCreated, RunId};
use toren_store::{ChatStore, Error, EventLog, Session, SessionStore, SqliteStore};

const CHILD_ENV: &str = "TOREN_STORE_TEST_QUEUE_CRASH_URL";
const TTL: Duration = Duration::from_secs(60);
const SESSION: &str = "ses_crash";
const KEY: &str = "telegram:1:42";

fn agent() -> AgentSpec {
    // Through serde, so fields added later with defaults need no edit here.
    serde_json::from_str(r#"{"name": "coder", "model": "scripted/s.yaml", "max_turns": 5}"#)
        .unwrap()
}

fn turn(text: &str) -> RunCreated {
    RunCreated {
        agent: agent(),
        policy: None,
        input: text.into(),
        session: None,
        channel: None,
        start: None,
    }
}

#[tokio::test]
async fn a_queued_message_is_one_turn_after_its_starter_dies() {
    let dir = tempfile::tempdir().unwrap();
    let url = super::common::url_in(&dir);
    let first = RunId::new();
    {
        let store = SqliteStore::open(&url).await.unwrap();
        let session = Session {
            id: SESSION.into(),
            name: "crash".into(),
            agent: agent(),
            policy: None,
            created_at: jiff::Timestamp::now(),
        };
        store.create_session(&session).await.unwrap();
        let (_, lease, _) = store
            .create_turn(SESSION, &first, turn("one"), "h", TTL)
            .await
            .unwrap();
        store
            .enqueue_keyed(SESSION, "the waiting message", Some(KEY))
            .await
            .unwrap();
        store
            .append(
                &lease,
                1,
                vec![EventKind::RunCompleted(RunCompleted {
                    output: "ok".into(),
                })],
            )
            .await
            .unwrap();
    }
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::queue_crash::queue_crash_child",
            "--ignored",
            "--nocapture",
            "--test-threads=1",
        ])
        .env(CHILD_ENV, &url)
        .output()
        .unwrap();
    assert!(
        !output.status.success(),
        "the child must die by abort: {output:?}"
    );
    let stdout = String::from_utf8(output.stdout).unwrap();
    let started: RunId = stdout
        .lines()
        .find_map(|line| line.split_once("STARTED "))
        .map(|(_, run)| run.trim().parse().unwrap())
        .unwrap_or_else(|| panic!("the child started the turn: {stdout}"));

    let store = SqliteStore::open(&url).await.unwrap();
    let turns: Vec<(u32, RunId)> = store
        .turns(SESSION)
        .await
        .unwrap()
        .into_iter()
        .map(|t| (t.turn, t.run_id))
        .collect();
    assert_eq!(
        turns,
        vec![(1, first), (2, started.clone())],
        "the message is one turn"
    );
    let events = store.read(&started, 0).await.unwrap();
    let EventKind::RunCreated(created) = &events[0].kind else {
        panic!("{events:?}")
    };
    assert_eq!(created.input, "the waiting message");
    // The next process's starter finds nothing waiting (the turn is made, and running: a
    // worker resumes it), so it makes no second turn.
    let again = store
        .start_next_queued(SESSION, &RunId::new(), turn(""), "h", TTL)
        .await;
    assert!(
        matches!(&again, Ok(None)),
        "nothing waits any more: {again:?}"
    );
    assert!(
        store.message_taken(KEY).await.unwrap(),
        "the key stays taken"
    );
    let redelivered = store
        .enqueue_keyed(SESSION, "the waiting message", Some(KEY))
        .await;
    assert!(
        matches!(redelivered, Err(Error::MessageTaken { .. })),
        "the same chat message again makes nothing: {redelivered:?}"
    );
    assert_eq!(store.dequeue(SESSION).await.unwrap(), None, "nothing waits");
}

/// Run by `a_queued_message_is_one_turn_after_its_starter_dies` in a child process; never
/// on its own.
#[tokio::test]
#[ignore = "helper: runs only as the child process of a_queued_message_is_one_turn_after_its_starter_dies"]
async fn queue_crash_child() {
    let Ok(url) = std::env::var(CHILD_ENV) else {
        return;
    };
    let store = SqliteStore::open(&url).await.unwrap();
    let run = RunId::new();
    let started = store
        .start_next_queued(SESSION, &run, turn(""), "child", TTL)
        .await
        .unwrap()
        .unwrap();
    assert_eq!(started.key.as_deref(), Some(KEY));
    println!("STARTED {run}");
    std::process::abort();
}
