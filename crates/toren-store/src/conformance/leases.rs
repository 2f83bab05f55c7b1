//! Conformance checks for leases and fencing, one caller at a time: acquire, renew and
//! release; live leases keep others out; expired ones can be taken over, after which the old
//! holder writes nothing; tokens only grow; ended runs take no lease; approvals need none.
//! Each check gets the [`TestClock`] its store reads and jumps past expiries with it.
//! Racing holders are in `concurrency.rs`.

use toren_protocol::RunStatus;

use super::fixtures::{
    HOLDER, PAST_TTL, TTL, approval_requested, decision, new_run, ok, run_completed, tool_started,
};
use crate::{Clock, Error, EventLog, Lease, TestClock};

/// Another process's holder name.
const OTHER: &str = "other-host:2002";

pub async fn leases_are_renewed_and_released(store: &dyn EventLog, clock: &TestClock) {
    let (run_id, _, lease) = new_run(store, "hold me").await;
    let summary = ok(store.run(&run_id).await, "run");
    assert_eq!(
        summary.lease,
        Some(lease.info()),
        "the summary shows the lease"
    );
    assert!(
        !summary.is_resumable(clock.now()),
        "a run with a live lease is not resumable"
    );

    clock.advance(TTL / 2);
    let renewed = ok(store.renew_lease(&lease, TTL).await, "renew");
    assert_eq!(
        (&renewed.run_id, renewed.token, renewed.holder.as_str()),
        (&run_id, lease.token, HOLDER),
        "renewing keeps the run, token and holder"
    );
    assert!(
        renewed.expires_at > lease.expires_at,
        "renewing moves the expiry on: {} → {}",
        lease.expires_at,
        renewed.expires_at
    );
    assert_eq!(
        ok(store.run(&run_id).await, "run").lease,
        Some(renewed.info())
    );
    // Fencing is by token: the lease value from before the renewal still appends.
    ok(
        store.append(&lease, 1, vec![tool_started("a")]).await,
        "append",
    );

    ok(store.release_lease(&renewed).await, "release");
    let released = ok(store.run(&run_id).await, "run");
    assert_eq!(released.lease, None, "a released run has no lease");
    assert!(
        released.is_resumable(clock.now()),
        "a released run is resumable at once"
    );
    ok(store.release_lease(&renewed).await, "release again");

    let late = store.append(&renewed, 2, vec![tool_started("late")]).await;
    assert!(
        matches!(
            &late,
            Err(Error::LeaseLost {
                token: 1,
                now_held_by: None,
                ..
            })
        ),
        "appending with a released lease must fail with LeaseLost, got {late:?}"
    );
    let renew = store.renew_lease(&renewed, TTL).await;
    assert!(
        matches!(&renew, Err(Error::LeaseLost { .. })),
        "renewing a released lease must fail with LeaseLost, got {renew:?}"
    );
    assert_eq!(
        ok(store.run(&run_id).await, "run"),
        released,
        "refused calls write nothing"
    );

    let next = ok(store.acquire_lease(&run_id, OTHER, TTL).await, "acquire");
    assert_eq!(next.holder, OTHER, "a released run can be acquired at once");
    assert!(next.token > lease.token, "with a higher token");
    assert_eq!(ok(store.run(&run_id).await, "run").lease, Some(next.info()));
}

pub async fn a_live_lease_keeps_other_holders_out(store: &dyn EventLog, clock: &TestClock) {
    let (run_id, _, lease) = new_run(store, "mine").await;
    clock.advance(TTL / 2);
    let summary = ok(store.run(&run_id).await, "run");
    let refused = store.acquire_lease(&run_id, OTHER, TTL).await;
    let Err(Error::Leased {
        run_id: refused_run,
        holder,
        expires_at,
        expires_in,
    }) = &refused
    else {
        panic!("acquiring a run with a live lease must fail with Leased, got {refused:?}");
    };
    assert_eq!(
        (refused_run, holder.as_str(), *expires_at),
        (&run_id, HOLDER, lease.expires_at),
        "Leased names the run, the holder and the expiry"
    );
    assert!(
        !expires_in.is_zero() && *expires_in <= TTL / 2,
        "Leased says how long the lease has left: {expires_in:?}"
    );
    assert_eq!(
        ok(store.run(&run_id).await, "run"),
        summary,
        "a refused acquire writes nothing"
    );
    ok(
        store.append(&lease, 1, vec![tool_started("a")]).await,
        "the holder still appends",
    );

    // A holder that acquires its own live lease again gets a new token; the old one is
    // fenced off.
    let again = ok(
        store.acquire_lease(&run_id, HOLDER, TTL).await,
        "re-acquire",
    );
    assert!(again.token > lease.token, "re-acquiring gives a new token");
    let stale = store.append(&lease, 2, vec![tool_started("b")]).await;
    assert!(
        matches!(&stale, Err(Error::LeaseLost { now_held_by: Some(h), .. }) if h == HOLDER),
        "the superseded lease must fail with LeaseLost, got {stale:?}"
    );
    ok(
        store.append(&again, 2, vec![tool_started("b")]).await,
        "the new lease appends",
    );
}

pub async fn an_expired_lease_can_be_taken_over(store: &dyn EventLog, clock: &TestClock) {
    let (run_id, _, lease) = new_run(store, "left behind").await;
    clock.advance(PAST_TTL);
    assert!(
        ok(store.run(&run_id).await, "run").is_resumable(clock.now()),
        "a run whose lease expired is resumable"
    );
    // Expired but not taken over: the token is still current, so the holder may renew.
    let renewed = ok(store.renew_lease(&lease, TTL).await, "renew after expiry");
    assert!(!ok(store.run(&run_id).await, "run").is_resumable(clock.now()));
    clock.advance(PAST_TTL);
    // ... and append.
    ok(
        store.append(&renewed, 1, vec![tool_started("a")]).await,
        "append after expiry, before a takeover",
    );

    let taken = ok(store.acquire_lease(&run_id, OTHER, TTL).await, "take over");
    assert_eq!(taken.holder, OTHER);
    assert!(taken.token > lease.token, "a takeover gets a higher token");
    let log = ok(store.read(&run_id, 0).await, "read");
    let summary = ok(store.run(&run_id).await, "run");

    let late = store.append(&renewed, 2, vec![tool_started("late")]).await;
    assert!(
        matches!(&late, Err(Error::LeaseLost { run_id: id, token, now_held_by: Some(h) })
            if *id == run_id && *token == lease.token && h == OTHER),
        "an append by the old holder must fail with LeaseLost naming the new holder, \
         got {late:?}"
    );
    let renew = store.renew_lease(&renewed, TTL).await;
    assert!(
        matches!(&renew, Err(Error::LeaseLost { .. })),
        "renewing a lease that was taken over must fail with LeaseLost, got {renew:?}"
    );
    ok(
        store.release_lease(&renewed).await,
        "releasing a lost lease succeeds",
    );
    assert_eq!(
        ok(store.read(&run_id, 0).await, "read"),
        log,
        "the old holder wrote nothing"
    );
    assert_eq!(
        ok(store.run(&run_id).await, "run"),
        summary,
        "and left the new holder's lease alone"
    );
    ok(
        store.append(&taken, 2, vec![tool_started("b")]).await,
        "the new holder appends",
    );
}

pub async fn tokens_strictly_increase(store: &dyn EventLog, clock: &TestClock) {
    let (run_id, _, first) = new_run(store, "many hands").await;
    assert_eq!(first.token, 1, "create_run gives token 1");
    let mut tokens = vec![first.token];
    let mut current = first;
    for step in 0..6 {
        current = match step % 3 {
            0 => {
                ok(store.release_lease(&current).await, "release");
                ok(store.acquire_lease(&run_id, OTHER, TTL).await, "acquire")
            }
            1 => ok(
                store.acquire_lease(&run_id, &current.holder, TTL).await,
                "re-acquire",
            ),
            _ => {
                clock.advance(PAST_TTL);
                ok(store.acquire_lease(&run_id, HOLDER, TTL).await, "take over")
            }
        };
        let renewed = ok(store.renew_lease(&current, TTL).await, "renew");
        assert_eq!(renewed.token, current.token, "renewing keeps the token");
        tokens.push(current.token);
    }
    assert!(
        tokens.windows(2).all(|pair| pair[0] < pair[1]),
        "every acquisition must get a higher token: {tokens:?}"
    );
}

pub async fn ended_runs_cannot_be_leased(store: &dyn EventLog, clock: &TestClock) {
    let (run_id, _, lease) = new_run(store, "done").await;
    ok(
        store.append(&lease, 1, vec![run_completed()]).await,
        "complete",
    );
    let summary = ok(store.run(&run_id).await, "run");
    assert_eq!(summary.lease, None, "ending the run releases its lease");
    assert!(
        !summary.is_resumable(clock.now()),
        "an ended run is not resumable"
    );
    clock.advance(PAST_TTL);
    let ended = |r: &Result<Lease, Error>| {
        matches!(
            r,
            Err(Error::RunEnded {
                status: RunStatus::Completed,
                ..
            })
        )
    };
    for holder in [HOLDER, OTHER] {
        let acquired = store.acquire_lease(&run_id, holder, TTL).await;
        assert!(
            ended(&acquired),
            "acquiring an ended run must fail with RunEnded, got {acquired:?}"
        );
    }
    let renewed = store.renew_lease(&lease, TTL).await;
    assert!(
        ended(&renewed),
        "renewing the lease of an ended run must fail with RunEnded, got {renewed:?}"
    );
    ok(
        store.release_lease(&lease).await,
        "releasing the lease of an ended run succeeds",
    );
    assert_eq!(
        ok(store.run(&run_id).await, "run"),
        summary,
        "nothing written"
    );
}

pub async fn approvals_need_no_lease(store: &dyn EventLog, clock: &TestClock) {
    // Nobody holds the run (its driver stopped): a decision still goes in.
    let (run_id, _, lease) = new_run(store, "orphaned approval").await;
    ok(
        store
            .append(&lease, 1, vec![approval_requested("toolu_o")])
            .await,
        "request",
    );
    ok(store.release_lease(&lease).await, "release");
    clock.advance(PAST_TTL);
    ok(
        store
            .decide_approval(&run_id, decision("toolu_o", true, "ana"))
            .await,
        "decide without a lease",
    );
    assert_eq!(
        ok(store.run(&run_id).await, "run").lease,
        None,
        "deciding takes no lease"
    );

    // The driver is alive and waiting: another process decides; the driver sees the news as
    // a Conflict and its lease is untouched.
    let (run_id, _, lease) = new_run(store, "answered from elsewhere").await;
    ok(
        store
            .append(&lease, 1, vec![approval_requested("toolu_w")])
            .await,
        "request",
    );
    let decided = ok(
        store
            .decide_approval(&run_id, decision("toolu_w", false, "bo"))
            .await,
        "decide while leased",
    );
    let stale = store.append(&lease, 2, vec![tool_started("toolu_w")]).await;
    assert!(
        matches!(
            &stale,
            Err(Error::Conflict {
                expected: 2,
                actual: 3,
                ..
            })
        ),
        "the driver must see the decision as a Conflict, got {stale:?}"
    );
    let summary = ok(store.run(&run_id).await, "run");
    assert_eq!(
        summary.lease,
        Some(lease.info()),
        "a decision leaves the lease alone"
    );
    let log = ok(store.read(&run_id, 0).await, "read");
    assert_eq!(log.last(), Some(&decided), "the decision is in the log");
}

/// A live lease whose holder is known to be gone can be taken over at once, but only from
/// that holder: naming anyone else is refused like a plain acquisition.
pub async fn a_dead_holders_lease_can_be_taken_over(store: &dyn EventLog, clock: &TestClock) {
    let (run_id, _, lease) = new_run(store, "holder died").await;
    let wrong = store
        .take_over_lease(&run_id, OTHER, "rescuer:1", TTL)
        .await;
    assert!(
        matches!(&wrong, Err(Error::Leased { holder, .. }) if holder == HOLDER),
        "taking over from a holder that does not hold the run must fail with Leased, got {wrong:?}"
    );
    let taken = ok(
        store
            .take_over_lease(&run_id, HOLDER, "rescuer:1", TTL)
            .await,
        "take over from the dead holder",
    );
    assert!(taken.token > lease.token && taken.holder == "rescuer:1");
    assert!(!ok(store.run(&run_id).await, "run").is_resumable(clock.now()));
    let late = store.append(&lease, 1, vec![tool_started("late")]).await;
    assert!(
        matches!(&late, Err(Error::LeaseLost { .. })),
        "the dead holder's lease is fenced off, got {late:?}"
    );
    // A second rescuer naming the first dead holder again gets nothing: the lease moved on.
    let again = store
        .take_over_lease(&run_id, HOLDER, "rescuer:2", TTL)
        .await;
    assert!(
        matches!(&again, Err(Error::Leased { holder, .. }) if holder == "rescuer:1"),
        "got {again:?}"
    );
    ok(
        store.append(&taken, 1, vec![tool_started("a")]).await,
        "the rescuer appends",
    );
}

/// A run created queued is leased to nobody: it is claimable at once, and its first
/// acquisition gets a token that fences as any lease does.
pub async fn a_queued_run_is_claimable_at_once(store: &dyn EventLog, clock: &TestClock) {
    let run_id = toren_protocol::RunId::new();
    let created = ok(
        store
            .create_queued(&run_id, super::fixtures::run_created("queued"))
            .await,
        "create queued",
    );
    assert_eq!((created.seq, created.kind.name()), (1, "run_created"));
    let summary = ok(store.run(&run_id).await, "summary");
    assert_eq!(summary.status, RunStatus::Queued);
    assert_eq!(summary.lease, None, "a queued run is leased to nobody");
    assert!(summary.is_resumable(clock.now()));
    let claimable = ok(
        store.claimable_runs(&crate::ClaimQuery::free(1000)).await,
        "claimable",
    );
    assert!(
        claimable.iter().any(|r| r.id == run_id),
        "a queued run is claimable at once"
    );
    let again = store
        .create_queued(&run_id, super::fixtures::run_created("again"))
        .await;
    assert!(
        matches!(again, Err(Error::RunExists(ref id)) if *id == run_id),
        "{again:?}"
    );
    let lease = ok(store.acquire_lease(&run_id, HOLDER, TTL).await, "acquire");

    ok(
        store.append(&lease, 1, vec![tool_started("call_1")]).await,
        "append under the first lease",
    );
    let taken = ok(store.acquire_lease(&run_id, HOLDER, TTL).await, "again");
    assert!(taken.token > lease.token);
    let stale = store.append(&lease, 2, vec![tool_started("call_2")]).await;
    assert!(matches!(stale, Err(Error::LeaseLost { .. })), "{stale:?}");
    // Ended, so that the checks after this one see no stray claimable run.
    ok(
        store.append(&taken, 2, vec![run_completed()]).await,
        "end it",
    );
}
