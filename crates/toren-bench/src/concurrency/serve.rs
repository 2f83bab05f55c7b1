//! One `toren serve` process for the `concurrency` and `sse` benchmarks: a fresh temporary
//! home holding the given agent files, the server on a loopback port it picks itself (read
//! from its "listening on http://ADDR" line), and what `/proc` says of it — memory,
//! threads, descriptors (and where they point), and its descendant processes (a run's
//! sandbox is a bubblewrap child of the server). SIGTERM stops it; it must exit 0.

use std::collections::HashMap;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::time::Duration;

use anyhow::{Context as _, bail};
use serde::Serialize;
use tempfile::TempDir;
use tokio::io::{AsyncBufReadExt as _, BufReader};
use tokio::process::{Child, Command};
use tokio::sync::oneshot;

/// The bearer token of the server under measurement.
pub(crate) const TOKEN: &str = "toren-bench-token";
/// How long the server may take to say its address.
const START: Duration = Duration::from_secs(60);

/// The figures `/proc/<pid>` gives of the server at one moment.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize)]
pub(crate) struct Proc {
    /// VmRSS, KiB.
    pub(crate) rss_kib: u64,
    /// VmHWM: the peak resident memory since the process started, KiB.
    pub(crate) hwm_kib: u64,
    pub(crate) threads: u64,
    pub(crate) fds: u64,
    /// Processes below the server (children, grandchildren, …).
    pub(crate) descendants: u64,
}

impl Proc {
    /// The larger of each figure.
    pub(crate) fn max(self, other: Self) -> Self {
        Self {
            rss_kib: self.rss_kib.max(other.rss_kib),
            hwm_kib: self.hwm_kib.max(other.hwm_kib),
            threads: self.threads.max(other.threads),
            fds: self.fds.max(other.fds),
            descendants: self.descendants.max(other.descendants),
        }
    }
}

/// A field of `/proc/<pid>/status` such as `VmRSS` (its first number).
pub(crate) fn status_field(status: &str, name: &str) -> u64 {
    status
        .lines()
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .unwrap_or(0)
}

/// The parent pid in the text of `/proc/<pid>/stat` (the field after the parenthesised
/// command name, which may itself hold spaces and parentheses).
pub(crate) fn stat_ppid(stat: &str) -> Option<u32> {
    let after = stat.rsplit_once(')')?.1;
    after.split_whitespace().nth(1)?.parse().ok()
}

/// How many processes descend from `root`, from the parent links of every `/proc/<pid>`.
pub(crate) fn descendants(root: u32) -> u64 {
    let Ok(dir) = std::fs::read_dir("/proc") else {
        return 0;
    };
    let mut children: HashMap<u32, Vec<u32>> = HashMap::new();
    for entry in dir.flatten() {
        let Some(pid) = entry
            .file_name()
            .to_str()
            .and_then(|n| n.parse::<u32>().ok())
        else {
            continue;
        };
        if let Some(ppid) = std::fs::read_to_string(entry.path().join("stat"))
            .ok()
            .as_deref()
            .and_then(stat_ppid)
        {
            children.entry(ppid).or_default().push(pid);
        }
    }
    count_below(&children, root)
}

fn count_below(children: &HashMap<u32, Vec<u32>>, root: u32) -> u64 {
    let mut stack = vec![root];
    let mut count = 0;
    while let Some(pid) = stack.pop() {
        for child in children.get(&pid).into_iter().flatten() {
            count += 1;
            stack.push(*child);
        }
    }
    count
}

/// The server's figures now; `None` once it is gone.
pub(crate) fn sample(pid: u32) -> Option<Proc> {
    let proc = PathBuf::from(format!("/proc/{pid}"));
    let status = std::fs::read_to_string(proc.join("status")).ok()?;
    let fds = std::fs::read_dir(proc.join("fd")).map_or(0, |d| d.count() as u64);
    Some(Proc {
        rss_kib: status_field(&status, "VmRSS"),
        hwm_kib: status_field(&status, "VmHWM"),
        threads: status_field(&status, "Threads"),
        fds,
        descendants: descendants(pid),
    })
}

/// Where each open descriptor of `pid` points (`socket:[…]`, a path, …).
pub(crate) fn fd_targets(pid: u32) -> Vec<String> {
    let Ok(dir) = std::fs::read_dir(format!("/proc/{pid}/fd")) else {
        return Vec::new();
    };
    dir.flatten()
        .filter_map(|e| std::fs::read_link(e.path()).ok())
        .map(|p| p.display().to_string())
        .collect()
}

/// A temporary home: `agents/` with the benchmark's agents, `toren/` as TOREN_HOME.
pub(crate) struct Home {
    dir: TempDir,
}

impl Home {
    /// A home whose agents directory holds `files` (name, content).
    pub(crate) fn new(files: &[(String, String)]) -> anyhow::Result<Self> {
        let dir = tempfile::Builder::new()
            .prefix("toren-bench-")
            .tempdir()
            .context("cannot make a temporary TOREN_HOME")?;
        let agents = dir.path().join("agents");
        std::fs::create_dir_all(&agents).context("cannot make the agents directory")?;
        for (name, content) in files {
            std::fs::write(agents.join(name), content)
                .with_context(|| format!("cannot write agents/{name}"))?;
        }
        Ok(Self { dir })
    }

    /// TOREN_HOME: the database, and the runs' directories (sandbox root) below it.
    pub(crate) fn toren_home(&self) -> PathBuf {
        self.dir.path().join("toren")
    }

    fn root(&self) -> &Path {
        self.dir.path()
    }
}

/// A running `toren serve`.
pub(crate) struct Server {
    child: Child,
    pid: u32,
    pub(crate) base: String,
    /// The reader of its stderr: the lines that were warnings or errors, kept to explain.
    warnings: tokio::task::JoinHandle<Vec<String>>,
}

impl Server {
    /// `toren serve --workers N` in `home` with `TOREN_SANDBOX=sandbox`.
    pub(crate) async fn start(
        toren: &Path,
        home: &Home,
        sandbox: &str,
        workers: usize,
    ) -> anyhow::Result<Self> {
        let root = home.root();
        let mut child = Command::new(toren)
            .args(["serve", "--workers", &workers.to_string()])
            .env_clear()
            .env("PATH", std::env::var_os("PATH").unwrap_or_default())
            .env("HOME", root.join("home"))
            .env("TOREN_HOME", home.toren_home())
            .env("TOREN_AGENTS", root.join("agents"))
            .env("TOREN_SANDBOX", sandbox)
            .env("TOREN_API_ADDR", "127.0.0.1:0")
            .env("TOREN_API_TOKEN", TOKEN)
            .env("TOREN_LOG", "warn")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .kill_on_drop(true)
            .spawn()
            .with_context(|| format!("cannot start {}", toren.display()))?;
        let pid = child.id().context("toren serve exited at once")?;
        let stderr = child.stderr.take().context("toren serve has no stderr")?;
        let (said, address) = oneshot::channel();
        let warnings = tokio::spawn(read_stderr(stderr, said));
        let addr = tokio::select! {
            addr = address => addr.ok(),
            () = tokio::time::sleep(START) => None,
        };
        let Some(addr) = addr else {
            let _ = child.start_kill();
            let status = child.wait().await.ok();
            bail!("toren serve did not say where it listens within {START:?} (exit: {status:?})");
        };
        Ok(Self {
            child,
            pid,
            base: format!("http://{addr}"),
            warnings,
        })
    }

    pub(crate) fn pid(&self) -> u32 {
        self.pid
    }

    /// Sends SIGTERM and waits up to `within`: the exit code and the warning lines the
    /// server logged; an error when it did not exit in time (it is killed then).
    pub(crate) async fn stop(
        mut self,
        within: Duration,
    ) -> anyhow::Result<(Option<i32>, Vec<String>)> {
        let pid = nix::unistd::Pid::from_raw(
            i32::try_from(self.pid).context("the server's pid does not fit a pid_t")?,
        );
        nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGTERM)
            .context("cannot send SIGTERM to toren serve")?;
        let exited = tokio::time::timeout(within, self.child.wait()).await;
        let Ok(status) = exited else {
            let _ = self.child.start_kill();
            bail!("toren serve did not exit within {within:?} of SIGTERM");
        };
        let code = status.context("cannot wait for toren serve")?.code();
        let warnings = tokio::time::timeout(Duration::from_secs(5), self.warnings)
            .await
            .ok()
            .and_then(Result::ok)
            .unwrap_or_default();
        Ok((code, warnings))
    }
}

async fn read_stderr(
    stderr: tokio::process::ChildStderr,
    said: oneshot::Sender<String>,
) -> Vec<String> {
    let mut said = Some(said);
    let mut warnings = Vec::new();
    let mut lines = BufReader::new(stderr).lines();
    while let Ok(Some(line)) = lines.next_line().await {
        if let Some(rest) = line.split("listening on http://").nth(1)
            && let Some(said) = said.take()
        {
            let addr = rest.split_whitespace().next().unwrap_or_default();
            let _ = said.send(addr.to_owned());
        }
        if (line.contains("WARN") || line.contains("ERROR")) && warnings.len() < 20 {
            warnings.push(line);
        }
    }
    warnings
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_the_parent_pid_past_an_awkward_command_name() {
        let stat = "4242 (bwrap (x) y) S 17 4242 4242 0 -1 4194560";
        assert_eq!(stat_ppid(stat), Some(17));
        assert_eq!(stat_ppid("garbage"), None);
    }

    #[test]
    fn counts_every_process_below_the_root() {
        let children: HashMap<u32, Vec<u32>> =
            [(1, vec![2, 3]), (2, vec![4]), (4, vec![5]), (9, vec![10])].into();
        assert_eq!(count_below(&children, 1), 4);
        assert_eq!(count_below(&children, 9), 1);
        assert_eq!(count_below(&children, 5), 0);
    }

    #[test]
    fn this_process_has_a_descendant_while_a_child_lives() {
        let mut child = std::process::Command::new("sleep")
            .arg("30")
            .spawn()
            .unwrap();
        let own = std::process::id();
        assert!(descendants(own) >= 1);
        let status = std::fs::read_to_string("/proc/self/status").unwrap();
        assert!(status_field(&status, "Threads") >= 1);
        child.kill().unwrap();
        child.wait().unwrap();
    }
}
