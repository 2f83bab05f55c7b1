//! The reaper's four rules, with real labelled containers made directly through the
//! daemon (ages faked through the `toren.created` label): a finished run's container is
//! removed; a day-old container of an unknown run is removed (a young one is kept); a live
//! run's container is never touched however old; no workspace directory is deleted. Also:
//! a dry run removes nothing, and another instance's containers are not ours to reap.

use std::collections::{BTreeSet, HashMap};
use std::path::Path;

use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig};
use bollard::query_parameters::{CreateContainerOptionsBuilder, StartContainerOptions};
use jiff::{SignedDuration, Timestamp};
use pretty_assertions::assert_eq;
use toren_sandbox_docker::{
    LABEL_CREATED, LABEL_INSTANCE, LABEL_RUN, LABEL_WORKSPACE, ORPHAN_AGE, ReapOutcome, ReapReason,
    RunLiveness,
};

use super::support::{Env, SH_IMAGE, containers_of, docker};

/// A running container labelled as `instance`'s sandbox for `run`, created `hours` ago,
/// with `workspace` bind-mounted.
async fn labelled(
    docker: &Docker,
    instance: &str,
    run: &str,
    hours: i64,
    workspace: &Path,
) -> String {
    let created = Timestamp::now() - SignedDuration::from_hours(hours);
    let body = ContainerCreateBody {
        image: Some(SH_IMAGE.to_owned()),
        cmd: Some(vec!["/bin/sh".into(), "-c".into(), "sleep 600".into()]),
        labels: Some(HashMap::from([
            (LABEL_RUN.to_owned(), run.to_owned()),
            (LABEL_INSTANCE.to_owned(), instance.to_owned()),
            (LABEL_CREATED.to_owned(), created.to_string()),
            (LABEL_WORKSPACE.to_owned(), workspace.display().to_string()),
        ])),
        host_config: Some(HostConfig {
            binds: Some(vec![format!("{}:/workspace", workspace.display())]),
            network_mode: Some("none".into()),
            ..Default::default()
        }),
        ..Default::default()
    };
    let name = format!("toren-{instance}-{run}");
    let options = CreateContainerOptionsBuilder::new().name(&name).build();
    let id = docker
        .create_container(Some(options), body)
        .await
        .unwrap()
        .id;
    docker
        .start_container(&id, None::<StartContainerOptions>)
        .await
        .unwrap();
    id
}

fn liveness(run: &str) -> RunLiveness {
    match run.split('-').next() {
        Some("live") => RunLiveness::Live,
        Some("finished") => RunLiveness::Finished,
        _ => RunLiveness::Unknown,
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn the_reaper_follows_its_four_rules() {
    let env = Env::new().await;
    let docker = docker().await;
    let mut ids = HashMap::new();
    let mut workspaces = Vec::new();
    for (run, hours) in [
        ("finished-young", 0),
        ("unknown-old", 30),
        ("unknown-young", 2),
        ("live-old", 72),
        ("live-young", 0),
    ] {
        let ws = env.root.path().join(run);
        std::fs::create_dir_all(&ws).unwrap();
        std::fs::write(ws.join("artifact.txt"), run).unwrap();
        ids.insert(run, labelled(&docker, &env.instance, run, hours, &ws).await);
        workspaces.push(ws);
    }

    // A dry run says what would go and removes nothing.
    let dry = env.backend.reap(liveness, ORPHAN_AGE, true).await.unwrap();
    let planned: BTreeSet<(String, bool)> = dry
        .iter()
        .map(|a| {
            (
                a.container.run.clone(),
                a.outcome == ReapOutcome::WouldRemove,
            )
        })
        .collect();
    assert_eq!(
        planned,
        BTreeSet::from([
            ("finished-young".into(), true),
            ("unknown-old".into(), true)
        ])
    );
    assert_eq!(env.containers().await.len(), 5);

    let done = env.backend.reap(liveness, ORPHAN_AGE, false).await.unwrap();
    let reasons: BTreeSet<(String, String)> = done
        .iter()
        .map(|a| {
            assert_eq!(a.outcome, ReapOutcome::Removed);
            let reason = match a.reason {
                ReapReason::RunFinished => "finished".to_owned(),
                ReapReason::Orphaned { age } => format!("orphaned {}h", age.as_secs() / 3600),
            };
            (a.container.run.clone(), reason)
        })
        .collect();
    assert_eq!(
        reasons,
        BTreeSet::from([
            ("finished-young".into(), "finished".into()),
            ("unknown-old".into(), "orphaned 30h".into()),
        ])
    );

    // Live runs' containers (however old) and the young unknown one are untouched and
    // still running.
    let left: BTreeSet<String> = env.containers().await.into_iter().collect();
    let kept: BTreeSet<String> = ["unknown-young", "live-old", "live-young"]
        .iter()
        .map(|r| ids[r].clone())
        .collect();
    assert_eq!(left, kept);
    let listed = env.backend.list_toren_containers().await.unwrap();
    assert!(listed.iter().all(|c| c.state == "running"), "{listed:?}");

    // No workspace was deleted, not even those of removed containers.
    for ws in &workspaces {
        let name = ws.file_name().unwrap().to_str().unwrap();
        assert_eq!(
            std::fs::read_to_string(ws.join("artifact.txt")).unwrap(),
            name
        );
    }
}

#[tokio::test(flavor = "multi_thread")]
async fn another_instance_s_containers_are_not_ours() {
    let ours = Env::new().await;
    let theirs = Env::new().await;
    let docker = docker().await;
    let ws = ours.root.path().join("ws");
    std::fs::create_dir_all(&ws).unwrap();
    let foreign = labelled(&docker, &theirs.instance, "finished-theirs", 48, &ws).await;

    assert_eq!(ours.backend.list_toren_containers().await.unwrap(), vec![]);
    assert_eq!(
        ours.backend
            .reap(liveness, ORPHAN_AGE, false)
            .await
            .unwrap(),
        vec![]
    );
    assert_eq!(
        containers_of(&docker, &theirs.instance).await,
        vec![foreign]
    );
}
