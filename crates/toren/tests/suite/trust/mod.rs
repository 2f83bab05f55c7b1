//! The trust suite: the sandbox's promises (seed "The trust model", invariants I-7 to I-10)
//! attacked through the real agent loop. A scripted model makes the probes as ordinary tool
//! calls; the real `toren` binary runs them in a real sandbox; the assertions look at the
//! tool results in `toren events --json`, at the workspace, and at the host (files, the
//! database bytes, every process's argv).
//!
//! Every backend runs the same suite: a [`Backend`] names it and says which probes cannot
//! apply to it and why; those are printed, never silently skipped. Each test prints how
//! many probes its category made (run with `--no-capture`, or see the nextest override in
//! `.config/nextest.toml`, which shows the output of `trust` tests).

mod approval;
mod bad_input;
mod egress;
mod egress_e2b;
mod egress_secrets;
mod hardening;
pub(crate) mod harness;
mod network;
mod paths;
mod runaway;
mod secrets;
mod secrets_e2b;
mod spoofing;

/// A sandbox backend under test.
pub(crate) struct Backend {
    /// Shown in the output: `trust[local] ...`.
    pub(crate) name: &'static str,
    /// The `TOREN_SANDBOX` value that selects it.
    pub(crate) sandbox: &'static str,
    /// Probes that cannot apply to this backend, with the reason.
    pub(crate) not_applicable: &'static [(&'static str, &'static str)],
}

pub(crate) const LOCAL: Backend = Backend {
    name: "local",
    sandbox: "local",
    not_applicable: &[],
};

pub(crate) const DOCKER: Backend = Backend {
    name: "docker",
    sandbox: "docker",
    not_applicable: &[
        (
            "no resolver configuration",
            "docker writes /etc/resolv.conf into every container, even with network none; \
             name resolution itself still fails (the `name resolution` probe)",
        ),
        (
            "workspace mounted nosuid",
            "docker's API cannot mount a bind nosuid,nodev (`Binds` refuses the options, and a \
             local-driver volume binds without them); in the container no-new-privileges and \
             no capabilities keep set-uid programs from gaining anything and no device node \
             can be made (both probed), and the run's private directory keeps other users out",
        ),
        (
            "host loopback with network",
            "with network: true a container joins docker's bridge, whose 127.0.0.1 is the \
             container's own; the host's loopback listener is not reachable by design",
        ),
    ],
};

/// E2B, against the local E2B service of `toren-test-support` (each sandbox one machine:
/// its own PID namespace, its own disk, and a VM's bounds: a cgroup of the `base`
/// template's 512 MiB and a process limit). Every category runs for it; where a probe
/// asserts on the workspace it reads the VM's disk (`harness::workspace`), and the
/// secrets category also checks every request the service recorded. What a microVM does
/// not promise, or promises differently, is listed here.
pub(crate) const E2B: Backend = Backend {
    name: "e2b",
    sandbox: "e2b",
    not_applicable: &[
        (
            "no resolver configuration",
            "an E2B sandbox is a VM whose template has its own /etc/resolv.conf, network or \
             not; name resolution itself still fails (the `name resolution` probe)",
        ),
        (
            "host loopback with network",
            "an E2B sandbox is a VM elsewhere: with network: true its 127.0.0.1 is the VM's \
             own, and the host's loopback listener is not reachable by design",
        ),
        (
            "keyctl refused",
            "an E2B sandbox is a VM with its own kernel, whose keyrings hold nothing of the \
             host's (the seccomp filter refusing keyctl is the local backend's); the probe \
             still runs and finds no canary",
        ),
        (
            "workspace mounted nosuid",
            "an E2B sandbox's /workspace is a directory of the VM's own disk; a set-uid \
             program there can gain only what the VM's default user may take anyway (E2B's \
             templates give it passwordless sudo): the VM's kernel is the boundary. No \
             capabilities and no device node are still probed",
        ),
        (
            "no new privileges",
            "E2B's templates give the VM's default user passwordless sudo, so root inside the \
             VM is the agent's to take; the VM's kernel, not no_new_privs, is the boundary",
        ),
        (
            "another local user",
            "the agent's files are on the VM's disk, not the host's: the run's host \
             directory stays empty (checked)",
        ),
        (
            "limit notes",
            "in an E2B VM sandbox.limits are rlimits of each command (RLIMIT_NPROC for the \
             user's processes, RLIMIT_DATA and RLIMIT_CPU per process), whose hits the \
             kernel reports to no one Toren can ask (no cgroup's events through envd)",
        ),
        (
            "fork bomb",
            "Toren bounds a command's processes in the VM by RLIMIT_NPROC, which binds for \
             E2B's default user (no root); every user of the local E2B service is root in \
             its namespace, where it does not bind, so there a bomb would fill the \
             service's sandbox (bounded by its cgroup, as a VM is by its size) until it \
             starts nothing, Toren's kill included. A harmless command stands in for it; the \
             limits themselves are checked by toren-sandbox-e2b's tests",
        ),
        (
            "flood of 2 GB",
            "2 GB of output through envd's stream (base64 over HTTP) take minutes, a real \
             E2B's more: the flood probe prints 200 MB, which shows the same head+tail cap \
             and the same bound on Toren's memory",
        ),
        (
            "memory-backed /tmp",
            "an E2B VM's /tmp is on the VM's own disk, not in memory; a full disk is the \
             `disk fill` test",
        ),
        (
            "/dev/shm bounded",
            "an E2B VM's /dev/shm is a tmpfs in the VM's own memory, bounded by the VM's size \
             (the memory hog probe), not by a limit of Toren's",
        ),
        (
            "read-only root",
            "an E2B VM's root filesystem is the VM's own disk, writable by root only: the \
             default user gets `Permission denied` (or `Read-only file system`)",
        ),
    ],
};

impl Backend {
    /// Whether `probe` applies; if not, says why on stdout.
    pub(crate) fn applies(&self, probe: &str) -> bool {
        match self.not_applicable.iter().find(|(name, _)| *name == probe) {
            Some((_, why)) => {
                report_not_applicable(self, probe, why);
                false
            }
            None => true,
        }
    }
}

pub(crate) fn report_not_applicable(backend: &Backend, probe: &str, why: &str) {
    println!("trust[{}] NOT APPLICABLE {probe}: {why}", backend.name);
}

pub(crate) fn note(backend: &Backend, text: &str) {
    println!("trust[{}] note: {text}", backend.name);
}

pub(crate) fn report(backend: &Backend, category: &str, probes: usize) {
    println!("trust[{}] {category}: {probes} probes", backend.name);
}

#[test]
fn local_secrets() {
    secrets::suite(&LOCAL);
}

#[test]
fn local_network() {
    network::suite(&LOCAL);
}

#[test]
fn local_network_policy() {
    egress::suite(&LOCAL);
}

#[test]
fn local_secret_injection() {
    egress_secrets::suite(&LOCAL);
}

#[test]
fn local_paths() {
    paths::suite(&LOCAL);
}

#[test]
fn local_runaway() {
    runaway::suite(&LOCAL);
}

#[test]
fn local_runaway_disk_fill() {
    runaway::disk_fill(&LOCAL);
}

#[test]
fn local_runaway_edit_bomb() {
    runaway::edit_bomb(&LOCAL);
}

#[test]
fn local_hardening() {
    hardening::suite(&LOCAL);
}

#[test]
fn local_bad_input() {
    bad_input::suite(&LOCAL);
}

#[test]
fn local_approval() {
    approval::suite(&LOCAL);
}

#[test]
fn local_approval_shown_is_what_runs() {
    approval::shown_is_what_runs(&LOCAL);
}

#[test]
fn local_spoofing() {
    spoofing::suite(&LOCAL);
}

#[test]
fn docker_secrets() {
    secrets::suite(&DOCKER);
}

#[test]
fn docker_network() {
    network::suite(&DOCKER);
}

#[test]
fn docker_network_policy() {
    egress::suite(&DOCKER);
}

#[test]
fn docker_secret_injection() {
    egress_secrets::suite(&DOCKER);
}

#[test]
fn docker_paths() {
    paths::suite(&DOCKER);
}

#[test]
fn docker_runaway() {
    runaway::suite(&DOCKER);
}

#[test]
fn docker_runaway_disk_fill() {
    runaway::disk_fill(&DOCKER);
}

#[test]
fn docker_runaway_edit_bomb() {
    runaway::edit_bomb(&DOCKER);
}

#[test]
fn docker_hardening() {
    hardening::suite(&DOCKER);
}

#[test]
fn docker_bad_input() {
    bad_input::suite(&DOCKER);
}

#[test]
fn docker_approval() {
    approval::suite(&DOCKER);
}

#[test]
fn docker_approval_shown_is_what_runs() {
    approval::shown_is_what_runs(&DOCKER);
}

#[test]
fn docker_spoofing() {
    spoofing::suite(&DOCKER);
}

#[test]
fn e2b_network() {
    network::suite(&E2B);
}

#[test]
fn e2b_spoofing() {
    spoofing::suite(&E2B);
}

#[test]
fn e2b_approval() {
    approval::suite(&E2B);
}

#[test]
fn e2b_approval_shown_is_what_runs() {
    approval::shown_is_what_runs(&E2B);
}

#[test]
fn e2b_bad_input() {
    bad_input::suite(&E2B);
}

#[test]
fn e2b_network_policy() {
    egress::suite(&E2B);
}

#[test]
fn e2b_secret_injection() {
    egress_secrets::suite(&E2B);
}

#[test]
fn e2b_secrets() {
    secrets::suite(&E2B);
}

#[test]
fn e2b_paths() {
    paths::suite(&E2B);
}

#[test]
fn e2b_runaway() {
    runaway::suite(&E2B);
}

#[test]
fn e2b_runaway_disk_fill() {
    runaway::disk_fill(&E2B);
}

#[test]
fn e2b_runaway_edit_bomb() {
    runaway::edit_bomb(&E2B);
}

#[test]
fn e2b_hardening() {
    hardening::suite(&E2B);
}
