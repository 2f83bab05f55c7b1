//! A fake sandbox's disk and how its processes start: a temp dir whose `workspace`, `home`
//! and `tmp` are what the sandbox sees at `/workspace`, `/home/user` and `/tmp`; every
//! process a bubblewrap sandbox over them (host `/usr` and `/etc` read-only, no network
//! unless allowed, no PID namespace so that the sandbox's processes can signal each other
//! as in one VM). The pid envd reports is the command's own, learnt from bwrap's
//! `--info-fd` through a FIFO.

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
}

impl Disk {
    pub(crate) fn create(root: PathBuf) -> std::io::Result<Self> {
        for (_, dir) in MOUNTS {
            std::fs::create_dir_all(root.join(dir))?;
        }
        std::fs::create_dir_all(root.join("run"))?;
        Ok(Self { root })
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

    /// A command that starts `cmd args` in the sandbox with exactly `env`, writing
    /// bwrap's info (the command's pid) to `info` (a FIFO).
    pub(crate) fn command(
        &self,
        cmd: &str,
        args: &[String],
        env: &[(String, String)],
        cwd: &str,
        internet: bool,
        info: &Path,
    ) -> tokio::process::Command {
        let mut bwrap: Vec<String> = vec![
            "bwrap".into(),
            "--info-fd".into(),
            "3".into(),
            "--die-with-parent".into(),
        ];
        for dir in ["/usr", "/etc"] {
            bwrap.extend(["--ro-bind".into(), dir.into(), dir.into()]);
        }
        for link in ["bin", "lib", "lib64", "sbin"] {
            if std::fs::read_link(format!("/{link}")).is_ok() {
                bwrap.extend([
                    "--symlink".into(),
                    format!("usr/{link}"),
                    format!("/{link}"),
                ]);
            }
        }
        bwrap.extend([
            "--proc".into(),
            "/proc".into(),
            "--dev".into(),
            "/dev".into(),
        ]);
        for (inside, dir) in MOUNTS {
            let host = self.root.join(dir).display().to_string();
            bwrap.extend(["--bind".into(), host, (*inside).to_owned()]);
        }
        if !internet {
            bwrap.push("--unshare-net".into());
        }
        bwrap.extend([
            "--chdir".into(),
            cwd.to_owned(),
            "--".into(),
            cmd.to_owned(),
        ]);
        bwrap.extend(args.iter().cloned());
        // The shell opens the FIFO as descriptor 3 and becomes bwrap, which writes its
        // info there before it starts the command.
        let mut command = tokio::process::Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(r#"f=$1; shift; exec "$@" 3>"$f""#)
            .arg("sh")
            .arg(info)
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

/// Reads the command's pid from bwrap's info on `fifo` (blocks until bwrap wrote it).
pub(crate) async fn read_pid(fifo: PathBuf) -> Option<u32> {
    let text = tokio::task::spawn_blocking(move || {
        let text = std::fs::read_to_string(&fifo).ok();
        let _ = std::fs::remove_file(&fifo);
        text
    })
    .await
    .ok()??;
    let value: serde_json::Value = serde_json::from_str(&text).ok()?;
    u32::try_from(value.get("child-pid")?.as_u64()?).ok()
}
