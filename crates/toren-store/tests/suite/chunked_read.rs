//! The SQLite backend reads a log in chunks of about a megabyte of payload, each one
//! result row (`src/sqlite/read.rs`): a log of several chunks, read from any seq, must come
//! back whole, in order and byte for byte — multi-byte text included, and an event larger
//! than a chunk — and a damaged row past the first chunk must still be named by its seq.

use std::time::Duration;

use pretty_assertions::assert_eq;
use toren_protocol::{AgentSpec, ApprovalRequested, Event, EventKind, RunCreated, RunId};
use toren_store::{Error, EventLog, SqliteStore};

use super::common::{raw, temp_store};

const HOLDER: &str = "test-host:1";
const TTL: Duration = Duration::from_secs(60);
/// Events of the long log (besides `run_created`), each about 48 KiB: a few chunks.
const EVENTS: usize = 60;

fn created() -> RunCreated {
    RunCreated {
        agent: AgentSpec {
            budget: None,
            name: "helper".into(),
            model: "scripted/helper".into(),
            instructions: None,
            sandbox: None,
            max_turns: 5,
            context_tokens: None,
            source: None,
        },
        policy: None,
        input: "read me back".into(),
        session: None,
        channel: None,
        start: None,
    }
}

/// An event of about `bytes` bytes of multi-byte text (so that byte and character
/// lengths differ), with JSON escapes.
fn large(i: usize, bytes: usize) -> EventKind {
    let unit = "héllo wörld — 日本語 🎉 \"quoted\"\n\t";
    EventKind::ApprovalRequested(ApprovalRequested {
        call_id: format!("call_{i}"),
        tool: "bash".into(),
        command: format!("{i}: {}", unit.repeat(bytes / unit.len())),
        attempt: 1,
    })
}

/// A run whose log holds `run_created`, [`EVENTS`] events of about 48 KiB and one of
/// 1.5 MiB in the middle; returns the events as appended.
async fn long_log(store: &SqliteStore) -> (RunId, Vec<Event>) {
    let run_id = RunId::new();
    let (first, lease) = store
        .create_run(&run_id, created(), HOLDER, TTL)
        .await
        .unwrap();
    let mut events = vec![first];
    for i in 0..EVENTS {
        let bytes = if i == EVENTS / 2 { 3 << 19 } else { 48 << 10 };
        let written = store
            .append(&lease, events.len() as u64, vec![large(i, bytes)])
            .await
            .unwrap();
        events.extend(written);
    }
    (run_id, events)
}

#[tokio::test]
async fn a_log_of_many_chunks_reads_whole_and_in_order_from_any_seq() {
    let (_dir, store) = temp_store().await;
    let (run_id, events) = long_log(&store).await;
    let total: usize = events
        .iter()
        .map(|e| serde_json::to_string(e).unwrap().len())
        .sum();
    assert!(
        total > 4 << 20,
        "the log spans several chunks ({total} bytes)"
    );

    assert_eq!(store.read(&run_id, 0).await.unwrap(), events);
    for after in [1, 2, 17, EVENTS / 2, EVENTS / 2 + 1, EVENTS - 1, EVENTS] {
        assert_eq!(
            store.read(&run_id, after as u64).await.unwrap(),
            events[after..].to_vec(),
            "after #{after}"
        );
    }
    assert_eq!(
        store.read(&run_id, EVENTS as u64 + 1).await.unwrap(),
        vec![]
    );
}

#[tokio::test]
async fn a_damaged_row_past_the_first_chunk_is_named_by_its_seq() {
    let (_dir, store) = temp_store().await;
    let (run_id, _) = long_log(&store).await;
    let damaged = EVENTS as i64 - 3;
    let mut conn = raw(store.path()).await;
    sqlx::query("UPDATE events SET payload = '{\"type\":\"from_the_future\"}' WHERE seq = ?")
        .bind(damaged)
        .execute(&mut conn)
        .await
        .unwrap();
    let read = store.read(&run_id, 0).await;
    assert!(
        matches!(&read, Err(Error::CorruptEvent { run_id: id, seq, reason })
            if *id == run_id.as_str() && *seq == damaged as u64
                && reason.starts_with("not an event of a known format")),
        "got {read:?}"
    );
}

#[tokio::test]
async fn a_row_holding_another_rows_event_is_named_by_its_seq() {
    let (_dir, store) = temp_store().await;
    let (run_id, _) = long_log(&store).await;
    let mut conn = raw(store.path()).await;
    sqlx::query(
        "UPDATE events SET payload = (SELECT payload FROM events WHERE seq = 5)
         WHERE seq = 40",
    )
    .execute(&mut conn)
    .await
    .unwrap();
    let read = store.read(&run_id, 0).await;
    assert!(
        matches!(&read, Err(Error::CorruptEvent { run_id: id, seq: 40, reason })
            if *id == run_id.as_str() && reason.contains("event #5 instead")),
        "got {read:?}"
    );
}

#[tokio::test]
async fn a_missing_row_is_left_to_the_fold_to_judge() {
    let (_dir, store) = temp_store().await;
    let (run_id, events) = long_log(&store).await;
    let mut conn = raw(store.path()).await;
    sqlx::query("DELETE FROM events WHERE seq = 20")
        .execute(&mut conn)
        .await
        .unwrap();
    let mut expected = events;
    expected.remove(19);
    assert_eq!(store.read(&run_id, 0).await.unwrap(), expected);
}
