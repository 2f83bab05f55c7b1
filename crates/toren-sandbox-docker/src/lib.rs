//! The docker sandbox backend.
//!
//! One container per run, over the run's workspace bind-mounted at `/workspace`; created
//! lazily at the run's first command, recreated around the same workspace whenever it is
//! gone or stopped, removed when the run finishes ([`DockerBackend::remove_run`]) or by the
//! reaper ([`DockerBackend::reap`]). [`DockerBackend`] is a `toren_sandbox::SandboxBackend`
//! itself, so a worker holds it like any other backend. File tools use the workspace
//! through the same capability handle as the local backend.
//!
//! Commands do not go through `docker exec`: the container's PID 1 is `toren-exec`, a
//! small static helper bind-mounted read-only from the host (build it with
//! `scripts/build-exec-helper`), which runs each command on request over the attached
//! stdin and stdout, so a trivial command costs about a process spawn and any image with
//! `/bin/sh` works. Commands run under bash when the image has it, else `/bin/sh`.
//!
//! The default image is [`DEFAULT_IMAGE`], `toren-sandbox:bookworm` (Debian 12 with bash,
//! node, npm, python, pip and git), built offline by `scripts/build-sandbox-image` or,
//! with a registry, from `docker/sandbox.Dockerfile`.
//!
//! The trust model as this backend enforces it: the container's environment is only
//! PATH, HOME and LANG, and granted variables travel with each request, never in its
//! configuration or an argv (I-7); `network_mode: none` unless `network: true` (I-8); no
//! capabilities, no privilege gain, a read-only root with a memory-backed `/tmp`, the
//! commands run as the workspace's owner, and memory and process limits hold for the
//! container as a whole (CPU time per command, as `RLIMIT_CPU`).

mod backend;
mod container;
mod error;
mod reaper;
mod sandbox;
mod session;
mod spec;

pub use backend::{DEFAULT_DOCKER_HOST, DockerBackend, DockerSettings, DockerStatus};
pub use error::{Error, Result};
pub use reaper::{
    ORPHAN_AGE, ReapAction, ReapOutcome, ReapReason, RunLiveness, TorenContainer, plan_reap,
};
pub use spec::{
    ContainerSpec, DEFAULT_IMAGE, HELPER_PATH, HELPER_PIDS, LABEL_CREATED, LABEL_INSTANCE,
    LABEL_RUN, LABEL_WORKSPACE, base_env, container_body, container_name,
};
