//! The processes of a fleet case: a temporary home (the scripted agent, a `TOREN_HOME`
//! that SQLite's database lives in, or a Postgres database's URL), the API-only front
//! (`toren serve --workers 0`, on a loopback port it picks itself) through which runs are
//! created, and `toren worker` processes that drive them. Every process gets a cleared
//! environment plus exactly what the case sets; stderr goes to a file per process in the
//! home, whose tail explains a failure.

use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};

use super::workload::Workload;

/// The bearer token of the front.
pub(crate) const TOKEN: &str = "toren-bench-fleet";
/// How long the front may take to say its address.
const START: Duration = Duration::from_secs(60);
/// How long a process may take to exit after SIGTERM before it is killed.
const STOP: Duration = Duration::from_secs(30);

/// Where the case's processes keep their state, and which store they share.
pub(crate) struct Home {
    dir: TempDir,
    workload: Workload,
    /// A Postgres database (`TOREN_QUEUE=postgres`); `None`: SQLite in `TOREN_HOME`.
    database: Option<String>,
}

impl Home {
    pub(crate) fn new(workload: Workload, database: Option<String>) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("toren-bench-fleet-")
            .tempdir()
            .context("cannot make a temporary TOREN_HOME")?;
        let agents = dir.path().join("agents");
        std::fs::create_dir_all(&agents).context("cannot make the agents directory")?;
        for (name, content) in workload.files() {
            std::fs::write(agents.join(&name), content)
                .with_context(|| format!("cannot write agents/{name}"))?;
        }
        Ok(Self {
            dir,
            workload,
            database,
        })
    }

    fn command(&self, toren: &Path, args: &[&str], log: &str) -> anyhow::Result<Command> {
        let root = self.dir.path();
        let stderr =
            std::fs::File::create(root.join(log)).with_context(|| format!("cannot make {log}"))?;
        let mut command = Command::new(toren);
        command
            .args(args)
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", root.join("home"))
            .env("TOREN_HOME", root.join("toren"))
            .env("TOREN_AGENTS", root.join("agents"))
            .env("TOREN_SANDBOX", self.workload.sandbox())
            .env("TOREN_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(stderr)
            .kill_on_drop(true);
        if let Some(url) = &self.database {
            command
                .env("TOREN_DATABASE_URL", url)
                .env("TOREN_QUEUE", "postgres");
        }
        Ok(command)
    }

    /// The last lines of the process log `name`.
    pub(crate) fn tail(&self, name: &str) -> String {
        let text = std::fs::read_to_string(self.dir.path().join(name)).unwrap_or_default();
        let lines: Vec<&str> = text.lines().collect();
        lines[lines.len().saturating_sub(20)..].join("\n")
    }

    /// How many warning or error lines the processes of this home logged.
    pub(crate) fn warnings(&self) -> usize {
        let Ok(entries) = std::fs::read_dir(self.dir.path()) else {
            return 0;
        };
        entries
            .flatten()
            .filter(|e| e.path().extension().is_some_and(|x| x == "log"))
            .map(|e| {
                std::fs::read_to_string(e.path())
                    .unwrap_or_default()
                    .lines()
                    .filter(|l| l.contains("WARN") || l.contains("ERROR") || l.contains("error:"))
                    .count()
            })
            .sum()
    }

    pub(crate) fn path(&self) -> PathBuf {
        self.dir.path().to_owned()
    }
}

/// `toren serve --workers 0`, and its base URL.
pub(crate) struct Front {
    child: Child,
    pub(crate) base: String,
}

impl Front {
    pub(crate) async fn start(toren: &Path, home: &Home) -> anyhow::Result<Self> {
        let mut command = home.command(toren, &["serve", "--workers", "0"], "front.log")?;
        // The address comes from its stderr, so that one is read here (and kept in the log).
        command
            .env("TOREN_API_ADDR", "127.0.0.1:0")
            .env("TOREN_API_TOKEN", TOKEN)
            .stderr(Stdio::piped());
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start {}", toren.display()))?;
        let stderr = child.stderr.take().context("toren serve has no stderr")?;
        let log = home.path().join("front.log");
        let (tx, rx) = tokio::sync::oneshot::channel();
        tokio::spawn(async move {
            let mut tx = Some(tx);
            let mut kept = String::new();
            let mut lines = BufReader::new(stderr).lines();
            while let Ok(Some(line)) = lines.next_line().await {
                if let Some(rest) = line.split("listening on http://").nth(1)
                    && let Some(tx) = tx.take()
                {
                    let _ = tx.send(
                        rest.split_whitespace()
                            .next()
                            .unwrap_or_default()
                            .to_owned(),
                    );
                }
                kept.push_str(&line);
                kept.push('\n');
                let _ = tokio::fs::write(&log, &kept).await;
            }
        });
        let addr = tokio::select! {
            addr = rx => addr.ok(),
            () = tokio::time::sleep(START) => None,
        };
        let Some(addr) = addr else {
            let _ = child.start_kill();
            bail!(
                "toren serve --workers 0 did not say where it listens within {START:?}; its stderr:\n{}",
                home.tail("front.log")
            );
        };
        Ok(Self {
            child,
            base: format!("http://{addr}"),
        })
    }

    pub(crate) async fn stop(self) -> anyhow::Result<()> {
        stop(vec![self.child]).await
    }
}

/// Starts `n` `toren worker --concurrency <concurrency>` processes with ids `bench-w<k>`.
pub(crate) fn workers(
    toren: &Path,
    home: &Home,
    n: usize,
    concurrency: usize,
) -> anyhow::Result<Vec<Child>> {
    (0..n)
        .map(|k| {
            let mut command = home.command(
                toren,
                &["worker", "--concurrency", &concurrency.to_string()],
                &format!("worker-{k}.log"),
            )?;
            command.env("TOREN_WORKER_ID", format!("bench-w{k}"));
            command
                .spawn()
                .with_context(|| format!("cannot start {} worker", toren.display()))
        })
        .collect()
}

/// Whether any of `children` has exited (a worker that died under load).
pub(crate) fn exited(children: &mut [Child]) -> Option<std::process::ExitStatus> {
    children
        .iter_mut()
        .find_map(|c| c.try_wait().ok().flatten())
}

/// SIGTERM to each, then waits (killing what has not exited within [`STOP`]).
pub(crate) async fn stop(children: Vec<Child>) -> anyhow::Result<()> {
    for child in &children {
        if let Some(pid) = child.id() {
            let pid = nix::unistd::Pid::from_raw(i32::try_from(pid).context("a pid_t")?);
            let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM);
        }
    }
    let mut late = 0;
    for mut child in children {
        if tokio::time::timeout(STOP, child.wait()).await.is_err() {
            let _ = child.start_kill();
            let _ = child.wait().await;
            late += 1;
        }
    }
    if late > 0 {
        bail!("{late} processes did not exit within {STOP:?} of SIGTERM");
    }
    Ok(())
}

/// CPU seconds (user + system, its reaped children's included) process `pid` has used.
pub(crate) fn cpu_seconds(pid: u32) -> f64 {
    std::fs::read_to_string(format!("/proc/{pid}/stat")).map_or(0.0, |stat| parse_cpu(&stat))
}

/// CPU seconds of every process named `postgres` now (the cluster's server processes:
/// the backends serving the workers' connections, the WAL writer, the checkpointer).
pub(crate) fn postgres_cpu_seconds() -> f64 {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return 0.0;
    };
    entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .bytes()
                .all(|b| b.is_ascii_digit())
        })
        .filter_map(|e| std::fs::read_to_string(e.path().join("stat")).ok())
        .filter(|stat| stat.contains("(postgres)"))
        .map(|stat| parse_cpu(&stat))
        .sum()
}

/// utime + stime + cutime + cstime of a `/proc/<pid>/stat` line, in seconds.
fn parse_cpu(stat: &str) -> f64 {
    // The command name may hold spaces; the fields after its closing parenthesis are
    // numbered from 3 (state).
    let Some((_, rest)) = stat.rsplit_once(')') else {
        return 0.0;
    };
    let fields: Vec<&str> = rest.split_whitespace().collect();
    let ticks: u64 = (11..15)
        .filter_map(|i| fields.get(i)?.parse::<u64>().ok())
        .sum();
    let per_s = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
        .ok()
        .flatten()
        .filter(|t| *t > 0)
        .unwrap_or(100);
    ticks as f64 / per_s as f64
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_time_is_read_past_a_command_name_with_spaces() {
        // pid (comm) state ppid pgrp session tty tpgid flags minflt cminflt majflt cmajflt
        // utime stime cutime cstime ...
        let stat = "42 (post gres) S 1 42 42 0 -1 0 0 0 0 0 150 50 30 20 20 0 1 0 0";
        let per_s = nix::unistd::sysconf(nix::unistd::SysconfVar::CLK_TCK)
            .ok()
            .flatten()
            .unwrap_or(100) as f64;
        assert!((parse_cpu(stat) - 250.0 / per_s).abs() < 1e-9);
        assert!(cpu_seconds(std::process::id()) >= 0.0);
        assert!(parse_cpu("garbage").abs() < 1e-9);
    }
}
