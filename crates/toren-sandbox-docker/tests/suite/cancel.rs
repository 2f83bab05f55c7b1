//! A command whose caller stops waiting — the exec future is dropped, as when the worker
//! stops a run whose lease it cannot renew — is killed in its container at once, not left
//! running until its timeout; the container stays for the next command.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;

use super::support::{Env, policy, run, run_for};

#[tokio::test(flavor = "multi_thread")]
async fn dropping_a_running_command_kills_it() {
    let env = Env::new().await;
    let (_, sandbox) = env.open(&policy()).await;
    run(&*sandbox, "true").await;
    let containers = env.containers().await;
    let started = sandbox.workspace().path().join("started");

    let command = run_for(
        &*sandbox,
        "touch started; sleep 9317 & sleep 9318",
        Duration::from_secs(600),
    );
    let wait_for_start = async {
        while !started.exists() {
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
    };
    tokio::select! {
        out = command => panic!("the command ended: {out:?}"),
        () = wait_for_start => {}
    }
    // The exec future is dropped here, the command still running.

    let deadline = Instant::now() + Duration::from_secs(10);
    loop {
        let left = run(&*sandbox, "ps -o args | grep -c '[s]leep 931' || true").await;
        if left.output.trim() == "0" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "the dropped command still runs: {} sleeps",
            left.output.trim()
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(env.containers().await, containers, "the same container");
    assert_eq!(run(&*sandbox, "echo next").await.output, "next\n");
}
