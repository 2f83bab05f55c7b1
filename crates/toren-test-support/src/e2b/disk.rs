//! A fake sandbox's disk and how its processes start: a temp dir whose `workspace`, `home`
//! and `tmp` are what the sandbox sees at `/workspace`, `/home/user` and `/tmp`; every
//! process a bubblewrap sandbox over them (host `/usr` and `/etc` read-only, no network
//! unless allowed). The sandbox is one machine for its processes: a kept bubblewrap (the
//! *keeper*, made with the disk) holds the sandbox's own user and PID namespaces, and every
//! process joins them (`--userns` / `--pidns`), so the sandbox's processes see and signal
//! each other and nothing of the host, and killing the keeper's init (PID 1 there) ends
//! them all, as a VM's end does. The pid envd reports is the command's pid in the sandbox;
//! the host pid is learnt from bwrap's `--info-fd` through a FIFO.

use std::path::{Path, PathBuf};
use std::process::Stdio;

/// The places of a sandbox's filesystem that live on its own disk.
const MOUNTS: &[(&str, &str)] = &[
    ("/workspace", "workspace"),
    ("/home/user", "home"),
    ("/tmp", "tmp"),
];

/// One sandbox's disk.
#[derive(Debug)]
pub struct Disk {
    root: PathBuf,
    /// The host pid of the keeper's init: PID 1 of the sandbox's PID namespace.
    init: u32,
    /// Whether it was killed (its pid may be reused after that: it is never signalled
    /// again).
    stopped: std::sync::atomic::AtomicBool,
}

impl Disk {
    /// Makes the disk and starts the sandbox's keeper.
    pub(crate) fn create(root: PathBuf) -> std::io::Result<Self> {
        for (_, dir) in MOUNTS {
            std::fs::create_dir_all(root.join(dir))?;
        }
        std::fs::create_dir_all(root.join("run"))?;
        let fifo = root.join("run").join("keeper-info");
        let _ = std::fs::remove_file(&fifo);
        nix::unistd::mkfifo(&fifo, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .map_err(std::io::Error::from)?;
        let mut keeper = vec![
            "--unshare-user".to_owned(),
            "--unshare-pid".to_owned(),
            "--die-with-parent".to_owned(),
        ];
        keeper.extend(image());
        keeper.extend(["--", "sleep", "infinity"].map(str::to_owned));
        let mut child = std::process::Command::new("/bin/sh")
            .arg("-c")
            .arg(r#"f=$1; shift; exec bwrap --info-fd 3 "$@" 3>"$f""#)
            .arg("sh")
            .arg(&fifo)
            .args(&keeper)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        // Blocks until bwrap wrote its info (it does before it starts `sleep`), or died.
        let text = std::fs::read_to_string(&fifo);
        let _ = std::fs::remove_file(&fifo);
        let init = text.ok().and_then(|t| child_pid(&t));
        let Some(init) = init else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other("the sandbox's keeper did not start"));
        };
        // The keeper's outer bwrap is reaped by a thread: it ends when the sandbox does.
        std::thread::spawn(move || child.wait());
        Ok(Self {
            root,
            init,
            stopped: std::sync::atomic::AtomicBool::new(false),
        })
    }

    /// Ends the machine: kills the keeper's init, and with it every process in the
    /// sandbox's PID namespace.
    pub(crate) fn stop(&self) {
        if self.stopped.swap(true, std::sync::atomic::Ordering::SeqCst) {
            return;
        }
        if let Ok(pid) = i32::try_from(self.init) {
            let _ = nix::sys::signal::kill(
                nix::unistd::Pid::from_raw(pid),
                nix::sys::signal::Signal::SIGKILL,
            );
        }
    }

    /// The host path holding what the sandbox sees at `/workspace`.
    pub fn workspace(&self) -> PathBuf {
        self.root.join("workspace")
    }

    /// The host path of the sandbox path `path` (absolute; `~` and relative paths are
    /// taken from `/home/user`, as envd does); `writable` is false for the host's own
    /// read-only image.
    pub fn host_path(&self, path: &str) -> Option<(PathBuf, bool)> {
        let path = if let Some(rest) = path.strip_prefix('~') {
            format!("/home/user{rest}")
        } else if path.starts_with('/') {
            path.to_owned()
        } else {
            format!("/home/user/{path}")
        };
        if path.split('/').any(|part| part == "..") {
            return None;
        }
        for (inside, dir) in MOUNTS {
            if path == *inside {
                return Some((self.root.join(dir), true));
            }
            if let Some(rest) = path.strip_prefix(&format!("{inside}/")) {
                return Some((self.root.join(dir).join(rest), true));
            }
        }
        Some((PathBuf::from(path), false))
    }

    /// A command that starts `cmd args` in the sandbox with exactly `env`, as root or as an
    /// unprivileged user, writing
    /// bwrap's info (the command's pid) to `info` (a FIFO).
    pub(crate) fn command(
        &self,
        cmd: &str,
        args: &[String],
        env: &[(String, String)],
        cwd: &str,
        who: Who,
        info: &Path,
    ) -> tokio::process::Command {
        let mut bwrap: Vec<String> = vec![
            "bwrap".into(),
            "--info-fd".into(),
            "3".into(),
            "--userns".into(),
            "5".into(),
            "--pidns".into(),
            "6".into(),
            "--die-with-parent".into(),
        ];
        bwrap.extend(image());
        for (inside, dir) in MOUNTS {
            let host = self.root.join(dir).display().to_string();
            bwrap.extend(["--bind".into(), host, (*inside).to_owned()]);
        }
        if !who.root {
            // Any user but root is an ordinary user of the VM: no capabilities (no raw
            // sockets, no mounts, no device nodes).
            bwrap.extend(["--cap-drop".into(), "ALL".into()]);
        }
        if !who.internet {
            bwrap.push("--unshare-net".into());
        }
        bwrap.extend([
            "--chdir".into(),
            cwd.to_owned(),
            "--".into(),
            cmd.to_owned(),
        ]);
        bwrap.extend(args.iter().cloned());
        // The shell opens the FIFO as descriptor 3 and the keeper's namespaces as 5 and
        // 6 (`sh` takes one-digit descriptors only), and becomes bwrap, which writes its
        // info there before it starts the command.
        let ns = format!("/proc/{}/ns", self.init);
        let mut command = tokio::process::Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(r#"f=$1; n=$2; shift 2; exec "$@" 3>"$f" 5<"$n/user" 6<"$n/pid""#)
            .arg("sh")
            .arg(info)
            .arg(ns)
            .args(&bwrap)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .kill_on_drop(false);
        command
    }

    /// A FIFO for one process's info, fresh.
    pub(crate) fn info_fifo(&self, n: u64) -> std::io::Result<PathBuf> {
        let path = self.root.join("run").join(format!("info-{n}"));
        let _ = std::fs::remove_file(&path);
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .map_err(std::io::Error::from)?;
        Ok(path)
    }
}

/// What a process may do: reach the internet (the sandbox's `allow_internet_access`), and
/// hold root's capabilities (it runs as root).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Who {
    pub(crate) internet: bool,
    pub(crate) root: bool,
}

impl Drop for Disk {
    fn drop(&mut self) {
        self.stop();
    }
}

/// The host's read-only image every process of a sandbox sees, and its `/proc` and `/dev`.
fn image() -> Vec<String> {
    let mut argv = Vec::new();
    for dir in ["/usr", "/etc"] {
        argv.extend(["--ro-bind".into(), dir.into(), dir.into()]);
    }
    for link in ["bin", "lib", "lib64", "sbin"] {
        if std::fs::read_link(format!("/{link}")).is_ok() {
            argv.extend([
                "--symlink".into(),
                format!("usr/{link}"),
                format!("/{link}"),
            ]);
        }
    }
    argv.extend(["--proc", "/proc", "--dev", "/dev"].map(str::to_owned));
    argv
}

fn child_pid(info: &str) -> Option<u32> {
    let value: serde_json::Value = serde_json::from_str(info).ok()?;
    u32::try_from(value.get("child-pid")?.as_u64()?).ok()
}

/// A started process: its pid on the host and in the sandbox.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Pid {
    pub(crate) host: u32,
    pub(crate) inside: u32,
}

/// Reads the command's pids from bwrap's info on `fifo` (blocks until bwrap wrote it) and
/// the host's `/proc/<pid>/status` (`NSpid`: the last is the sandbox's).
pub(crate) async fn read_pid(fifo: PathBuf) -> Option<Pid> {
    let text = tokio::task::spawn_blocking(move || {
        let text = std::fs::read_to_string(&fifo).ok();
        let _ = std::fs::remove_file(&fifo);
        text
    })
    .await
    .ok()??;
    let host = child_pid(&text)?;
    // A command that already ended (and was reaped) has no status left: its pid is then
    // of no use to anyone, and 0 is reported.
    let inside = std::fs::read_to_string(format!("/proc/{host}/status"))
        .ok()
        .and_then(|status| {
            status
                .lines()
                .find_map(|l| l.strip_prefix("NSpid:"))?
                .split_whitespace()
                .last()?
                .parse()
                .ok()
        })
        .unwrap_or(0);
    Some(Pid { host, inside })
}
