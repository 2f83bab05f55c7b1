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
/// its own PID namespace and disk). The network, approval, bad-input and spoofing categories
/// run for it (approval and bad input read the VM's disk through `harness::workspace`);
/// the others do not yet:
/// they assert on the host workspace (or, for secrets, set `E2B_API_KEY` themselves), and
/// under e2b the files are on the VM's disk.
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
