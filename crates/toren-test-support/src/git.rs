//! A git repository served the way a real one is fetched, for tests of cloning: a bare
//! clone of a project published over git's "dumb" HTTP protocol (`git update-server-info`)
//! by a plain file server (`python3 -m http.server`) on a loopback port, so the real `git
//! clone` runs against it.

use std::path::Path;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

/// Runs `git args` in `dir` with a fixed author; its stdout.
pub fn git(dir: &Path, args: &[&str]) -> anyhow::Result<String> {
    let out = Command::new("git")
        .args(["-c", "user.email=t@example.com", "-c", "user.name=t"])
        .args(args)
        .current_dir(dir)
        .output()?;
    anyhow::ensure!(
        out.status.success(),
        "git {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The served repository; the file server stops when it is dropped.
pub struct ServedRepository {
    child: Child,
    /// Where `git clone` finds it (`http://127.0.0.1:PORT/repo.git`).
    pub url: String,
}

impl ServedRepository {
    /// Serves a bare clone of the repository `project`, made under `root`.
    pub fn start(root: &Path, project: &Path) -> anyhow::Result<Self> {
        let served = root.join("served");
        std::fs::create_dir_all(&served)?;
        let project = project.display().to_string();
        git(&served, &["clone", "-q", "--bare", &project, "repo.git"])?;
        git(&served.join("repo.git"), &["update-server-info"])?;
        let port = std::net::TcpListener::bind("127.0.0.1:0")?
            .local_addr()?
            .port();
        let child = Command::new("python3")
            .args([
                "-m",
                "http.server",
                "--bind",
                "127.0.0.1",
                &port.to_string(),
            ])
            .current_dir(&served)
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .spawn()?;
        let served = Self {
            child,
            url: format!("http://127.0.0.1:{port}/repo.git"),
        };
        let deadline = Instant::now() + Duration::from_secs(20);
        while std::net::TcpStream::connect(("127.0.0.1", port)).is_err() {
            anyhow::ensure!(Instant::now() < deadline, "the file server never listened");
            std::thread::sleep(Duration::from_millis(50));
        }
        Ok(served)
    }
}

impl Drop for ServedRepository {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}
