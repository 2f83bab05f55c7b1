//! Control groups for the local backend. [`Cgroups::probe`] finds, once, where this process
//! may create child cgroups with the `pids` and `memory` controllers — under its own cgroup,
//! in the cgroup v2 tree or the v1 hierarchies — and checks it by creating one. A
//! [`CallCgroup`] is one command's cgroup: created with the limits written, joined by the
//! command's process before it execs bubblewrap (see `limits`), emptied and removed after
//! the call. A kept sandbox gets one too, for all its commands and its helper, joined by
//! bubblewrap and kept until the sandbox ends. Nothing here decides what to do without
//! cgroups; `limits` does.

use std::fs::{self, File};
use std::io;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use nix::sys::signal::{Signal, kill};
use nix::unistd::Pid;

/// Which cgroup interface a directory belongs to.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Version {
    V1,
    V2,
}

/// A controller the local backend limits with.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Controller {
    Pids,
    Memory,
}

impl Controller {
    fn name(self) -> &'static str {
        match self {
            Self::Pids => "pids",
            Self::Memory => "memory",
        }
    }

    /// The file in a child cgroup that proves the controller is active there.
    fn limit_file(self, version: Version) -> &'static str {
        match (self, version) {
            (Self::Pids, _) => "pids.max",
            (Self::Memory, Version::V2) => "memory.max",
            (Self::Memory, Version::V1) => "memory.limit_in_bytes",
        }
    }
}

/// A cgroup directory (this process's own) under which children get a controller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Parent {
    pub(crate) version: Version,
    pub(crate) dir: PathBuf,
}

/// Where each controller can be used; `None`: not on this host, or not writable.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub(crate) struct Cgroups {
    pub(crate) pids: Option<Parent>,
    pub(crate) memory: Option<Parent>,
}

impl Cgroups {
    /// Looks at `/proc/self/cgroup` and `/proc/self/mountinfo`, then tries each candidate
    /// by creating (and removing) a child cgroup in it.
    pub(crate) fn probe() -> Self {
        let (Ok(own), Ok(mounts)) = (
            fs::read_to_string("/proc/self/cgroup"),
            fs::read_to_string("/proc/self/mountinfo"),
        ) else {
            return Self::default();
        };
        let found = candidates(&own, &mounts);
        let pick = |controller: Controller| {
            found
                .iter()
                .filter(|(c, _)| *c == controller)
                .find(|(_, parent)| usable(parent, controller))
                .map(|(_, parent)| parent.clone())
        };
        let cgroups = Self {
            pids: pick(Controller::Pids),
            memory: pick(Controller::Memory),
        };
        for parent in cgroups.pids.iter().chain(&cgroups.memory) {
            remove_stale(&parent.dir);
        }
        cgroups
    }
}

/// Candidate parents, v2 before v1, from the texts of `/proc/self/cgroup` and
/// `/proc/self/mountinfo`.
pub(crate) fn candidates(own: &str, mountinfo: &str) -> Vec<(Controller, Parent)> {
    let mut found = Vec::new();
    for controller in [Controller::Pids, Controller::Memory] {
        for version in [Version::V2, Version::V1] {
            let path = own.lines().find_map(|line| {
                let mut parts = line.splitn(3, ':');
                let (_, list, path) = (parts.next()?, parts.next()?, parts.next()?);
                let wanted = match version {
                    Version::V2 => list.is_empty(),
                    Version::V1 => list.split(',').any(|c| c == controller.name()),
                };
                wanted.then_some(path)
            });
            let Some(path) = path else { continue };
            for mount in mountinfo.lines().filter_map(Mount::parse) {
                let fits = match version {
                    Version::V2 => mount.fstype == "cgroup2",
                    Version::V1 => {
                        mount.fstype == "cgroup"
                            && mount.options.split(',').any(|o| o == controller.name())
                    }
                };
                let inside = path
                    .strip_prefix(mount.root.trim_end_matches('/'))
                    .filter(|rest| rest.is_empty() || rest.starts_with('/'));
                if let (true, Some(inside)) = (fits, inside) {
                    let dir = PathBuf::from(mount.point).join(inside.trim_start_matches('/'));
                    found.push((controller, Parent { version, dir }));
                }
            }
        }
    }
    found
}

/// One line of `/proc/self/mountinfo`, the fields this module needs.
struct Mount {
    root: String,
    point: String,
    fstype: String,
    options: String,
}

impl Mount {
    fn parse(line: &str) -> Option<Self> {
        let (before, after) = line.split_once(" - ")?;
        let mut fields = before.split(' ');
        let root = fields.nth(3)?;
        let point = fields.next()?;
        let mut after = after.split(' ');
        let fstype = after.next()?;
        let options = after.nth(1)?;
        Some(Self {
            root: unescape(root),
            point: unescape(point),
            fstype: fstype.to_owned(),
            options: options.to_owned(),
        })
    }
}

/// mountinfo writes space, tab, newline and backslash as `\ooo` octal escapes.
fn unescape(field: &str) -> String {
    let mut out = Vec::with_capacity(field.len());
    let bytes = field.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        let octal = bytes.get(i + 1..i + 4).and_then(|d| {
            std::str::from_utf8(d)
                .ok()
                .and_then(|d| u8::from_str_radix(d, 8).ok())
        });
        match (bytes[i], octal) {
            (b'\\', Some(byte)) => {
                out.push(byte);
                i += 4;
            }
            (byte, _) => {
                out.push(byte);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// Whether a child of `parent` gets `controller`, enabling it for children on cgroup v2 if
/// needed (which the kernel refuses when the parent itself holds processes and is not a
/// root: then the controller is not usable here).
fn usable(parent: &Parent, controller: Controller) -> bool {
    let probe = parent
        .dir
        .join(format!("toren-probe-{}", std::process::id()));
    let has_controller = || {
        let created = fs::create_dir(&probe).is_ok();
        let ok = created && probe.join(controller.limit_file(parent.version)).exists();
        if created {
            let _ = fs::remove_dir(&probe);
        }
        ok
    };
    if has_controller() {
        return true;
    }
    if parent.version == Version::V2 {
        let enable = format!("+{}", controller.name());
        if fs::write(parent.dir.join("cgroup.subtree_control"), enable).is_ok() {
            return has_controller();
        }
    }
    false
}

/// Removes empty per-call cgroups left by Toren processes that no longer exist. A name
/// holds its creator's PID namespace (`toren-PID-NS-N`): only a process of that namespace
/// can tell whether the pid still runs. Others' (and names of older versions, `toren-PID-N`)
/// are removed once they are older than [`STALE_AFTER`], which no command's just-created,
/// still empty cgroup is. Removing a cgroup that holds processes fails, harmlessly.
fn remove_stale(dir: &Path) {
    let Ok(entries) = fs::read_dir(dir) else {
        return;
    };
    let own_ns = pid_namespace();
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(parts) = name.to_str().and_then(|n| n.strip_prefix("toren-")) else {
            continue;
        };
        let parts: Vec<&str> = parts.split('-').collect();
        let gone = match parts.as_slice() {
            [pid, ns, _] if *ns == own_ns && own_ns != "unknown" => pid
                .parse()
                .is_ok_and(|pid| kill(Pid::from_raw(pid), None) == Err(nix::errno::Errno::ESRCH)),
            [_, _, _] => false,
            [pid, ..] => !Path::new("/proc").join(pid).exists(),
            [] => false,
        };
        let old = || {
            entry
                .metadata()
                .and_then(|m| m.modified())
                .is_ok_and(|t| t.elapsed().is_ok_and(|age| age > STALE_AFTER))
        };
        if gone || old() {
            let _ = fs::remove_dir(entry.path());
        }
    }
}

/// The inode of this process's PID namespace (`/proc/self/ns/pid` reads
/// `pid:[4026531836]`), or `unknown`.
fn pid_namespace() -> String {
    fs::read_link("/proc/self/ns/pid")
        .ok()
        .and_then(|link| {
            let link = link.to_string_lossy().into_owned();
            let inode = link.strip_prefix("pid:[")?.strip_suffix(']')?;
            inode
                .bytes()
                .all(|b| b.is_ascii_digit())
                .then(|| inode.to_owned())
        })
        .unwrap_or_else(|| "unknown".to_owned())
}

/// Limit hits counted by a cgroup.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    /// Processes the OOM killer killed.
    pub(crate) oom_kills: u64,
    /// Forks refused at the process limit.
    pub(crate) pids_max: u64,
}

impl Counters {
    /// What was counted since `earlier`.
    pub(crate) fn since(self, earlier: Self) -> Self {
        Self {
            oom_kills: self.oom_kills.saturating_sub(earlier.oom_kills),
            pids_max: self.pids_max.saturating_sub(earlier.pids_max),
        }
    }
}

/// One command's cgroups (one per hierarchy in use), limits written; or a kept sandbox's.
#[derive(Debug)]
pub(crate) struct CallCgroup {
    dirs: Vec<(Version, PathBuf)>,
}

static NEXT_CALL: AtomicU64 = AtomicU64::new(1);

/// After this long an empty per-call cgroup is a leftover whoever made it.
const STALE_AFTER: Duration = Duration::from_secs(15 * 60);

impl CallCgroup {
    /// Creates the command's cgroups under `cgroups` with the limits written. Returns the
    /// cgroups and their `cgroup.procs` files, opened for the command's process to join.
    pub(crate) fn create(
        cgroups: &Cgroups,
        pids: u32,
        memory: u64,
    ) -> io::Result<(Self, Vec<File>)> {
        // Unique among live processes: Toren processes in other PID namespaces (containers,
        // `unshare`) may have the same pid. A name already taken is a leftover of a killed
        // process that had our pid: skip it.
        let pid_ns = pid_namespace();
        for _ in 0..100 {
            let n = NEXT_CALL.fetch_add(1, Ordering::Relaxed);
            let name = format!("toren-{}-{pid_ns}-{n}", std::process::id());
            match Self::create_named(&name, cgroups, pids, memory) {
                Err(e) if e.kind() == io::ErrorKind::AlreadyExists => {}
                other => return other,
            }
        }
        Err(io::Error::new(
            io::ErrorKind::AlreadyExists,
            "every per-call cgroup name tried was taken",
        ))
    }

    fn create_named(
        name: &str,
        cgroups: &Cgroups,
        pids: u32,
        memory: u64,
    ) -> io::Result<(Self, Vec<File>)> {
        let mut call = Self { dirs: Vec::new() };
        let mut wanted: Vec<(&Parent, Controller)> = Vec::new();
        if let Some(parent) = &cgroups.pids {
            wanted.push((parent, Controller::Pids));
        }
        if let Some(parent) = &cgroups.memory {
            wanted.push((parent, Controller::Memory));
        }
        for (parent, controller) in wanted {
            let dir = parent.dir.join(name);
            if !call.dirs.iter().any(|(_, d)| *d == dir) {
                fs::create_dir(&dir)?;
                call.dirs.push((parent.version, dir.clone()));
            }
            match controller {
                Controller::Pids => fs::write(dir.join("pids.max"), pids.to_string())?,
                Controller::Memory => write_memory(parent.version, &dir, memory)?,
            }
        }
        let procs = call
            .dirs
            .iter()
            .map(|(_, dir)| File::options().write(true).open(dir.join("cgroup.procs")))
            .collect::<io::Result<Vec<_>>>()?;
        Ok((call, procs))
    }

    /// Whether the memory limit killed a process, and whether a fork was refused for the
    /// process limit, during this call.
    pub(crate) fn events(&self) -> (bool, bool) {
        let counters = self.counters();
        (counters.oom_kills > 0, counters.pids_max > 0)
    }

    /// How often, since the cgroups were made, the memory limit killed a process and a
    /// fork was refused for the process limit.
    pub(crate) fn counters(&self) -> Counters {
        let mut counters = Counters::default();
        for (version, dir) in &self.dirs {
            let counter = |file: &str, key: &str| {
                fs::read_to_string(dir.join(file))
                    .ok()
                    .and_then(|text| {
                        text.lines().find_map(|line| {
                            let (k, v) = line.split_once(' ')?;
                            (k == key).then(|| v.trim().parse::<u64>().ok()).flatten()
                        })
                    })
                    .unwrap_or(0)
            };
            counters.pids_max += counter("pids.events", "max");
            counters.oom_kills += match version {
                Version::V2 => counter("memory.events", "oom_kill"),
                Version::V1 => counter("memory.oom_control", "oom_kill"),
            };
        }
        counters
    }

    /// Kills whatever is left in the cgroups and removes them, waiting up to a second or
    /// two for the kernel to let go of the dead.
    pub(crate) async fn finish(mut self) {
        for _ in 0..100 {
            if self.try_remove() {
                return;
            }
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
        tracing::warn!(dirs = ?self.dirs, "a sandbox cgroup could not be removed yet");
    }

    /// SIGKILL to every process in the cgroups (a kept sandbox's bubblewrap, its helper,
    /// whose death ends the sandbox's pid namespace, and every command).
    pub(crate) fn kill(&self) {
        for (_, dir) in &self.dirs {
            for pid in members(dir) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
        }
    }

    /// One round of killing and removing; true once every cgroup is gone.
    fn try_remove(&mut self) -> bool {
        self.dirs.retain(|(_, dir)| {
            for pid in members(dir) {
                let _ = kill(Pid::from_raw(pid), Signal::SIGKILL);
            }
            fs::remove_dir(dir).is_err() && dir.exists()
        });
        self.dirs.is_empty()
    }
}

impl Drop for CallCgroup {
    /// A call abandoned half-way (its future dropped) still kills what it started; the
    /// empty cgroup is removed now or by a later [`Cgroups::probe`].
    fn drop(&mut self) {
        self.try_remove();
    }
}

fn write_memory(version: Version, dir: &Path, bytes: u64) -> io::Result<()> {
    let bytes = bytes.to_string();
    match version {
        Version::V2 => {
            fs::write(dir.join("memory.max"), &bytes)?;
            // No swap either, where the kernel accounts it.
            let _ = fs::write(dir.join("memory.swap.max"), "0");
        }
        Version::V1 => {
            fs::write(dir.join("memory.limit_in_bytes"), &bytes)?;
            let _ = fs::write(dir.join("memory.memsw.limit_in_bytes"), &bytes);
        }
    }
    Ok(())
}

/// The pids in a cgroup (as this process's pid namespace numbers them).
fn members(dir: &Path) -> Vec<i32> {
    fs::read_to_string(dir.join("cgroup.procs"))
        .map(|text| text.lines().filter_map(|l| l.trim().parse().ok()).collect())
        .unwrap_or_default()
}

#[cfg(test)]
#[path = "cgroup_tests.rs"]
mod tests;
