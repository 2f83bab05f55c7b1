//! Conformance checks for [`WorkerRegistry`]: a heartbeat registers and renews, liveness
//! is a heartbeat younger than the asked ttl, a restarted worker's beat replaces the old
//! process's (the runs it drives and passed over with it), and only the registered instance
//! deregisters. Each check uses worker ids of
//! its own, so checks can share a store.

use std::time::Duration;

use toren_protocol::RunId;

use super::fixtures::ok;
use crate::{Clock, PassedOver, TestClock, WorkerBeat, WorkerInfo, WorkerRegistry};

/// The liveness ttl of the checks.
const LIVE: Duration = Duration::from_secs(15);

fn beat(id: &str, instance: &str, clock: &TestClock) -> WorkerBeat {
    WorkerBeat {
        id: id.to_owned(),
        instance: instance.to_owned(),
        host: "worker-host-1".to_owned(),
        volume: Some("volume-a".to_owned()),
        concurrency: 4,
        started_at: clock.now(),
        runs: Vec::new(),
        passed_over: Vec::new(),
    }
}

/// Sends `beat`; the record must be it, stamped with the store's now.
async fn stamped(
    registry: &dyn WorkerRegistry,
    beat: &WorkerBeat,
    clock: &TestClock,
) -> WorkerInfo {
    let before = clock.now();
    let info = ok(registry.heartbeat_worker(beat).await, "heartbeat_worker");
    let after = clock.now();
    assert_eq!(&info.beat, beat, "a heartbeat is stored as sent");
    assert!(
        before <= info.heartbeat_at && info.heartbeat_at <= after,
        "a heartbeat is stamped with the store's now: {} not within {before}..{after}",
        info.heartbeat_at
    );
    info
}

/// The live workers among `ids`.
async fn live(registry: &dyn WorkerRegistry, ids: &[&str]) -> Vec<WorkerInfo> {
    ok(registry.live_workers(LIVE).await, "live_workers")
        .into_iter()
        .filter(|w| ids.contains(&w.beat.id.as_str()))
        .collect()
}

pub async fn workers_register_heartbeat_and_expire(
    registry: &dyn WorkerRegistry,
    clock: &TestClock,
) {
    let suffix = RunId::new();
    let (one, two) = (format!("w1-{suffix}"), format!("w2-{suffix}"));
    let ids = [one.as_str(), two.as_str()];
    let first = beat(&one, "proc-a", clock);
    let info = stamped(registry, &first, clock).await;
    let second = WorkerBeat {
        volume: None,
        ..beat(&two, "proc-b", clock)
    };
    let info_two = stamped(registry, &second, clock).await;
    assert_eq!(
        live(registry, &ids).await,
        vec![info.clone(), info_two],
        "live workers as their heartbeats said, ordered by id"
    );

    clock.advance(LIVE / 2);
    let busy = WorkerBeat {
        runs: vec![RunId::new(), RunId::new()],
        passed_over: vec![PassedOver {
            run: RunId::new(),
            reason: "run x cannot be driven here: ANTHROPIC_API_KEY is not set".to_owned(),
        }],
        ..first.clone()
    };
    let renewed = stamped(registry, &busy, clock).await;
    clock.advance(LIVE / 2 + Duration::from_secs(1));
    assert_eq!(
        live(registry, &ids).await,
        vec![renewed.clone()],
        "a worker whose last heartbeat is older than the ttl is not live; the runs it \
         drives and passed over are as its last heartbeat said"
    );

    let restarted = beat(&one, "proc-c", clock);
    let replaced = stamped(registry, &restarted, clock).await;
    assert_eq!(live(registry, &ids).await, vec![replaced]);
    ok(
        registry.deregister_worker(&one, "proc-a").await,
        "deregister the old process",
    );
    assert_eq!(
        live(registry, &ids).await.len(),
        1,
        "a replaced process does not remove its successor"
    );
    ok(
        registry.deregister_worker(&one, "proc-c").await,
        "deregister",
    );
    assert_eq!(live(registry, &ids).await, Vec::new(), "deregistered");
    ok(
        registry.deregister_worker(&one, "proc-c").await,
        "deregistering twice succeeds",
    );
}
