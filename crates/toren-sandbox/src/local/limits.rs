//! Resource limits for the local backend: which mechanism enforces each limit on this host
//! ([`LimitEnforcement`], decided once), and what bubblewrap's process does between fork
//! and exec — for one command, join its per-call cgroups (`cgroup`) and lower its rlimits;
//! for a kept sandbox, join the sandbox's cgroups — and in both, drop every inherited file
//! descriptor but the standard three and the seccomp filter bubblewrap reads. A kept
//! sandbox's cgroups hold the limits for everything in it (its commands and, with
//! [`HELPER_PIDS`] more processes, its helper); its commands get their rlimits from the
//! helper, per command ([`Limiter::command_limits`]), exactly as a command run on its own
//! gets them. Moving a process into a cgroup costs milliseconds on cgroup v1 (the kernel
//! waits for an RCU grace period), which is why a kept sandbox's commands do not each get
//! a cgroup of their own. cgroups are preferred: they count every process and byte of the
//! command as a whole. Without them, rlimits are the fallback, with the caveats
//! `SECURITY.md` spells out: they apply per process, and `RLIMIT_NPROC` counts all
//! processes of the user and does not bind root at all.

use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};

use nix::sys::resource::{Resource, getrlimit, setrlimit};
use toren_exec::protocol::Limits;
use toren_protocol::ResourceLimits;

use super::cgroup::{CallCgroup, Cgroups, Version};
use super::seccomp;

/// Processes and threads a kept sandbox's helper (and bubblewrap) may need on top of the
/// commands' limit: its main thread, its reaper, two threads per running command, and
/// bubblewrap itself. The docker backend gives its containers as many.
pub(crate) const HELPER_PIDS: u32 = 16;

/// How one limit is enforced on this host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Enforcement {
    /// A per-command cgroup on the unified (v2) hierarchy.
    CgroupV2,
    /// A per-command cgroup on a v1 hierarchy.
    CgroupV1,
    /// A per-process rlimit.
    Rlimit,
    /// Not enforced: no writable cgroup, and no rlimit binds (`RLIMIT_NPROC` as root).
    Unenforced,
}

impl fmt::Display for Enforcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::CgroupV2 => "cgroup v2",
            Self::CgroupV1 => "cgroup v1",
            Self::Rlimit => "rlimit",
            Self::Unenforced => "not enforced",
        })
    }
}

/// Which mechanism enforces each of [`ResourceLimits`] on this host.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct LimitEnforcement {
    pub pids: Enforcement,
    pub memory: Enforcement,
    pub cpu: Enforcement,
}

impl fmt::Display for LimitEnforcement {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "processes: {}, memory: {}, cpu time: {} (per process)",
            self.pids, self.memory, self.cpu
        )?;
        if self.pids == Enforcement::Rlimit {
            f.write_str("; RLIMIT_NPROC counts every process of this user")?;
        }
        if self.memory == Enforcement::Rlimit {
            f.write_str("; RLIMIT_DATA bounds each process, not their sum")?;
        }
        Ok(())
    }
}

/// The host's means of limiting commands, found once.
#[derive(Clone, Debug)]
pub(crate) struct Limiter {
    cgroups: Cgroups,
    enforcement: LimitEnforcement,
    /// Running as root, where `RLIMIT_NPROC` does not bind.
    root: bool,
}

impl Limiter {
    pub(crate) fn probe() -> Self {
        let cgroups = Cgroups::probe();
        let root = nix::unistd::getuid().is_root();
        let by_cgroup = |version: Option<Version>, fallback| match version {
            Some(Version::V2) => Enforcement::CgroupV2,
            Some(Version::V1) => Enforcement::CgroupV1,
            None => fallback,
        };
        let enforcement = LimitEnforcement {
            pids: by_cgroup(
                cgroups.pids.as_ref().map(|p| p.version),
                if root {
                    Enforcement::Unenforced
                } else {
                    Enforcement::Rlimit
                },
            ),
            memory: by_cgroup(
                cgroups.memory.as_ref().map(|p| p.version),
                Enforcement::Rlimit,
            ),
            cpu: Enforcement::Rlimit,
        };
        Self {
            cgroups,
            enforcement,
            root,
        }
    }

    pub(crate) fn enforcement(&self) -> LimitEnforcement {
        self.enforcement
    }

    /// Prepares one command: its cgroups (created now, with the limits written) and what
    /// its process must do before exec.
    pub(crate) fn prepare(&self, limits: &ResourceLimits) -> io::Result<Prepared> {
        let (cgroup, procs) = if self.cgroups.pids.is_some() || self.cgroups.memory.is_some() {
            let (cgroup, procs) = CallCgroup::create(&self.cgroups, limits.pids, limits.memory)?;
            (Some(cgroup), procs)
        } else {
            (None, Vec::new())
        };
        let mut rlimits = vec![(
            Resource::RLIMIT_CPU,
            limits.cpu_secs,
            limits.cpu_secs.saturating_add(1),
        )];
        if self.cgroups.memory.is_none() {
            rlimits.push((Resource::RLIMIT_DATA, limits.memory, limits.memory));
        }
        if self.cgroups.pids.is_none() && !self.root {
            // Per real uid: count what the user already runs, so the command gets `pids` more.
            let mine = count_user_tasks(nix::unistd::getuid().as_raw());
            let nproc = mine.saturating_add(u64::from(limits.pids));
            rlimits.push((Resource::RLIMIT_NPROC, nproc, nproc));
        }
        let rlimits = rlimits
            .into_iter()
            .map(|(resource, soft, hard)| {
                // Never above the current hard limit: only root may raise it.
                let (_, current) = getrlimit(resource).map_err(io::Error::from)?;
                Ok((resource, soft.min(current), hard.min(current)))
            })
            .collect::<io::Result<Vec<_>>>()?;
        let join = procs.into_iter().map(OwnedFd::from).collect();
        Ok(Prepared {
            cgroup,
            setup: ChildSetup::new(join, rlimits)?,
        })
    }

    /// Prepares a kept sandbox: its cgroups (where cgroups can be used here), with
    /// `limits` written for all its processes, and what bubblewrap's process does before
    /// exec.
    pub(crate) fn prepare_sandbox(&self, limits: &ResourceLimits) -> io::Result<Prepared> {
        let (cgroup, procs) = if self.cgroups.pids.is_some() || self.cgroups.memory.is_some() {
            let pids = limits.pids.saturating_add(HELPER_PIDS);
            let (cgroup, procs) = CallCgroup::create(&self.cgroups, pids, limits.memory)?;
            (Some(cgroup), procs)
        } else {
            (None, Vec::new())
        };
        let join = procs.into_iter().map(OwnedFd::from).collect();
        Ok(Prepared {
            cgroup,
            setup: ChildSetup::new(join, Vec::new())?,
        })
    }

    /// The rlimits one command of a kept sandbox asks the helper for besides `RLIMIT_CPU`
    /// (`limits.cpu_secs`): the fallbacks for the limits no cgroup enforces here, exactly
    /// what a command run on its own gets (see [`Limiter::prepare`]).
    pub(crate) fn command_limits(&self, limits: &ResourceLimits) -> Limits {
        Limits {
            data_bytes: self.cgroups.memory.is_none().then_some(limits.memory),
            nproc: (self.cgroups.pids.is_none() && !self.root).then(|| {
                count_user_tasks(nix::unistd::getuid().as_raw())
                    .saturating_add(u64::from(limits.pids))
            }),
        }
    }
}

/// One command's limits (or a kept sandbox's), ready to apply.
pub(crate) struct Prepared {
    pub(crate) cgroup: Option<CallCgroup>,
    pub(crate) setup: ChildSetup,
}

/// What the command's process does between fork and exec, prepared beforehand so the hook
/// only makes system calls: no allocation, no locks.
pub(crate) struct ChildSetup {
    /// `cgroup.procs` of each per-call cgroup, opened close-on-exec.
    join: Vec<OwnedFd>,
    rlimits: Vec<(Resource, u64, u64)>,
    /// Where [`close_inherited`]'s fallback stops.
    fd_scan_end: i32,
    /// The seccomp filter for bubblewrap: the one descriptor that crosses exec.
    seccomp: Option<OwnedFd>,
}

impl ChildSetup {
    fn new(join: Vec<OwnedFd>, rlimits: Vec<(Resource, u64, u64)>) -> io::Result<Self> {
        let (open_files, _) = getrlimit(Resource::RLIMIT_NOFILE).map_err(io::Error::from)?;
        let seccomp = if seccomp::SUPPORTED {
            Some(OwnedFd::from(seccomp::pipe()?))
        } else {
            None
        };
        Ok(Self {
            join,
            rlimits,
            fd_scan_end: i32::try_from(open_files.min(65_536)).unwrap_or(65_536),
            seccomp,
        })
    }

    /// Joins the cgroups (writing `0` moves the writer), lowers the rlimits, and keeps
    /// every descriptor but stdin, stdout and stderr from crossing exec.
    fn apply(&self) -> io::Result<()> {
        for procs in &self.join {
            nix::unistd::write(procs, b"0").map_err(io::Error::from)?;
        }
        for &(resource, soft, hard) in &self.rlimits {
            setrlimit(resource, soft, hard).map_err(io::Error::from)?;
        }
        close_inherited(self.fd_scan_end, self.seccomp_fd())
    }

    /// The descriptor number of the seccomp filter bubblewrap is to read.
    pub(crate) fn seccomp_fd(&self) -> Option<i32> {
        self.seccomp.as_ref().map(AsRawFd::as_raw_fd)
    }

    /// Makes `command`'s process apply this setup after fork, before exec, so bubblewrap
    /// and everything it starts are limited from their first instruction.
    #[expect(
        unsafe_code,
        reason = "a pre_exec hook is the only way to put the child in its cgroups and set its \
                  rlimits before it can fork"
    )]
    pub(crate) fn install(self, command: &mut tokio::process::Command) {
        // SAFETY: the hook runs in the forked child of a multi-threaded process, where only
        // async-signal-safe calls are allowed. `apply` makes only write(2) and setrlimit(2)
        // calls on values prepared before the fork, and builds its errors from raw errno
        // values, which does not allocate.
        unsafe {
            command.pre_exec(move || self.apply());
        }
    }
}

/// Marks every descriptor from 3 up close-on-exec, so nothing the runtime inherited from
/// its own parent, or opened without `O_CLOEXEC`, reaches the sandbox; then clears the flag
/// on `keep` (the seccomp filter). Kernels before 5.11 lack `close_range` with that flag:
/// then each descriptor below `scan_end` is marked.
#[expect(
    unsafe_code,
    reason = "close_range and fcntl on raw descriptor numbers have no safe wrapper in nix"
)]
fn close_inherited(scan_end: i32, keep: Option<i32>) -> io::Result<()> {
    use nix::libc;
    let (first, last) = (3_u32, u32::MAX);
    // SAFETY: system calls on plain integers that touch no memory of this process; both
    // are async-signal-safe, as the pre-exec hook requires.
    let marked = unsafe {
        libc::syscall(
            libc::SYS_close_range,
            first,
            last,
            libc::CLOSE_RANGE_CLOEXEC,
        )
    } == 0;
    if !marked {
        for fd in 3..scan_end {
            // SAFETY: as above; EBADF for numbers not in use is expected and ignored.
            unsafe { libc::fcntl(fd, libc::F_SETFD, libc::FD_CLOEXEC) };
        }
    }
    if let Some(fd) = keep {
        // SAFETY: as above.
        if unsafe { libc::fcntl(fd, libc::F_SETFD, 0) } != 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// How many tasks (threads) processes of `uid` run now: what `RLIMIT_NPROC` counts.
fn count_user_tasks(uid: u32) -> u64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_str()
                .is_some_and(|n| n.bytes().all(|b| b.is_ascii_digit()))
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("status")).ok())
        .filter(|status| {
            field(status, "Uid:").and_then(|v| v.split_whitespace().next()?.parse::<u32>().ok())
                == Some(uid)
        })
        .map(|status| {
            field(&status, "Threads:")
                .and_then(|v| v.trim().parse().ok())
                .unwrap_or(1)
        })
        .sum()
}

fn field<'a>(status: &'a str, key: &str) -> Option<&'a str> {
    status.lines().find_map(|line| line.strip_prefix(key))
}
