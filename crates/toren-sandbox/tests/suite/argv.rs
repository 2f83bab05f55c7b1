//! The bubblewrap command line and the sandbox environment, as pure data.

use std::path::Path;

use pretty_assertions::assert_eq;
use toren_sandbox::{BwrapSpec, HostLayout, Inside, RootEntry, bwrap_argv, sandbox_env};

fn render(network: bool, layout: &HostLayout) -> String {
    render_inside(network, layout, Inside::Command("echo hi && ls"))
}

fn render_inside(network: bool, layout: &HostLayout, inside: Inside<'_>) -> String {
    let spec = BwrapSpec {
        workspace: Path::new("/srv/toren/sandboxes/run_01abc"),
        network,
        layout,
        tmp_size: 2 * 1024 * 1024 * 1024,
        seccomp_fd: Some(3),
        inside,
        egress: None,
    };
    let argv = bwrap_argv(&spec);
    argv.iter()
        .map(|a| a.to_string_lossy())
        .collect::<Vec<_>>()
        .join("\n")
}

#[test]
fn argv_for_a_merged_usr_host_without_network() {
    insta::assert_snapshot!(render(false, &HostLayout::merged_usr()));
}

#[test]
fn a_kept_sandbox_runs_the_helper_as_pid_1_bound_read_only_with_a_smaller_tmp() {
    let layout = HostLayout::merged_usr();
    let command = render(false, &layout);
    let helper = Path::new("/opt/toren/toren-exec");
    let kept = render_inside(false, &layout, Inside::Helper(helper));
    insta::assert_snapshot!(kept);
    // The same namespaces, mounts and filter; only how it lives, its /tmp and what runs
    // differ.
    let only = |a: &str, b: &str| -> Vec<String> {
        a.lines()
            .filter(|l| !b.lines().any(|w| w == *l))
            .map(str::to_owned)
            .collect()
    };
    assert_eq!(
        only(&kept, &command),
        // Half the memory for a /tmp that lasts the run, the bind's source and target, and
        // the program run.
        [
            "--as-pid-1",
            "1073741824",
            "/opt/toren/toren-exec",
            "/.toren-exec",
            "/.toren-exec"
        ]
    );
    assert_eq!(
        only(&command, &kept),
        [
            "--die-with-parent",
            "2147483648",
            "/bin/bash",
            "-c",
            "echo hi && ls"
        ]
    );
}

#[test]
fn network_adds_share_net_and_resolv_conf_only() {
    let layout = HostLayout::merged_usr();
    let without = render(false, &layout);
    let with = render(true, &layout);
    let added: Vec<&str> = with
        .lines()
        .filter(|l| !without.lines().any(|w| w == *l))
        .collect();
    assert_eq!(
        added,
        ["--share-net", "/etc/resolv.conf", "/etc/resolv.conf"]
    );
    assert_eq!(with.lines().count(), without.lines().count() + 4);
}

#[test]
fn real_directories_are_bound_read_only() {
    let layout = HostLayout {
        root_entries: vec![
            RootEntry::Directory {
                path: "/lib".into(),
            },
            RootEntry::Symlink {
                path: "/bin".into(),
                target: "usr/bin".into(),
            },
        ],
    };
    let argv = render(false, &layout);
    assert!(argv.contains("--ro-bind\n/lib\n/lib\n"), "{argv}");
    assert!(argv.contains("--symlink\nusr/bin\n/bin\n"), "{argv}");
}

#[test]
fn env_is_minimal_and_grants_may_override() {
    let granted = vec![
        ("MY_TOKEN".to_owned(), "s3cret".to_owned()),
        ("HOME".to_owned(), "/workspace/home".to_owned()),
    ];
    let env = sandbox_env(&granted);
    let expected: Vec<(String, String)> = [
        (
            "PATH",
            "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
        ),
        ("LANG", "C.UTF-8"),
        ("MY_TOKEN", "s3cret"),
        ("HOME", "/workspace/home"),
    ]
    .iter()
    .map(|(k, v)| ((*k).to_owned(), (*v).to_owned()))
    .collect();
    assert_eq!(env, expected);
}
