//! What a command can reach: the network only when granted, exactly the granted
//! variables (whose values appear nowhere in the container's configuration), a read-only
//! root with a writable `/tmp`, no capabilities, and the memory and process limits, which
//! a command that runs into them is told about.

use std::collections::BTreeSet;

use bollard::query_parameters::InspectContainerOptions;
use pretty_assertions::assert_eq;
use toren_protocol::ResourceLimits;
use toren_sandbox::LimitHit;
use toren_sandbox_docker::HELPER_PIDS;

use super::support::{Env, docker, policy, run};

/// The network interfaces a command sees.
async fn interfaces(network: bool) -> Vec<String> {
    let env = Env::new().await;
    let (_, sandbox) = env
        .open(&toren_protocol::ResolvedPolicy {
            checkpoints: Default::default(),
            network,
            egress: None,
            ..policy()
        })
        .await;
    let out = run(&*sandbox, "tail -n +3 /proc/net/dev | cut -d: -f1").await;
    out.output.split_whitespace().map(str::to_owned).collect()
}

#[tokio::test(flavor = "multi_thread")]
async fn no_network_unless_granted() {
    assert_eq!(interfaces(false).await, vec!["lo"]);
    let granted = interfaces(true).await;
    assert!(granted.iter().any(|i| i != "lo"), "{granted:?}");
}

#[tokio::test(flavor = "multi_thread")]
async fn the_environment_is_exactly_the_granted_names_and_values_stay_out_of_the_config() {
    let env = Env::new().await;
    let secret = "s3cret-9f1c-value";
    let policy = toren_protocol::ResolvedPolicy {
        checkpoints: Default::default(),
        env: vec!["GRANTED".to_owned()],
        ..policy()
    };
    let (_, sandbox) = env
        .open_with_env(&policy, vec![("GRANTED".to_owned(), secret.to_owned())])
        .await;
    let out = run(&*sandbox, "env | cut -d= -f1; echo \"$GRANTED\"").await;
    let mut lines: Vec<&str> = out.output.lines().collect();
    assert_eq!(lines.pop(), Some(secret));
    let names: BTreeSet<&str> = lines.into_iter().collect();
    // PWD and SHLVL are the shell's own.
    assert_eq!(
        names,
        BTreeSet::from(["GRANTED", "HOME", "LANG", "PATH", "PWD", "SHLVL"])
    );

    let info = docker()
        .await
        .inspect_container(&sandbox.instance_id(), None::<InspectContainerOptions>)
        .await
        .unwrap();
    let config_env = info.config.as_ref().unwrap().env.clone().unwrap();
    let config_names: BTreeSet<String> = config_env
        .iter()
        .map(|kv| kv.split('=').next().unwrap().to_owned())
        .collect();
    assert_eq!(
        config_names,
        BTreeSet::from(["HOME".to_owned(), "LANG".to_owned(), "PATH".to_owned()])
    );
    let whole = serde_json::to_string(&info).unwrap();
    assert!(
        !whole.contains(secret),
        "the value reached the container's configuration"
    );
    assert!(!format!("{sandbox:?}").contains(secret));
}

#[tokio::test(flavor = "multi_thread")]
async fn the_root_is_read_only_tmp_is_writable_and_no_capability_is_left() {
    let env = Env::new().await;
    let (_, sandbox) = env.open(&policy()).await;
    let out = run(
        &*sandbox,
        "echo x > /fill; echo x > /tmp/f && echo tmp-ok; grep CapEff /proc/self/status",
    )
    .await;
    assert!(
        out.output.contains("Read-only file system"),
        "{}",
        out.output
    );
    assert!(out.output.contains("tmp-ok\n"), "{}", out.output);
    assert!(
        out.output.contains("CapEff:\t0000000000000000"),
        "{}",
        out.output
    );
}

#[tokio::test(flavor = "multi_thread")]
async fn limits_are_set_and_running_into_them_is_reported() {
    let env = Env::new().await;
    let limits = ResourceLimits {
        memory: 64 * 1024 * 1024,
        pids: 20,
        cpu_secs: 5,
    };
    let (_, sandbox) = env
        .open(&toren_protocol::ResolvedPolicy { limits, ..policy() })
        .await;
    run(&*sandbox, "true").await;
    let info = docker()
        .await
        .inspect_container(&sandbox.instance_id(), None::<InspectContainerOptions>)
        .await
        .unwrap();
    let host = info.host_config.unwrap();
    assert_eq!(host.memory, Some(64 * 1024 * 1024));
    assert_eq!(host.pids_limit, Some(i64::from(20 + HELPER_PIDS)));

    let forks = run(
        &*sandbox,
        "for i in $(seq 60); do sleep 5 & done; echo done",
    )
    .await;
    assert_eq!(
        forks.limits_hit,
        vec![LimitHit::Pids { limit: 20 }],
        "{}",
        forks.output
    );

    let hog = run(
        &*sandbox,
        "x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo survived",
    )
    .await;
    assert!(!hog.output.contains("survived"), "{}", hog.output);
    assert_eq!(
        hog.limits_hit,
        vec![LimitHit::Memory {
            limit: 64 * 1024 * 1024
        }]
    );

    let alive = run(&*sandbox, "echo alive").await;
    assert_eq!(alive.output, "alive\n");
}
