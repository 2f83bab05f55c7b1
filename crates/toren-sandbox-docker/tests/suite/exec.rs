//! Commands through the helper: the container appears at the first command, not before;
//! exact exit codes; interleaved output; timeouts kill everything the command started;
//! daemons die with their command; bash where the image has it, `/bin/sh` where not.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;

use super::support::{Env, bookworm, policy, run, run_for, with_image};

#[tokio::test(flavor = "multi_thread")]
async fn the_container_is_created_at_the_first_command() {
    let env = Env::new().await;
    let (run_id, sandbox) = env.open(&policy()).await;
    assert_eq!(env.containers().await, Vec::<String>::new());
    let name = sandbox.instance_id();
    assert_eq!(name, format!("toren-{}-{}", env.instance, run_id.as_str()));

    let out = run(&*sandbox, "echo hello").await;
    assert_eq!((out.exit_code, out.output.as_str()), (Some(0), "hello\n"));
    let containers = env.containers().await;
    assert_eq!(containers.len(), 1);
    assert_eq!(sandbox.instance_id(), containers[0]);

    // Later commands reuse it.
    run(&*sandbox, "true").await;
    assert_eq!(env.containers().await, containers);
}

#[tokio::test(flavor = "multi_thread")]
async fn exit_codes_and_output_are_exact() {
    let env = Env::new().await;
    let (_, sandbox) = env.open(&policy()).await;
    for (command, code) in [("true", 0), ("false", 1), ("exit 7", 7), ("exit 255", 255)] {
        assert_eq!(
            run(&*sandbox, command).await.exit_code,
            Some(code),
            "{command}"
        );
    }
    let out = run(&*sandbox, "echo out; echo err >&2; echo again").await;
    assert_eq!(out.output, "out\nerr\nagain\n");
    let killed = run(&*sandbox, "kill -9 $$").await;
    assert_eq!((killed.exit_code, killed.timed_out), (None, false));
}

#[tokio::test(flavor = "multi_thread")]
async fn a_timeout_kills_the_command_and_what_it_started() {
    let env = Env::new().await;
    let (_, sandbox) = env.open(&policy()).await;
    let started = Instant::now();
    let out = run_for(
        &*sandbox,
        "sleep 913 & echo begun; sleep 914",
        Duration::from_secs(1),
    )
    .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "{:?}",
        started.elapsed()
    );
    assert_eq!(
        (out.exit_code, out.timed_out, out.output.as_str()),
        (None, true, "begun\n")
    );
    let left = run(&*sandbox, "ps -o args | grep -c '[s]leep 91' || true").await;
    assert_eq!(left.output.trim(), "0", "sleeps survived the timeout");
}

#[tokio::test(flavor = "multi_thread")]
async fn daemons_die_with_their_command() {
    let env = Env::new().await;
    let (_, sandbox) = env.open(&policy()).await;
    let out = run(
        &*sandbox,
        "sleep 921 & nohup sleep 922 >/dev/null 2>&1 & setsid sleep 923 & \
         (setsid sleep 924 >/dev/null 2>&1 &); echo started",
    )
    .await;
    assert_eq!(out.output, "started\n");
    let left = run(&*sandbox, "ps -o args | grep -c '[s]leep 92' || true").await;
    assert_eq!(left.output.trim(), "0", "daemons outlived their command");
}

#[tokio::test(flavor = "multi_thread")]
async fn images_without_bash_use_sh_and_the_default_image_uses_bash() {
    let env = Env::new().await;
    let (_, sh_only) = env.open(&policy()).await;
    let out = run(
        &*sh_only,
        "test -e /bin/bash || echo no bash; echo \"[${BASH_VERSION-}]\"",
    )
    .await;
    assert_eq!(out.output, "no bash\n[]\n");

    let (_, debian) = env.open(&with_image(bookworm())).await;
    let out = run(
        &*debian,
        "echo \"$0 ${BASH_VERSION%%.*}\"; node -e 'console.log(1+1)'; python3 -c 'print(3)'; git --version | cut -d' ' -f1",
    )
    .await;
    assert_eq!(out.output, "/bin/bash 5\n2\n3\ngit\n");
}

#[tokio::test(flavor = "multi_thread")]
async fn output_is_capped() {
    let env = Env::new().await;
    let (_, sandbox) = env.open(&policy()).await;
    let out = run(
        &*sandbox,
        "head -c 5000000 /dev/zero | tr '\\0' x; echo; echo end",
    )
    .await;
    assert!(out.truncated);
    assert!(out.output.len() < 31_000, "{}", out.output.len());
    assert!(out.output.ends_with("x\nend\n"));
}
