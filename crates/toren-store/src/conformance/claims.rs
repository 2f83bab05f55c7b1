//! Conformance checks for [`EventLog::claim`]: the oldest claimable run first, leased to
//! the claimer with a fresh token; expired leases claimable again, live ones, ended runs
//! and runs awaiting approval never; the volume, backend, channel, agent, per-agent limit
//! and skip filters; racing claimers never share a run. Each check claims only runs of
//! agents of its own (`agents` filter), so checks can share a store.

use std::collections::HashSet;
use std::sync::Arc;

use toren_protocol::{ChannelBinding, RunCreated, RunId, RunStatus};

use super::fixtures::{
    HOLDER, PAST_TTL, TTL, approval_requested, model_wants_bash, ok, run_completed, run_created,
};
use crate::{ClaimRequest, EventLog, Lease, TestClock};

/// The worker that claims in these checks.
const CLAIMER: &str = "claiming-worker/1";

/// An agent name no other check uses.
fn agent(check: &str) -> String {
    format!("claims-{check}-{}", RunId::new())
}

/// A queued run of `agent`, its `run_created` changed by `edit`.
async fn queued(store: &dyn EventLog, agent: &str, edit: impl FnOnce(&mut RunCreated)) -> RunId {
    let mut created = run_created("claim me");
    created.agent.name = agent.to_owned();
    edit(&mut created);
    let run_id = RunId::new();
    ok(store.create_queued(&run_id, created).await, "create_queued");
    run_id
}

fn pin_volume(volume: &str) -> impl FnOnce(&mut RunCreated) {
    let volume = volume.to_owned();
    move |created| {
        if let Some(policy) = created.policy.as_mut() {
            policy.volume = Some(volume);
        }
    }
}

/// A request of [`CLAIMER`] for runs of `agents` on the `local` backend, no volume.
fn request(agents: &[&str]) -> ClaimRequest {
    ClaimRequest {
        backends: vec!["local".to_owned()],
        agents: agents.iter().map(|a| (*a).to_owned()).collect(),
        ..ClaimRequest::new(CLAIMER, TTL)
    }
}

/// The claim `request` must get.
#[track_caller]
fn must<T>(got: Option<T>, what: &str) -> T {
    match got {
        Some(value) => value,
        None => panic!("claim: expected {what}, got no run"),
    }
}

/// The id a claim got, or `None`; the lease must be the claimer's, fresh, and shown in the
/// summary.
async fn claimed(store: &dyn EventLog, request: &ClaimRequest) -> Option<(RunId, Lease)> {
    let (summary, lease) = ok(store.claim(request).await, "claim")?;
    assert_eq!(
        summary.id, lease.run_id,
        "the summary is of the claimed run"
    );
    assert_eq!(lease.holder, request.holder, "the claimer holds the lease");
    assert_eq!(
        summary.lease,
        Some(lease.info()),
        "the summary shows the new lease"
    );
    assert_eq!(
        ok(store.run(&lease.run_id).await, "run").lease,
        Some(lease.info()),
        "the lease is stored"
    );
    Some((summary.id, lease))
}

pub async fn claims_take_the_oldest_run_and_expired_leases(
    store: &dyn EventLog,
    clock: &TestClock,
) {
    let a = agent("oldest");
    let first = queued(store, &a, |_| {}).await;
    clock.advance(std::time::Duration::from_millis(1));
    let second = queued(store, &a, |_| {}).await;
    let req = request(&[&a]);

    let (id, lease) = must(claimed(store, &req).await, "a queued run is claimed");
    assert_eq!(id, first, "the oldest run first");
    ok(
        store
            .append(&lease, 1, vec![model_wants_bash("c1", "ls")])
            .await,
        "the claimed lease appends",
    );
    let (id, _) = must(claimed(store, &req).await, "the next run");
    assert_eq!(id, second, "then the next oldest");
    assert!(
        claimed(store, &req).await.is_none(),
        "runs with live leases are not claimed"
    );

    clock.advance(PAST_TTL);
    let (id, again) = must(claimed(store, &req).await, "an expired lease");
    assert_eq!(
        id, first,
        "a run whose lease expired is claimable, oldest first"
    );
    assert!(
        again.token > lease.token,
        "a claim gets a higher token than the run had: {} after {}",
        again.token,
        lease.token
    );
    assert!(
        matches!(
            store.append(&lease, 2, vec![run_completed()]).await,
            Err(crate::Error::LeaseLost { .. })
        ),
        "the claim fenced off the expired lease"
    );
}

pub async fn claims_pass_over_ended_runs_and_runs_awaiting_approval(
    store: &dyn EventLog,
    clock: &TestClock,
) {
    let a = agent("ended");
    let mut created = run_created("done");
    created.agent.name = a.clone();
    let ended = RunId::new();
    let (_, lease) = ok(
        store.create_run(&ended, created.clone(), HOLDER, TTL).await,
        "create",
    );
    ok(
        store.append(&lease, 1, vec![run_completed()]).await,
        "complete",
    );
    let waiting = RunId::new();
    let (_, lease) = ok(
        store.create_run(&waiting, created, HOLDER, TTL).await,
        "create",
    );
    ok(
        store
            .append(
                &lease,
                1,
                vec![model_wants_bash("c1", "ls -la"), approval_requested("c1")],
            )
            .await,
        "ask",
    );
    ok(store.release_lease(&lease).await, "park");
    assert_eq!(
        ok(store.run(&waiting).await, "run").status,
        RunStatus::AwaitingApproval
    );
    clock.advance(PAST_TTL);
    assert!(
        claimed(store, &request(&[&a])).await.is_none(),
        "neither an ended run nor one awaiting a person is claimed"
    );
}

pub async fn claims_follow_volumes_backends_and_channels(store: &dyn EventLog, clock: &TestClock) {
    let a = agent("volumes");
    let step = || clock.advance(std::time::Duration::from_millis(1));
    let elsewhere = queued(store, &a, pin_volume("volume-b")).await;
    step();
    let docker = queued(store, &a, |c| {
        if let Some(p) = c.policy.as_mut() {
            p.backend = "docker".to_owned();
        }
    })
    .await;
    step();
    let bound = queued(store, &a, |c| {
        c.channel = Some(ChannelBinding {
            kind: "terminal".to_owned(),
            address: "chat".to_owned(),
        });
    })
    .await;
    step();
    let here = queued(store, &a, pin_volume("volume-a")).await;
    step();
    let anywhere = queued(store, &a, |_| {}).await;
    step();
    let no_sandbox = queued(store, &a, |c| c.policy = None).await;

    let on_a = ClaimRequest {
        volumes: vec!["volume-a".to_owned()],
        ..request(&[&a])
    };
    let mut got = Vec::new();
    while let Some((id, _)) = claimed(store, &on_a).await {
        got.push(id);
    }
    assert_eq!(
        got,
        vec![here, anywhere, no_sandbox],
        "a worker serving volume-a on local claims its volume's runs and those without a \
         volume, oldest first; never another volume's, another backend's or a bound run"
    );
    let on_b = ClaimRequest {
        volumes: vec!["volume-b".to_owned()],
        ..request(&[&a])
    };
    assert_eq!(claimed(store, &on_b).await.map(|c| c.0), Some(elsewhere));
    let docker_worker = ClaimRequest {
        backends: vec!["docker".to_owned()],
        ..request(&[&a])
    };
    assert_eq!(
        claimed(store, &docker_worker).await.map(|c| c.0),
        Some(docker)
    );
    let chat = ClaimRequest {
        channels: vec!["terminal".to_owned()],
        ..request(&[&a])
    };
    assert_eq!(claimed(store, &chat).await.map(|c| c.0), Some(bound));
    assert!(claimed(store, &chat).await.is_none());
}

pub async fn claims_keep_the_per_agent_limit_and_skip(store: &dyn EventLog, clock: &TestClock) {
    let (a, b) = (agent("busy"), agent("other"));
    let step = || clock.advance(std::time::Duration::from_millis(1));
    let a1 = queued(store, &a, |_| {}).await;
    step();
    let a2 = queued(store, &a, |_| {}).await;
    step();
    let a3 = queued(store, &a, |_| {}).await;
    step();
    let b1 = queued(store, &b, |_| {}).await;
    let limited = ClaimRequest {
        per_agent_limit: Some(1),
        ..request(&[&a, &b])
    };
    let (id, lease_a1) = must(claimed(store, &limited).await, "a1");
    assert_eq!(id, a1);
    let (id, _) = must(claimed(store, &limited).await, "b1");
    assert_eq!(
        id, b1,
        "with one of its runs leased, agent a's older runs wait and b's goes first"
    );
    assert!(
        claimed(store, &limited).await.is_none(),
        "both agents are at their limit"
    );
    ok(store.release_lease(&lease_a1).await, "release");
    let skipping = ClaimRequest {
        skip: vec![a1.clone()],
        ..limited.clone()
    };
    let (id, _) = must(claimed(store, &skipping).await, "a2");
    assert_eq!(
        id, a2,
        "a skipped run is passed over; a released lease frees the slot"
    );
    let unlimited = request(&[&a]);
    let (id, _) = must(claimed(store, &unlimited).await, "a1 again");
    assert_eq!(id, a1);
    let (id, _) = must(claimed(store, &unlimited).await, "a3");
    assert_eq!(
        id, a3,
        "without a limit an agent's runs are claimed at once"
    );
}

/// Many tasks claim the same runs at once: each run goes to exactly one of them.
pub async fn racing_claimers_never_share_a_run(store: &Arc<dyn EventLog>) {
    const RUNS: usize = 24;
    const CLAIMERS: usize = 6;
    let a = agent("race");
    let mut made = HashSet::new();
    for _ in 0..RUNS {
        made.insert(queued(store.as_ref(), &a, |_| {}).await);
    }
    let mut tasks = tokio::task::JoinSet::new();
    for n in 0..CLAIMERS {
        let (store, a) = (Arc::clone(store), a.clone());
        tasks.spawn(async move {
            let req = ClaimRequest {
                holder: format!("racer/{n}"),
                ..request(&[&a])
            };
            let mut mine = Vec::new();
            while let Some((summary, lease)) = ok(store.claim(&req).await, "claim") {
                assert_eq!(lease.holder, req.holder);
                mine.push(summary.id);
                tokio::task::yield_now().await;
            }
            mine
        });
    }
    let mut claimed = Vec::new();
    while let Some(mine) = tasks.join_next().await {
        match mine {
            Ok(mine) => claimed.extend(mine),
            Err(e) => panic!("a claimer failed: {e}"),
        }
    }
    let unique: HashSet<RunId> = claimed.iter().cloned().collect();
    assert_eq!(
        unique.len(),
        claimed.len(),
        "no run was claimed twice: {claimed:?}"
    );
    assert_eq!(unique, made, "every run was claimed once");
}
