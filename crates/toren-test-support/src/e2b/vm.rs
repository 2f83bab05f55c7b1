//! The size of a fake sandbox's machine. A real E2B sandbox is a VM: whatever runs in it
//! has the VM's memory (512 MiB for the `base` template), its process table and its disk,
//! and no more. The fake's sandboxes share this host, so each gets the same kind of bound
//! where the host allows it: a cgroup of its own with [`MEMORY`] and [`PIDS`] (every
//! process of the sandbox joins it before it becomes bubblewrap), and, when a test asks
//! for it ([`super::FakeE2b::set_disk_size`]), a tmpfs of that size as its disk. A fork
//! bomb or a memory hog then hits the sandbox's bound, not the host's, as in a VM.

use std::io;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The memory of a fake sandbox: E2B's `base` template's RAM.
pub const MEMORY: u64 = 512 * 1024 * 1024;
/// The processes and threads a fake sandbox may hold at once.
pub const PIDS: u32 = 512;

/// One sandbox's bounds: its cgroups (removed when the machine stops) and its disk's
/// mount (removed when the disk is dropped).
#[derive(Debug, Default)]
pub(crate) struct Bounds {
    cgroups: Vec<PathBuf>,
    memory: bool,
    pids: bool,
    mount: Option<PathBuf>,
}

impl Bounds {
    /// Bounds for the sandbox `name` whose disk is `root` (made here): a cgroup with the
    /// memory and process limits where this host lets one be made, and a tmpfs of
    /// `disk_size` bytes at `root` if asked (an error if it cannot be mounted).
    pub(crate) fn new(root: &Path, name: &str, disk_size: Option<u64>) -> io::Result<Self> {
        std::fs::create_dir_all(root)?;
        let mut bounds = Self::default();
        if let Some(size) = disk_size {
            let out = Command::new("mount")
                .args(["-t", "tmpfs", "-o"])
                .arg(format!("size={size},mode=0755"))
                .arg("tmpfs")
                .arg(root)
                .stdin(Stdio::null())
                .output()?;
            if !out.status.success() {
                return Err(io::Error::other(format!(
                    "cannot mount the sandbox's disk: {}",
                    String::from_utf8_lossy(&out.stderr).trim()
                )));
            }
            bounds.mount = Some(root.to_owned());
        }
        for (controller, file, limit) in [
            ("memory", "memory.limit_in_bytes", MEMORY.to_string()),
            ("memory", "memory.max", MEMORY.to_string()),
            ("pids", "pids.max", PIDS.to_string()),
        ] {
            let done = if controller == "memory" {
                bounds.memory
            } else {
                bounds.pids
            };
            if done {
                continue;
            }
            let Some(parent) = parent_dir(controller) else {
                continue;
            };
            remove_stale(&parent);
            let dir = parent.join(format!("fake-e2b-{}-{name}", std::process::id()));
            if !dir.is_dir() && std::fs::create_dir(&dir).is_err() {
                continue;
            }
            if std::fs::write(dir.join(file), &limit).is_ok() {
                if controller == "memory" {
                    bounds.memory = true;
                } else {
                    bounds.pids = true;
                }
                if !bounds.cgroups.contains(&dir) {
                    bounds.cgroups.push(dir);
                }
            } else if !bounds.cgroups.contains(&dir) {
                let _ = std::fs::remove_dir(&dir);
            }
        }
        Ok(bounds)
    }

    /// Whether memory and processes are both bounded.
    pub(crate) fn bounded(&self) -> bool {
        self.memory && self.pids
    }

    /// The `cgroup.procs` files a process of the sandbox writes its pid to, space-separated
    /// (cgroup paths hold no spaces); empty when unbounded.
    pub(crate) fn procs_files(&self) -> String {
        self.cgroups
            .iter()
            .map(|d| d.join("cgroup.procs").display().to_string())
            .collect::<Vec<_>>()
            .join(" ")
    }

    /// Removes the cgroups once the processes in them are gone (the machine was just
    /// killed: they go within moments), on a thread of its own that tries for a few seconds.
    pub(crate) fn release_cgroups(&mut self) {
        let dirs = std::mem::take(&mut self.cgroups);
        if dirs.is_empty() {
            return;
        }
        let _ = std::thread::Builder::new()
            .name("fake-e2b-cgroups".into())
            .spawn(move || {
                let deadline = Instant::now() + Duration::from_secs(5);
                let mut left = dirs;
                while !left.is_empty() && Instant::now() < deadline {
                    left.retain(|dir| std::fs::remove_dir(dir).is_err() && dir.exists());
                    std::thread::sleep(Duration::from_millis(50));
                }
            });
    }
}

impl Drop for Bounds {
    fn drop(&mut self) {
        self.release_cgroups();
        if let Some(root) = self.mount.take() {
            let _ = Command::new("umount")
                .arg("-l")
                .arg(&root)
                .stdin(Stdio::null())
                .stdout(Stdio::null())
                .stderr(Stdio::null())
                .status();
        }
    }
}

/// Removes the empty cgroups that fakes of processes no longer running left under `parent`
/// (a process that exits with sandboxes alive never stops them); a cgroup that still holds
/// a process is not removed (the kernel refuses).
fn remove_stale(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for entry in entries.flatten() {
        let name = entry.file_name();
        let Some(rest) = name.to_str().and_then(|n| n.strip_prefix("fake-e2b-")) else {
            continue;
        };
        let owner = rest.split('-').next().and_then(|p| p.parse::<u32>().ok());
        if owner.is_some_and(|pid| !Path::new(&format!("/proc/{pid}")).exists()) {
            let _ = std::fs::remove_dir(entry.path());
        }
    }
}

/// This process's own cgroup directory for `controller` (v1: its hierarchy; v2: the
/// unified tree, if the controller is enabled for children there).
fn parent_dir(controller: &str) -> Option<PathBuf> {
    let own = std::fs::read_to_string("/proc/self/cgroup").ok()?;
    for line in own.lines() {
        let mut parts = line.splitn(3, ':');
        let (_, controllers, path) = (parts.next()?, parts.next()?, parts.next()?);
        let path = path.trim_start_matches('/');
        if controllers.split(',').any(|c| c == controller) {
            let dir = Path::new("/sys/fs/cgroup").join(controllers).join(path);
            if dir.is_dir() {
                return Some(dir);
            }
        } else if controllers.is_empty() {
            let dir = Path::new("/sys/fs/cgroup").join(path);
            let enabled = std::fs::read_to_string(dir.join("cgroup.subtree_control"))
                .is_ok_and(|c| c.split_whitespace().any(|c| c == controller));
            if enabled {
                return Some(dir);
            }
        }
    }
    None
}

/// Whether this host lets the fake bound its sandboxes' memory and processes (probed once,
/// by making and removing one sandbox's cgroups).
pub fn available() -> bool {
    static AVAILABLE: std::sync::OnceLock<bool> = std::sync::OnceLock::new();
    *AVAILABLE.get_or_init(|| {
        let Ok(dir) = tempfile::tempdir() else {
            return false;
        };
        let name = format!("probe-{}", std::process::id());
        Bounds::new(&dir.path().join("disk"), &name, None).is_ok_and(|b| b.bounded())
    })
}
