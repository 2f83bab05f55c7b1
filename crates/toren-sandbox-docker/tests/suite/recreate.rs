//! The container is disposable; the workspace is the state. Removed between commands,
//! removed in the middle of one, or stopped: the next command runs in a fresh container
//! over the same files. A second process of the same run attaches to the running container
//! instead of making another.

use std::time::{Duration, Instant};

use bollard::query_parameters::{KillContainerOptions, RemoveContainerOptionsBuilder};
use pretty_assertions::assert_eq;

use super::support::{Env, docker, policy, run};

async fn remove_force(id: &str) {
    let options = RemoveContainerOptionsBuilder::new().force(true).build();
    docker()
        .await
        .remove_container(id, Some(options))
        .await
        .unwrap();
}

#[tokio::test(flavor = "multi_thread")]
async fn a_removed_container_is_recreated_around_the_same_workspace() {
    let env = Env::new().await;
    let (_, sandbox) = env.open(&policy()).await;
    run(&*sandbox, "echo kept > note.txt").await;
    let first = sandbox.instance_id();

    remove_force(&first).await;
    let out = run(&*sandbox, "cat note.txt").await;
    assert_eq!((out.exit_code, out.output.as_str()), (Some(0), "kept\n"));
    let second = sandbox.instance_id();
    assert_ne!(first, second);
    assert_eq!(env.containers().await, vec![second]);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_container_removed_mid_command_cuts_it_short_and_the_next_command_runs() {
    let env = Env::new().await;
    let (_, sandbox) = env.open(&policy()).await;
    run(&*sandbox, "echo kept > note.txt").await;
    let first = sandbox.instance_id();

    let running = {
        let sandbox = sandbox.clone();
        tokio::spawn(async move { run(&*sandbox, "echo begun; sleep 60").await })
    };
    tokio::time::sleep(Duration::from_millis(500)).await;
    let removed = Instant::now();
    remove_force(&first).await;
    let out = running.await.unwrap();
    assert!(
        removed.elapsed() < Duration::from_secs(5),
        "{:?}",
        removed.elapsed()
    );
    assert_eq!(out.exit_code, None);
    assert!(
        out.output.contains("sandbox container stopped"),
        "{}",
        out.output
    );

    let out = run(&*sandbox, "cat note.txt").await;
    assert_eq!(out.output, "kept\n");
    assert_ne!(sandbox.instance_id(), first);
}

#[tokio::test(flavor = "multi_thread")]
async fn a_stopped_container_is_replaced() {
    let env = Env::new().await;
    let (_, sandbox) = env.open(&policy()).await;
    run(&*sandbox, "echo kept > note.txt").await;
    let first = sandbox.instance_id();
    docker()
        .await
        .kill_container(&first, None::<KillContainerOptions>)
        .await
        .unwrap();

    let out = run(&*sandbox, "cat note.txt").await;
    assert_eq!(out.output, "kept\n");
    // The stopped one was removed, not left beside the new one.
    assert_eq!(env.containers().await, vec![sandbox.instance_id()]);
    assert_ne!(sandbox.instance_id(), first);
}

#[tokio::test(flavor = "multi_thread")]
async fn another_process_of_the_run_attaches_to_the_running_container() {
    let env = Env::new().await;
    let (run_id, sandbox) = env.open(&policy()).await;
    run(&*sandbox, "echo kept > note.txt").await;

    // As after a restart: a new backend opens the same run.
    let resumed = env
        .backend
        .open(&run_id, &policy(), Vec::new())
        .await
        .unwrap();
    let out = run(&*resumed, "cat note.txt").await;
    assert_eq!(out.output, "kept\n");
    assert_eq!(resumed.instance_id(), sandbox.instance_id());
    assert_eq!(env.containers().await.len(), 1);
    // The first one still works too; each gets its own answers.
    assert_eq!(run(&*sandbox, "echo first").await.output, "first\n");
    assert_eq!(run(&*resumed, "echo second").await.output, "second\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn remove_run_removes_the_container_and_keeps_the_workspace() {
    let env = Env::new().await;
    let (run_id, sandbox) = env.open(&policy()).await;
    run(&*sandbox, "echo kept > note.txt").await;
    assert!(env.backend.remove_run(&run_id).await.unwrap());
    assert_eq!(env.containers().await, Vec::<String>::new());
    assert!(!env.backend.remove_run(&run_id).await.unwrap());
    let note = std::fs::read_to_string(sandbox.workspace().path().join("note.txt")).unwrap();
    assert_eq!(note, "kept\n");
}
