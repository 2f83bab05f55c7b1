//! What a run's container looks like, built by a pure function from a [`ContainerSpec`]:
//! the create request sent to the daemon (snapshot-tested), the container's name and its
//! labels. Nothing here talks to the daemon; `container` does.
//!
//! The container runs the helper (bind-mounted read-only at [`HELPER_PATH`]) as PID 1 with
//! stdin attached, as the workspace owner's uid:gid, with the workspace bind-mounted at
//! `/workspace` as its working directory; a read-only root with a memory-backed `/tmp`; no
//! capabilities and no privilege gain; no network unless granted; memory and process
//! limits; no log driver (command output is not kept by the daemon). Its environment holds
//! only PATH, HOME and LANG: granted variables travel with each request, so neither the
//! container's configuration nor any argv ever holds a value.

use std::collections::HashMap;
use std::path::Path;

use bollard::models::{ContainerCreateBody, HostConfig, HostConfigLogConfig, Mount, MountType};
use toren_protocol::ResourceLimits;
use toren_sandbox::egress::{SANDBOX_EGRESS_DIR, helper_args};
use toren_sandbox::{SANDBOX_PATH, SANDBOX_WORKDIR, SHM_SIZE};

/// The image used when an agent names none: Debian 12 with bash, node, npm, python, pip
/// and git, built by `scripts/build-sandbox-image` (or `docker/sandbox.Dockerfile`).
pub const DEFAULT_IMAGE: &str = "toren-sandbox:bookworm";

/// Where the helper appears inside every container.
pub const HELPER_PATH: &str = "/.toren-exec";

/// Label naming the run a container belongs to.
pub const LABEL_RUN: &str = "toren.run";
/// Label holding the host path of the run's workspace.
pub const LABEL_WORKSPACE: &str = "toren.workspace";
/// Label naming the Toren instance (one installation, one event log) that made it.
pub const LABEL_INSTANCE: &str = "toren.instance";
/// Label holding when Toren created the container (RFC 3339).
pub const LABEL_CREATED: &str = "toren.created";

/// Processes and threads the helper itself may need on top of the command's limit.
pub const HELPER_PIDS: u32 = 16;

/// Everything that decides a run's container.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ContainerSpec<'a> {
    pub image: &'a str,
    pub run: &'a str,
    pub instance: &'a str,
    /// The workspace on the host.
    pub workspace: &'a Path,
    /// The static helper binary on the host.
    pub helper: &'a Path,
    /// uid and gid the commands run as: the workspace's owner.
    pub user: (u32, u32),
    pub network: bool,
    pub limits: ResourceLimits,
    pub created: jiff::Timestamp,
    /// With a host list: the host directory of the run's egress proxy socket, bound
    /// read-only at `toren_sandbox::egress::SANDBOX_EGRESS_DIR`, and the helper told to
    /// relay the proxy port to it. The container keeps `network_mode: none`.
    pub egress: Option<&'a Path>,
}

/// The container's name: one per run and instance, so a second process of the same run
/// finds the container instead of making another.
pub fn container_name(instance: &str, run: &str) -> String {
    format!("toren-{instance}-{run}")
}

/// The container's fixed environment (no granted variable: those come per request).
pub fn base_env() -> Vec<(String, String)> {
    vec![
        ("PATH".to_owned(), SANDBOX_PATH.to_owned()),
        ("HOME".to_owned(), SANDBOX_WORKDIR.to_owned()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
    ]
}

/// The body of the create request for `spec`.
pub fn container_body(spec: &ContainerSpec<'_>) -> ContainerCreateBody {
    let labels = HashMap::from([
        (LABEL_RUN.to_owned(), spec.run.to_owned()),
        (
            LABEL_WORKSPACE.to_owned(),
            spec.workspace.display().to_string(),
        ),
        (LABEL_INSTANCE.to_owned(), spec.instance.to_owned()),
        (LABEL_CREATED.to_owned(), spec.created.to_string()),
    ]);
    let bind = |source: &Path, target: &str, read_only: bool| Mount {
        source: Some(source.display().to_string()),
        target: Some(target.to_owned()),
        typ: Some(MountType::BIND),
        read_only: Some(read_only),
        ..Default::default()
    };
    // The workspace bind cannot be `nosuid,nodev`: the daemon refuses those options in
    // `Binds` ("invalid mode"), and a local-driver volume with `o=bind,nosuid,nodev` mounts
    // without them (a bind ignores flags unless remounted). Inside, no-new-privileges and
    // no capabilities make set-uid programs gain nothing and device nodes impossible to
    // make; outside, the run's private directory keeps other users away from what the
    // agent left (see toren-sandbox's `workspace` layout).
    let memory = i64::try_from(spec.limits.memory).unwrap_or(i64::MAX);
    let mut mounts = vec![
        bind(spec.workspace, SANDBOX_WORKDIR, false),
        bind(spec.helper, HELPER_PATH, true),
    ];
    let mut entrypoint = vec![HELPER_PATH.to_owned()];
    if let Some(dir) = spec.egress {
        mounts.push(bind(dir, SANDBOX_EGRESS_DIR, true));
        entrypoint.extend(helper_args());
    }
    let host_config = HostConfig {
        mounts: Some(mounts),
        network_mode: Some(if spec.network { "bridge" } else { "none" }.to_owned()),
        cap_drop: Some(vec!["ALL".to_owned()]),
        security_opt: Some(vec!["no-new-privileges".to_owned()]),
        readonly_rootfs: Some(true),
        tmpfs: Some(HashMap::from([(
            "/tmp".to_owned(),
            // tmpfs pages count against the container's memory: at half the limit, filling
            // /tmp ends in "No space left on device", not in the container being OOM-killed.
            format!("rw,nosuid,nodev,size={}", spec.limits.memory / 2),
        )])),
        shm_size: Some(i64::try_from(SHM_SIZE).unwrap_or(i64::MAX)),
        memory: Some(memory),
        memory_swap: Some(memory),
        pids_limit: Some(i64::from(spec.limits.pids.saturating_add(HELPER_PIDS))),
        init: Some(false),
        log_config: Some(HostConfigLogConfig {
            typ: Some("none".to_owned()),
            config: None,
        }),
        ..Default::default()
    };
    ContainerCreateBody {
        image: Some(spec.image.to_owned()),
        entrypoint: Some(entrypoint),
        cmd: Some(Vec::new()),
        user: Some(format!("{}:{}", spec.user.0, spec.user.1)),
        working_dir: Some(SANDBOX_WORKDIR.to_owned()),
        env: Some(
            base_env()
                .into_iter()
                .map(|(name, value)| format!("{name}={value}"))
                .collect(),
        ),
        labels: Some(labels),
        open_stdin: Some(true),
        stdin_once: Some(false),
        attach_stdin: Some(true),
        attach_stdout: Some(true),
        attach_stderr: Some(true),
        tty: Some(false),
        host_config: Some(host_config),
        ..Default::default()
    }
}
