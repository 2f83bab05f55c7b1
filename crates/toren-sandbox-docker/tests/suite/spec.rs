//! The container a run gets, as the daemon is asked for it: reviewed as a snapshot.

use std::path::Path;

use toren_protocol::ResourceLimits;
use toren_sandbox_docker::{ContainerSpec, container_body, container_name};

fn spec(network: bool) -> ContainerSpec<'static> {
    ContainerSpec {
        image: "toren-sandbox:bookworm",
        run: "run_01jexample",
        instance: "laptop",
        workspace: Path::new("/home/me/.toren/sandboxes/run_01jexample"),
        helper: Path::new("/opt/toren/toren-exec"),
        user: (1000, 1000),
        network,
        limits: ResourceLimits::default(),
        created: "2026-11-29T12:00:00Z".parse().unwrap(),
        egress: None,
    }
}

#[test]
fn the_container_of_a_run_without_network() {
    insta::with_settings!({ sort_maps => true }, {
        insta::assert_json_snapshot!(container_body(&spec(false)));
    });
}

#[test]
fn network_true_only_changes_the_network_mode() {
    let mut without = serde_json::to_value(container_body(&spec(false))).unwrap();
    let with = serde_json::to_value(container_body(&spec(true))).unwrap();
    without["HostConfig"]["NetworkMode"] = "bridge".into();
    assert_eq!(without, with);
}

#[test]
fn the_name_is_per_instance_and_run() {
    assert_eq!(
        container_name("laptop", "run_01jexample"),
        "toren-laptop-run_01jexample"
    );
}

#[test]
fn a_host_list_binds_the_proxy_directory_and_keeps_the_network_off() {
    let dir = Path::new("/home/me/.toren/sandboxes/run_01jexample/egress");
    let without = serde_json::to_value(container_body(&spec(false))).unwrap();
    let with = serde_json::to_value(container_body(&ContainerSpec {
        egress: Some(dir),
        ..spec(false)
    }))
    .unwrap();
    assert_eq!(with["HostConfig"]["NetworkMode"], "none");
    assert_eq!(
        with["Entrypoint"],
        serde_json::json!([
            "/.toren-exec",
            "--forward",
            "127.0.0.1:3128=/.toren-egress/proxy.sock"
        ])
    );
    let mounts = with["HostConfig"]["Mounts"].as_array().unwrap();
    assert_eq!(
        mounts.last().unwrap(),
        &serde_json::json!({
            "Source": "/home/me/.toren/sandboxes/run_01jexample/egress",
            "Target": "/.toren-egress",
            "Type": "bind",
            "ReadOnly": true,
        })
    );
    // Nothing else differs.
    let mut same = with.clone();
    same["Entrypoint"] = without["Entrypoint"].clone();
    same["HostConfig"]["Mounts"] = without["HostConfig"]["Mounts"].clone();
    assert_eq!(same, without);
}
