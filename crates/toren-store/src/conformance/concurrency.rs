//! Conformance checks with many writers at once, as spawned tasks: appenders racing for the
//! same seq, appenders that retry until their events are in, humans deciding the same call
//! from several places, processes racing to acquire one run, and appenders holding current
//! and taken-over leases. The store must serialise them: one winner per seq, call or lease,
//! no write with a lost lease, and a gap-free log.

use std::collections::BTreeMap;
use std::sync::Arc;

use tokio::sync::Barrier;
use tokio::task::JoinSet;
use toren_protocol::{Event, EventKind};

use super::fixtures::{
    PAST_TTL, TTL, approval_requested, call_id, decision, new_run, ok, tool_started,
};
use crate::{Error, EventLog, Lease, Result, TestClock};

const WRITERS: usize = 12;
const ROUNDS: u64 = 4;
const EVENTS_PER_WRITER: usize = 4;
/// Far more tries than a fair store needs with `WRITERS` writers; reaching it means appends
/// keep conflicting although nobody else wrote.
const MAX_TRIES: usize = 50 * WRITERS * EVENTS_PER_WRITER;

pub async fn concurrent_appenders_get_one_winner_per_seq(store: &Arc<dyn EventLog>) {
    let (run_id, _, lease) = new_run(&**store, "race for the next seq").await;

    // Rounds of WRITERS tasks appending after the same seq at the same moment, all with the
    // one lease (tasks of one process): the lease lets them all in, the seq picks one.
    let mut winners = Vec::new();
    for round in 0..ROUNDS {
        let last = 1 + round;
        let results = race(WRITERS, |writer| {
            let (store, lease) = (Arc::clone(store), lease.clone());
            async move {
                let kind = tool_started(&format!("round{round}-writer{writer}"));
                store.append(&lease, last, vec![kind]).await
            }
        })
        .await;
        let mut won = Vec::new();
        for result in results {
            match result {
                Ok(mut events) => won.append(&mut events),
                Err(Error::Conflict {
                    expected, actual, ..
                }) => {
                    assert_eq!(
                        (expected, actual),
                        (last, last + 1),
                        "a loser sees the winner"
                    );
                }
                Err(e) => panic!("racing appends may only fail with Conflict, got: {e}"),
            }
        }
        assert_eq!(
            won.len(),
            1,
            "exactly one of {WRITERS} appends after #{last} must win"
        );
        winners.append(&mut won);
    }
    let log = ok(store.read(&run_id, 0).await, "read");
    assert_eq!(
        log[1..].to_vec(),
        winners,
        "the log holds exactly the winners' events, in order"
    );

    // Writers that retry on Conflict until all their events are in.
    let (run_id, _, lease) = new_run(&**store, "everyone gets in").await;
    let results = race(WRITERS, |writer| {
        let (store, lease) = (Arc::clone(store), lease.clone());
        async move { append_with_retries(&*store, &lease, writer).await }
    })
    .await;
    for result in results {
        ok(result, "a retrying writer");
    }
    let log = ok(store.read(&run_id, 0).await, "read");
    let seqs: Vec<u64> = log.iter().map(|e| e.seq).collect();
    let total = 1 + (WRITERS * EVENTS_PER_WRITER) as u64;
    assert_eq!(
        seqs,
        (1..=total).collect::<Vec<u64>>(),
        "the log must stay gap-free"
    );
    let mut per_writer: BTreeMap<&str, Vec<&str>> = BTreeMap::new();
    for id in log.iter().filter_map(|e| call_id(&e.kind)) {
        let (writer, _) = id.split_once('/').unwrap_or((id, ""));
        per_writer.entry(writer).or_default().push(id);
    }
    assert_eq!(per_writer.len(), WRITERS, "every writer's events are in");
    for (writer, ids) in per_writer {
        let want: Vec<String> = (0..EVENTS_PER_WRITER)
            .map(|i| format!("{writer}/{i}"))
            .collect();
        assert_eq!(
            ids, want,
            "{writer}'s events appear once each, in its order"
        );
    }
}

pub async fn concurrent_decisions_get_one_winner(store: &Arc<dyn EventLog>) {
    let (run_id, _, lease) = new_run(&**store, "decide from everywhere").await;
    ok(
        store
            .append(&lease, 1, vec![approval_requested("toolu_race")])
            .await,
        "request",
    );

    let results = race(WRITERS, |writer| {
        let (store, run_id) = (Arc::clone(store), run_id.clone());
        let choice = decision("toolu_race", writer % 2 == 0, &format!("human{writer}"));
        async move { store.decide_approval(&run_id, choice).await }
    })
    .await;
    let mut winners = Vec::new();
    let mut refusals = Vec::new();
    for result in results {
        match result {
            Ok(event) => winners.push(event),
            Err(Error::AlreadyDecided { approved, .. }) => refusals.push(approved),
            Err(e) => panic!("racing decisions may only fail with AlreadyDecided, got: {e}"),
        }
    }
    assert_eq!(
        winners.len(),
        1,
        "exactly one of {WRITERS} decisions must win"
    );
    let winner = &winners[0];
    let EventKind::ApprovalDecided(won) = &winner.kind else {
        panic!(
            "decide_approval returned {:?}, not approval_decided",
            winner.kind
        );
    };
    assert!(
        refusals.iter().all(|approved| *approved == won.approved),
        "every loser must be told the winning decision"
    );
    let log = ok(store.read(&run_id, 0).await, "read");
    let decided: Vec<&Event> = log
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ApprovalDecided(_)))
        .collect();
    assert_eq!(
        decided,
        vec![winner],
        "the log holds the winning decision and no other"
    );
}

/// Processes racing to acquire one run: when nobody holds it (released, then expired),
/// exactly one wins and every other is told who did.
pub async fn racing_acquirers_get_one_lease(store: &Arc<dyn EventLog>, clock: &TestClock) {
    let (run_id, _, lease) = new_run(&**store, "up for grabs").await;
    ok(store.release_lease(&lease).await, "release");
    let mut last_token = lease.token;
    for round in ["released", "expired"] {
        if round == "expired" {
            clock.advance(PAST_TTL);
        }
        let results = race(WRITERS, |racer| {
            let (store, run_id) = (Arc::clone(store), run_id.clone());
            async move {
                let holder = format!("racer-{racer}");
                store.acquire_lease(&run_id, &holder, TTL).await
            }
        })
        .await;
        let (won, lost): (Vec<_>, Vec<_>) = results.into_iter().partition(Result::is_ok);
        let won: Vec<Lease> = won.into_iter().flatten().collect();
        assert_eq!(
            won.len(),
            1,
            "exactly one of {WRITERS} acquirers of a {round} run must win, got {won:?}"
        );
        let winner = &won[0];
        for refusal in lost {
            assert!(
                matches!(&refusal, Err(Error::Leased { holder, .. }) if *holder == winner.holder),
                "a losing acquirer must be told the winner holds the run, got {refusal:?}"
            );
        }
        assert!(winner.token > last_token, "the winner gets a new token");
        last_token = winner.token;
        assert_eq!(
            ok(store.run(&run_id).await, "run").lease,
            Some(winner.info()),
            "the run is held by the winner"
        );
    }
}

/// Rounds of takeovers: each round a new holder takes the expired run over, then writers
/// with the new lease and writers with every older lease append after the same seq at once.
/// Only a writer with the current lease may win; stale ones get `LeaseLost`.
pub async fn fenced_appenders_race_across_takeovers(store: &Arc<dyn EventLog>, clock: &TestClock) {
    let (run_id, _, first) = new_run(&**store, "taken over and over").await;
    let mut leases = vec![first];
    let mut winners = Vec::new();
    for round in 0..ROUNDS {
        clock.advance(PAST_TTL);
        let holder = format!("worker-{round}");
        let current = ok(
            store.acquire_lease(&run_id, &holder, TTL).await,
            "take over",
        );
        leases.push(current.clone());
        let last = 1 + round;
        let results = race(WRITERS, |writer| {
            // Even writers hold the current lease, odd ones one of the stale leases.
            let lease = if writer % 2 == 0 {
                current.clone()
            } else {
                leases[writer % (leases.len() - 1)].clone()
            };
            let store = Arc::clone(store);
            async move {
                let kind = tool_started(&format!("{}#{writer}", lease.holder));
                (lease.token, store.append(&lease, last, vec![kind]).await)
            }
        })
        .await;
        let mut won = Vec::new();
        for (token, result) in results {
            match result {
                Ok(mut events) if token == current.token => won.append(&mut events),
                Ok(events) => panic!("a writer with stale lease #{token} wrote {events:?}"),
                Err(Error::LeaseLost { now_held_by, .. }) if token != current.token => {
                    assert_eq!(
                        now_held_by,
                        Some(holder.clone()),
                        "LeaseLost names the holder"
                    );
                }
                Err(Error::Conflict { .. }) if token == current.token => {}
                Err(e) => panic!(
                    "writer with lease #{token} (current #{}): {e}",
                    current.token
                ),
            }
        }
        assert_eq!(
            won.len(),
            1,
            "exactly one writer with the current lease must win round {round}"
        );
        winners.append(&mut won);
    }
    let log = ok(store.read(&run_id, 0).await, "read");
    assert_eq!(
        log[1..].to_vec(),
        winners,
        "the log holds exactly the winners' events, in order"
    );
    for (round, event) in winners.iter().enumerate() {
        let name = call_id(&event.kind).unwrap_or_default();
        assert!(
            name.starts_with(&format!("worker-{round}#")),
            "round {round} was won by `{name}`, not by that round's holder"
        );
    }
}

/// Appends `EVENTS_PER_WRITER` events named `writerN/i`, one per call, re-reading the log
/// after each Conflict.
async fn append_with_retries(store: &dyn EventLog, lease: &Lease, writer: usize) -> Result<()> {
    for i in 0..EVENTS_PER_WRITER {
        let kind = tool_started(&format!("writer{writer:02}/{i}"));
        let mut tries = 0;
        loop {
            let last = store.run(&lease.run_id).await?.last_seq;
            match store.append(lease, last, vec![kind.clone()]).await {
                Ok(_) => break,
                Err(Error::Conflict { .. }) if tries < MAX_TRIES => tries += 1,
                Err(e) => return Err(e),
            }
        }
    }
    Ok(())
}

/// Spawns `count` tasks made by `task(i)`, releases them together, and returns their
/// results in task order.
async fn race<F, Fut, T>(count: usize, task: F) -> Vec<T>
where
    F: Fn(usize) -> Fut,
    Fut: Future<Output = T> + Send + 'static,
    T: Send + 'static,
{
    let start = Arc::new(Barrier::new(count));
    let mut tasks = JoinSet::new();
    for i in 0..count {
        let (start, work) = (Arc::clone(&start), task(i));
        tasks.spawn(async move {
            start.wait().await;
            (i, work.await)
        });
    }
    let mut results: Vec<(usize, T)> = Vec::with_capacity(count);
    while let Some(joined) = tasks.join_next().await {
        match joined {
            Ok(result) => results.push(result),
            Err(e) => panic!("a racing task died: {e}"),
        }
    }
    results.sort_by_key(|(i, _)| *i);
    results.into_iter().map(|(_, result)| result).collect()
}
