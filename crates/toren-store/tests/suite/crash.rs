//! An acknowledged append survives the process dying at once: a child process (this test
//! binary, running only `crash_child`) writes, prints what the store acknowledged, and
//! aborts without closing anything; the parent reopens the file and finds every event.

use std::process::Command;
use std::time::Duration;

use toren_protocol::{AgentSpec, Event, EventKind, RunCreated, RunId, ToolCompleted, ToolStarted};
use toren_store::{EventLog, SqliteStore};

const CHILD_ENV: &str = "TOREN_STORE_TEST_CRASH_URL";

#[tokio::test]
async fn acknowledged_events_survive_an_abort() {
    let dir = tempfile::tempdir().unwrap();
    let url = super::common::url_in(&dir);
    let output = Command::new(std::env::current_exe().unwrap())
        .args([
            "--exact",
            "suite::crash::crash_child",
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
    let acknowledged: Vec<Event> = stdout
        .lines()
        // libtest may print its own text before the child's first line.
        .filter_map(|line| line.split_once("ACK "))
        .map(|(_, json)| serde_json::from_str(json).unwrap())
        .collect();
    assert_eq!(
        acknowledged.len(),
        4,
        "the child acknowledged its events: {stdout}"
    );

    let store = SqliteStore::open(&url).await.unwrap();
    let run_id = acknowledged[0].run_id.clone();
    assert_eq!(store.read(&run_id, 0).await.unwrap(), acknowledged);
    assert_eq!(store.run(&run_id).await.unwrap().last_seq, 4);
}

/// Run by `acknowledged_events_survive_an_abort` in a child process; never on its own.
#[tokio::test]
#[ignore = "helper: runs only as the child process of acknowledged_events_survive_an_abort"]
async fn crash_child() {
    // Started by hand (e.g. `--include-ignored`): there is no parent to report to.
    let Ok(url) = std::env::var(CHILD_ENV) else {
        return;
    };
    let store = SqliteStore::open(&url).await.unwrap();
    let run_id = RunId::new();
    let created = RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "crasher".into(),
            model: "scripted/crasher".into(),
            instructions: None,
            sandbox: None,
            max_turns: 3,
            context_tokens: None,
            source: None,
        },
        policy: None,
        input: "write, then die".into(),
        session: None,
        channel: None,
        start: None,
    };
    let (event, lease) = store
        .create_run(&run_id, created, "crasher:1", Duration::from_secs(60))
        .await
        .unwrap();
    let mut acknowledged = vec![event];
    let started = EventKind::ToolStarted(ToolStarted {
        call_id: "toolu_c".into(),
        tool: "bash".into(),
        attempt: 1,
        checkpoint: None,
    });
    acknowledged.extend(store.append(&lease, 1, vec![started]).await.unwrap());
    let completed = EventKind::ToolCompleted(ToolCompleted {
        call_id: "toolu_c".into(),
        output: "done\n".into(),
        is_error: false,
        exit_code: Some(0),
        truncated: false,
    });
    let started_again = EventKind::ToolStarted(ToolStarted {
        call_id: "toolu_d".into(),
        tool: "bash".into(),
        attempt: 1,
        checkpoint: None,
    });
    acknowledged.extend(
        store
            .append(&lease, 2, vec![completed, started_again])
            .await
            .unwrap(),
    );
    for event in &acknowledged {
        println!("ACK {}", serde_json::to_string(event).unwrap());
    }
    std::process::abort();
}
