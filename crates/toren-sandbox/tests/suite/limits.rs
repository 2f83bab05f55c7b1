//! Resource limits of the local backend, run for real: the mechanism each limit uses on
//! this host, commands placed in their own cgroup (a kept sandbox's commands in the
//! sandbox's) and the cgroup gone afterwards, and a fork bomb, a memory hog and a CPU
//! spinner each stopped by its limit — both ways the backend runs commands.

use std::sync::Arc;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use tempfile::TempDir;
use toren_protocol::{ApprovalPolicy, ResolvedPolicy, ResourceLimits, RunId};
use toren_sandbox::{Enforcement, ExecOutput, ExecRequest, LimitHit, LocalBackend, Sandbox};

use super::support::{Mode, backend, both_modes, eventually, processes_with};

both_modes!(
    the_mechanism_of_each_limit_is_known_and_commands_get_their_own_cgroup,
    a_fork_bomb_is_contained_and_the_next_command_runs,
    a_memory_hog_is_stopped_at_the_limit,
    cpu_time_is_limited_per_process,
);

struct Fixture {
    _root: TempDir,
    backend: LocalBackend,
    sandbox: Arc<dyn Sandbox>,
}

async fn fixture(mode: Mode, limits: ResourceLimits) -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let backend = backend(&root.path().join("sandboxes"), mode);
    let policy = ResolvedPolicy {
        checkpoints: Default::default(),
        backend: "local".to_owned(),
        image: None,
        network: false,
        egress: None,
        approval: ApprovalPolicy::Never,
        env: Vec::new(),
        limits,
        workspace: None,
        on_interrupt: Default::default(),
        sandbox_key: None,
        volume: None,
    };
    let sandbox = backend
        .open(&RunId::new(), &policy, Vec::new())
        .await
        .unwrap();
    Fixture {
        _root: root,
        backend,
        sandbox,
    }
}

impl Fixture {
    async fn run(&self, command: &str, timeout: Duration) -> ExecOutput {
        let req = ExecRequest {
            command: command.to_owned(),
            timeout,
            output_limit: 30_000,
        };
        self.sandbox.exec(req).await.unwrap()
    }

    fn cgroups(&self) -> bool {
        let e = self.backend.enforcement();
        matches!(e.pids, Enforcement::CgroupV1 | Enforcement::CgroupV2)
            && matches!(e.memory, Enforcement::CgroupV1 | Enforcement::CgroupV2)
    }
}

pub(crate) fn toren_cgroups() -> Vec<String> {
    let own = std::fs::read_to_string("/proc/self/cgroup").unwrap();
    let mut found = Vec::new();
    for dir in ["pids", "memory", "unified"] {
        let Some(path) = own.lines().find_map(|l| {
            let (_, rest) = l.split_once(':')?;
            let (list, path) = rest.split_once(':')?;
            (list == dir || (dir == "unified" && list.is_empty())).then_some(path)
        }) else {
            continue;
        };
        let parent = format!("/sys/fs/cgroup/{dir}{path}");
        if let Ok(entries) = std::fs::read_dir(&parent) {
            found.extend(
                entries
                    .flatten()
                    .map(|e| e.file_name().to_string_lossy().into_owned())
                    .filter(|n| n.starts_with(&format!("toren-{}-", std::process::id()))),
            );
        }
    }
    found
}

async fn the_mechanism_of_each_limit_is_known_and_commands_get_their_own_cgroup(mode: Mode) {
    let f = fixture(mode, ResourceLimits::default()).await;
    let enforcement = f.backend.enforcement();
    println!("local backend limits on this host: {enforcement}");
    assert_eq!(enforcement.cpu, Enforcement::Rlimit);
    if !nix::unistd::getuid().is_root() {
        assert_ne!(enforcement.pids, Enforcement::Unenforced);
    }
    if !f.cgroups() {
        println!("not applicable here: no writable cgroup with pids and memory controllers");
        return;
    }
    // Distinct per mode: both run at once.
    let marker = match mode {
        Mode::Kept => "sleep 31.4159",
        Mode::PerCall => "sleep 31.2718",
    };
    let (out, seen) = tokio::join!(f.run(marker, Duration::from_secs(20)), async {
        let deadline = Instant::now() + Duration::from_secs(10);
        loop {
            let pids = processes_with(marker);
            if let Some(pid) = pids.iter().find(|pid| {
                std::fs::read_to_string(format!("/proc/{pid}/comm")).is_ok_and(|c| c == "sleep\n")
            }) {
                let cgroup = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
                // Kill it so the call ends; the limit check is done.
                let _ = nix::sys::signal::kill(
                    nix::unistd::Pid::from_raw(i32::try_from(*pid).unwrap()),
                    nix::sys::signal::Signal::SIGKILL,
                );
                return cgroup;
            }
            assert!(Instant::now() < deadline, "the command never showed up");
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    });
    assert_eq!(out.exit_code, Some(137));
    let tag = format!("/toren-{}-", std::process::id());
    assert!(seen.contains(&tag), "not in a per-call cgroup:\n{seen}");
    if mode == Mode::Kept {
        // The sandbox's cgroup lasts as long as the sandbox.
        assert_ne!(toren_cgroups(), Vec::<String>::new());
        drop(f);
    }
    assert!(
        eventually(|| toren_cgroups().is_empty()).await,
        "left behind: {:?}",
        toren_cgroups()
    );
}

async fn a_fork_bomb_is_contained_and_the_next_command_runs(mode: Mode) {
    let limits = ResourceLimits {
        pids: 32,
        ..ResourceLimits::default()
    };
    let f = fixture(mode, limits).await;
    if f.backend.enforcement().pids == Enforcement::Unenforced {
        println!("not applicable here: no process limit can be enforced (root without cgroups)");
        return;
    }
    // Distinct per mode: both run at once.
    let name = match mode {
        Mode::Kept => "bomb_kept_9d1e",
        Mode::PerCall => "bomb_call_9d1e",
    };
    let bomb = format!("{name}() {{ {name} | {name} & }}; {name}; sleep 3");
    let started = Instant::now();
    let out = f.run(&bomb, Duration::from_secs(3)).await;
    assert!(
        started.elapsed() < Duration::from_secs(10),
        "{:?}",
        started.elapsed()
    );
    assert!(out.timed_out || out.exit_code.is_some(), "{out:?}");
    if f.cgroups() {
        assert_eq!(
            out.limits_hit,
            vec![LimitHit::Pids { limit: 32 }],
            "{out:?}"
        );
    }
    assert_eq!(processes_with(name), Vec::<u32>::new());

    let started = Instant::now();
    let next = f.run("echo still here", Duration::from_secs(10)).await;
    assert_eq!(next.output, "still here\n");
    assert!(
        started.elapsed() < Duration::from_secs(2),
        "{:?}",
        started.elapsed()
    );
}

async fn a_memory_hog_is_stopped_at_the_limit(mode: Mode) {
    let limits = ResourceLimits {
        memory: 64 * 1024 * 1024,
        ..ResourceLimits::default()
    };
    let f = fixture(mode, limits).await;
    let hog = "x=$(head -c 300000000 /dev/zero | tr '\\0' a); echo survived ${#x}";
    let out = f.run(hog, Duration::from_secs(30)).await;
    assert!(!out.output.contains("survived"), "{out:?}");
    assert_ne!(out.exit_code, Some(0), "{out:?}");
    if f.cgroups() {
        assert_eq!(
            out.limits_hit,
            vec![LimitHit::Memory {
                limit: 64 * 1024 * 1024
            }],
            "{out:?}"
        );
    }
}

async fn cpu_time_is_limited_per_process(mode: Mode) {
    let limits = ResourceLimits {
        cpu_secs: 1,
        ..ResourceLimits::default()
    };
    let f = fixture(mode, limits).await;
    let started = Instant::now();
    let out = f.run("while :; do :; done", Duration::from_secs(20)).await;
    assert!(
        started.elapsed() < Duration::from_secs(8),
        "{:?}",
        started.elapsed()
    );
    assert!(!out.timed_out);
    // SIGXCPU (24) ends bash: 128 + 24.
    assert_eq!(out.exit_code, Some(152), "{out:?}");
}
