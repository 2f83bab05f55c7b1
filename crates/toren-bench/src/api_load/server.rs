//! The server under load: a fresh temporary `TOREN_HOME` with the scripted agent, one
//! `toren serve` process in it on a loopback port it picks itself (`TOREN_API_ADDR=
//! 127.0.0.1:0`, the address read from its "listening on http://ADDR" line), its memory,
//! threads and file descriptors sampled from `/proc`, and its SIGTERM shutdown.

use std::collections::VecDeque;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use anyhow::{Context as _, bail};
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

use super::agent::Agent;
use crate::cli::SandboxKind;

/// The bearer token of the server under load.
pub(crate) const TOKEN: &str = "toren-bench-token";
/// How long the server may take to say its address.
const START: Duration = Duration::from_secs(60);
/// How long stderr may stay open after the server exited.
const CLOSE: Duration = Duration::from_secs(5);
/// How many of the server's last stderr lines are kept to explain a failure.
const TAIL: usize = 40;

/// A temporary Toren home: `agents/` with the benchmark's agent, `toren/` as TOREN_HOME.
pub(crate) struct Home {
    dir: TempDir,
}

impl Home {
    pub(crate) fn new(agent: &Agent) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("toren-bench-")
            .tempdir()
            .context("cannot make a temporary TOREN_HOME")?;
        let agents = dir.path().join("agents");
        std::fs::create_dir_all(&agents).context("cannot make the agents directory")?;
        for (name, content) in agent.files() {
            std::fs::write(agents.join(&name), content)
                .with_context(|| format!("cannot write agents/{name}"))?;
        }
        Ok(Self { dir })
    }

    pub(crate) fn path(&self) -> &Path {
        self.dir.path()
    }

    /// Keeps the directory on disk (for a look at its database) and returns where it is.
    pub(crate) fn keep(self) -> PathBuf {
        self.dir.keep()
    }
}

/// What `/proc/<pid>/status` and `/proc/<pid>/fd` say of the server at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Sample {
    /// VmRSS: resident memory now, KiB.
    pub(crate) rss_kib: u64,
    /// VmHWM: the peak resident memory since the process started, KiB.
    pub(crate) hwm_kib: u64,
    pub(crate) threads: u64,
    pub(crate) fds: u64,
}

impl Sample {
    /// The larger of each figure.
    pub(crate) fn max(self, other: Self) -> Self {
        Self {
            rss_kib: self.rss_kib.max(other.rss_kib),
            hwm_kib: self.hwm_kib.max(other.hwm_kib),
            threads: self.threads.max(other.threads),
            fds: self.fds.max(other.fds),
        }
    }
}

/// Reads the figures of `status` (the text of `/proc/<pid>/status`); `fds` is counted
/// separately.
pub(crate) fn parse_status(status: &str, fds: u64) -> Sample {
    let field = |name: &str| {
        status
            .lines()
            .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
            .and_then(|v| v.split_whitespace().next()?.parse().ok())
            .unwrap_or(0)
    };
    Sample {
        rss_kib: field("VmRSS"),
        hwm_kib: field("VmHWM"),
        threads: field("Threads"),
        fds,
    }
}

/// The figures of process `pid` now; `None` once it is gone.
pub(crate) fn sample(pid: u32) -> Option<Sample> {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let status = std::fs::read_to_string(proc.join("status")).ok()?;
    let fds = std::fs::read_dir(proc.join("fd")).map_or(0, |d| d.count() as u64);
    Some(parse_status(&status, fds))
}

/// A running `toren serve`.
pub(crate) struct Server {
    child: Child,
    pid: u32,
    pub(crate) base: String,
    /// The time from spawning the process to its "listening on" line.
    pub(crate) startup: Duration,
    /// The last lines the server wrote to stderr, and how many were warnings or errors.
    log: Arc<Mutex<Log>>,
    /// The task that reads stderr; it ends when the process has closed it.
    reader: Option<tokio::task::JoinHandle<()>>,
}

#[derive(Default)]
struct Log {
    tail: VecDeque<String>,
    warnings: usize,
}

impl Server {
    pub(crate) async fn start(
        toren: &Path,
        home: &Home,
        sandbox: SandboxKind,
        workers: usize,
    ) -> anyhow::Result<Self> {
        let root = home.path();
        let mut command = Command::new(toren);
        command
            .args(["serve", "--workers", &workers.to_string()])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", root.join("home"))
            .env("TOREN_HOME", root.join("toren"))
            .env("TOREN_AGENTS", root.join("agents"))
            .env("TOREN_SANDBOX", sandbox.as_str())
            .env("TOREN_API_ADDR", "127.0.0.1:0")
            .env("TOREN_API_TOKEN", TOKEN)
            .env("TOREN_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true);
        let spawned = Instant::now();
        let mut child = command
            .spawn()
            .with_context(|| format!("cannot start {}", toren.display()))?;
        let pid = child.id().context("toren serve exited at once")?;
        let stderr = child.stderr.take().context("toren serve has no stderr")?;
        let log: Arc<Mutex<Log>> = Arc::default();
        let (said, address) = oneshot::channel();
        let reader = tokio::spawn(read_stderr(stderr, Arc::clone(&log), said));
        let addr = tokio::select! {
            addr = address => addr.ok(),
            () = tokio::time::sleep(START) => None,
        };
        let Some(addr) = addr else {
            let _ = child.start_kill();
            let status = child.wait().await.ok();
            bail!(
                "toren serve did not say where it listens within {START:?} (exit: {status:?}); \
                 its stderr:\n{}",
                tail(&log)
            );
        };
        Ok(Self {
            child,
            pid,
            base: format!("http://{addr}"),
            startup: spawned.elapsed(),
            log,
            reader: Some(reader),
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// The server's figures now; `None` once it is gone.
    pub(crate) fn sample(&self) -> Option<Sample> {
        sample(self.pid)
    }

    /// How many warning or error lines the server has logged.
    pub(crate) fn warnings(&self) -> usize {
        self.log.lock().map_or(0, |l| l.warnings)
    }

    /// The server's last stderr lines.
    pub(crate) fn tail(&self) -> String {
        tail(&self.log)
    }

    /// Sends SIGTERM and waits up to `within` for the exit; its code (`None`: killed by a
    /// signal), or an error if it did not exit in time (it is killed then). Afterwards
    /// [`Self::tail`] holds the server's last words.
    pub(crate) async fn stop(&mut self, within: Duration) -> anyhow::Result<Option<i32>> {
        let pid = nix::unistd::Pid::from_raw(
            i32::try_from(self.pid).context("the server's pid does not fit a pid_t")?,
        );
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)
            .context("cannot send SIGTERM to toren serve")?;
        let exited = tokio::time::timeout(within, self.child.wait()).await;
        if exited.is_err() {
            let _ = self.child.start_kill();
        }
        if let Some(reader) = self.reader.take() {
            // Its stderr closes with it (unless a child it left holds it).
            let _ = tokio::time::timeout(CLOSE, reader).await;
        }
        match exited {
            Ok(status) => Ok(status.context("cannot wait for toren serve")?.code()),
            Err(_) => bail!("toren serve did not exit within {within:?} of SIGTERM"),
        }
    }
}

async fn read_stderr(
    stderr: tokio::process::ChildStderr,
    log: Arc<Mutex<Log>>,
    said: oneshot::Sender<String>,
) {
    let mut said = Some(said);
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(rest) = line.split("listening on http://").nth(1)
            && let Some(said) = said.take()
        {
            let _ = said.send(
                rest.split_whitespace()
                    .next()
                    .unwrap_or_default()
                    .to_owned(),
            );
        }
        if let Ok(mut log) = log.lock() {
            if line.contains("WARN") || line.contains("ERROR") || line.contains("error:") {
                log.warnings += 1;
            }
            if log.tail.len() == TAIL {
                log.tail.pop_front();
            }
            log.tail.push_back(line);
        }
    }
}

fn tail(log: &Mutex<Log>) -> String {
    log.lock()
        .map(|l| l.tail.iter().cloned().collect::<Vec<_>>().join("\n"))
        .unwrap_or_default()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_memory_and_threads_from_proc_status() {
        let status = "Name:\ttoren\nVmHWM:\t   51234 kB\nVmRSS:\t   40960 kB\nThreads:\t9\n";
        assert_eq!(
            parse_status(status, 17),
            Sample {
                rss_kib: 40960,
                hwm_kib: 51234,
                threads: 9,
                fds: 17
            }
        );
        // This process's own status has every field.
        let own = std::fs::read_to_string("/proc/self/status").unwrap();
        let sample = parse_status(&own, 0);
        assert!(sample.rss_kib > 0 && sample.hwm_kib >= sample.rss_kib && sample.threads > 0);
    }
}
