//! Throwaway Postgres clusters for tests: [`Cluster::start`] runs `initdb` in a temporary
//! directory and `postgres` on a unix socket in that directory (and, when asked, on a TCP
//! address too: [`ClusterBuilder::listen`]), creates a database, and hands out its
//! `postgres://` URL. Dropping the cluster stops the server and removes the directory,
//! also when the test panics.
//!
//! The binaries are found through `pg_config --bindir`, else the newest
//! `/usr/lib/postgresql/*/bin` (`scripts/install-postgres` installs them). Postgres refuses
//! to run as root, so as root the cluster runs as the unprivileged `postgres` user (the
//! Debian package's), its directory chowned to it; as anyone else it runs as that user.
//! Authentication is `trust` for the socket and for TCP: a test cluster holds nothing.

use std::fs;
use std::os::unix::fs::PermissionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{Context, Result, anyhow, bail};

/// The superuser initdb creates; every URL names it.
pub const SUPERUSER: &str = "toren";
/// The database [`Cluster::start`] creates.
pub const DATABASE: &str = "toren";
/// How long the server may take to accept connections.
const READY_TIMEOUT: Duration = Duration::from_secs(60);
/// The script that installs the binaries, named in errors.
const INSTALL_SCRIPT: &str = "scripts/install-postgres";

/// How to start a [`Cluster`].
#[derive(Clone, Debug, Default)]
pub struct ClusterBuilder {
    listen: Option<(String, u16)>,
    settings: Vec<(String, String)>,
}

impl ClusterBuilder {
    /// Also listen on TCP at `addr:port` (e.g. a veth address other network namespaces
    /// reach); [`Cluster::tcp_url`] gives the URL. Without it, only the unix socket.
    pub fn listen(mut self, addr: impl Into<String>, port: u16) -> Self {
        self.listen = Some((addr.into(), port));
        self
    }

    /// A server setting passed as `-c name=value` (e.g. `max_connections`).
    pub fn setting(mut self, name: impl Into<String>, value: impl Into<String>) -> Self {
        self.settings.push((name.into(), value.into()));
        self
    }

    /// Makes the cluster, starts it and creates [`DATABASE`].
    pub fn start(self) -> Result<Cluster> {
        let bindir = bindir()?;
        let owner = Owner::for_cluster()?;
        let dir = tempfile::Builder::new()
            .prefix("toren-pg-")
            .tempdir()
            .context("creating the cluster's temporary directory")?;
        // Postgres wants its directories private to the user it runs as.
        fs::set_permissions(dir.path(), fs::Permissions::from_mode(0o700))?;
        owner.chown(dir.path())?;
        let data = dir.path().join("data");
        let port = self.listen.as_ref().map_or(5432, |(_, port)| *port);
        let mut cluster = Cluster {
            bindir,
            owner,
            data,
            port,
            builder: self,
            child: None,
            root: dir.path().to_owned(),
            dir: Some(dir),
        };
        cluster.initdb()?;
        cluster.start_server()?;
        cluster.create_database(DATABASE)?;
        Ok(cluster)
    }
}

/// A running throwaway cluster; stopped and removed on drop.
#[derive(Debug)]
pub struct Cluster {
    bindir: PathBuf,
    owner: Owner,
    data: PathBuf,
    port: u16,
    builder: ClusterBuilder,
    child: Option<Child>,
    /// The temporary directory's path.
    root: PathBuf,
    /// `None` only while dropping.
    dir: Option<tempfile::TempDir>,
}

impl Cluster {
    /// A cluster on a unix socket only, with [`DATABASE`] created.
    pub fn start() -> Result<Self> {
        Self::builder().start()
    }

    pub fn builder() -> ClusterBuilder {
        ClusterBuilder::default()
    }

    /// The directory holding the data directory, the socket and the server's log.
    pub fn dir(&self) -> &Path {
        &self.root
    }

    /// The `postgres://` URL of [`DATABASE`] over the unix socket.
    pub fn url(&self) -> String {
        self.database_url(DATABASE)
    }

    /// The URL of database `name` over the unix socket.
    pub fn database_url(&self, name: &str) -> String {
        format!(
            "postgres://{SUPERUSER}@localhost:{}/{name}?host={}",
            self.port,
            self.dir().display()
        )
    }

    /// The URL of [`DATABASE`] over TCP, when the cluster listens on an address.
    pub fn tcp_url(&self) -> Option<String> {
        self.builder
            .listen
            .as_ref()
            .map(|(addr, port)| format!("postgres://{SUPERUSER}@{addr}:{port}/{DATABASE}"))
    }

    /// Creates database `name` and returns its URL (e.g. a fresh database per test on one
    /// cluster).
    pub fn create_database(&self, name: &str) -> Result<String> {
        let out = Command::new(self.bindir.join("createdb"))
            .arg("-h")
            .arg(self.dir())
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-U")
            .arg(SUPERUSER)
            .arg(name)
            .stdin(Stdio::null())
            .output()
            .context("running createdb")?;
        if !out.status.success() {
            bail!(
                "createdb {name} failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        Ok(self.database_url(name))
    }

    /// Stops the server at once (an immediate shutdown, like a crash: clients see their
    /// connections drop), keeping the data: [`Cluster::restart`] brings it back.
    pub fn stop(&mut self) -> Result<()> {
        let Some(mut child) = self.child.take() else {
            return Ok(());
        };
        stop_child(&mut child)
    }

    /// Starts the server again on the same data, socket and address after
    /// [`Cluster::stop`].
    pub fn restart(&mut self) -> Result<()> {
        if self.child.is_some() {
            return Ok(());
        }
        self.start_server()
    }

    /// Whether the server is running (not stopped by [`Cluster::stop`]).
    pub fn is_running(&self) -> bool {
        self.child.is_some()
    }

    fn initdb(&self) -> Result<()> {
        let mut cmd = Command::new(self.bindir.join("initdb"));
        cmd.arg("-D")
            .arg(&self.data)
            .args(["-U", SUPERUSER, "--auth=trust", "-E", "UTF8", "--no-locale"])
            // No fsync of the new files: a throwaway cluster need not survive a power cut
            // while it is made. The server itself fsyncs its commits as usual.
            .arg("--no-sync")
            .stdin(Stdio::null());
        self.owner.apply(&mut cmd);
        let out = cmd.output().context("running initdb")?;
        if !out.status.success() {
            bail!(
                "initdb failed ({}): {}",
                out.status,
                String::from_utf8_lossy(&out.stderr).trim()
            );
        }
        // Trust on the socket and on any TCP address: the cluster is a test's alone.
        fs::write(
            self.data.join("pg_hba.conf"),
            "local all all trust\nhost all all 0.0.0.0/0 trust\nhost all all ::/0 trust\n",
        )?;
        Ok(())
    }

    fn start_server(&mut self) -> Result<()> {
        let log_path = self.dir().join("server.log");
        let log = fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(&log_path)?;
        self.owner.chown(&log_path)?;
        let listen = self
            .builder
            .listen
            .as_ref()
            .map_or(String::new(), |(addr, _)| addr.clone());
        let mut cmd = Command::new(self.bindir.join("postgres"));
        cmd.arg("-D")
            .arg(&self.data)
            .arg("-p")
            .arg(self.port.to_string())
            .arg("-k")
            .arg(self.dir())
            .arg("-c")
            .arg(format!("listen_addresses={listen}"))
            .args(["-c", "max_connections=200"]);
        for (name, value) in &self.builder.settings {
            cmd.arg("-c").arg(format!("{name}={value}"));
        }
        cmd.stdin(Stdio::null())
            .stdout(log.try_clone()?)
            .stderr(log);
        self.owner.apply(&mut cmd);
        let child = cmd
            .spawn()
            .with_context(|| format!("starting {}", self.bindir.join("postgres").display()))?;
        self.child = Some(child);
        self.wait_ready(&log_path)
    }

    /// Polls `pg_isready` (the server has no event to await from outside) until it
    /// accepts connections, the server exits, or [`READY_TIMEOUT`] passes.
    fn wait_ready(&mut self, log_path: &Path) -> Result<()> {
        let started = Instant::now();
        loop {
            if let Some(child) = self.child.as_mut()
                && let Some(status) = child.try_wait()?
            {
                self.child = None;
                bail!(
                    "postgres exited at startup ({status}); its log:\n{}",
                    fs::read_to_string(log_path).unwrap_or_default()
                );
            }
            let ready = Command::new(self.bindir.join("pg_isready"))
                .arg("-q")
                .arg("-h")
                .arg(self.dir())
                .arg("-p")
                .arg(self.port.to_string())
                .status()
                .context("running pg_isready")?;
            if ready.success() {
                return Ok(());
            }
            if started.elapsed() > READY_TIMEOUT {
                bail!(
                    "postgres did not accept connections within {READY_TIMEOUT:?}; its log:\n{}",
                    fs::read_to_string(log_path).unwrap_or_default()
                );
            }
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Cluster {
    fn drop(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = stop_child(&mut child);
        }
        if let Some(dir) = self.dir.take() {
            let _ = dir.close();
        }
    }
}

/// An immediate shutdown (SIGQUIT: the postmaster tells its backends to quit), then SIGKILL
/// if it has not exited within ten seconds.
fn stop_child(child: &mut Child) -> Result<()> {
    let pid = nix::unistd::Pid::from_raw(i32::try_from(child.id())?);
    let _ = nix::sys::signal::kill(pid, nix::sys::signal::Signal::SIGQUIT);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if child.try_wait()?.is_some() {
            return Ok(());
        }
        std::thread::sleep(Duration::from_millis(10));
    }
    child.kill()?;
    child.wait()?;
    Ok(())
}

/// Who the cluster runs as: the current user, or (as root) the `postgres` user.
#[derive(Clone, Copy, Debug)]
enum Owner {
    Me,
    User { uid: u32, gid: u32 },
}

impl Owner {
    fn for_cluster() -> Result<Self> {
        if !nix::unistd::geteuid().is_root() {
            return Ok(Self::Me);
        }
        let user = nix::unistd::User::from_name("postgres")?.ok_or_else(|| {
            anyhow!(
                "running as root, a test cluster must run as the unprivileged `postgres` \
                 user, and there is none; run {INSTALL_SCRIPT} (the Debian package makes it)"
            )
        })?;
        Ok(Self::User {
            uid: user.uid.as_raw(),
            gid: user.gid.as_raw(),
        })
    }

    fn chown(self, path: &Path) -> Result<()> {
        if let Self::User { uid, gid } = self {
            nix::unistd::chown(
                path,
                Some(nix::unistd::Uid::from_raw(uid)),
                Some(nix::unistd::Gid::from_raw(gid)),
            )
            .with_context(|| format!("chown {} to postgres", path.display()))?;
        }
        Ok(())
    }

    /// Runs `cmd` as this owner (std drops root's supplementary groups with the uid).
    fn apply(self, cmd: &mut Command) {
        if let Self::User { uid, gid } = self {
            cmd.uid(uid).gid(gid);
        }
    }
}

/// Where the Postgres server binaries are.
pub fn bindir() -> Result<PathBuf> {
    if let Ok(out) = Command::new("pg_config").arg("--bindir").output()
        && out.status.success()
    {
        let dir = PathBuf::from(String::from_utf8_lossy(&out.stdout).trim());
        if dir.join("initdb").is_file() {
            return Ok(dir);
        }
    }
    let mut found: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|entry| {
            let version = entry.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = entry.path().join("bin");
            bin.join("initdb").is_file().then_some((version, bin))
        })
        .collect();
    found.sort();
    found.pop().map(|(_, bin)| bin).ok_or_else(|| {
        anyhow!(
            "no Postgres server binaries (initdb, postgres) found via `pg_config --bindir` or in \
             /usr/lib/postgresql/*/bin; run {INSTALL_SCRIPT} to install them"
        )
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn psql(cluster: &Cluster, url: &str, sql: &str) -> String {
        let out = Command::new(cluster.bindir.join("psql"))
            .args(["-XAtq", url, "-c", sql])
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "psql: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    #[test]
    fn a_cluster_serves_stops_restarts_and_is_removed_on_drop() {
        let mut cluster = Cluster::builder()
            .listen("127.0.0.1", free_port())
            .start()
            .unwrap();
        let url = cluster.url();
        assert_eq!(psql(&cluster, &url, "SELECT current_database()"), DATABASE);
        let tcp = cluster.tcp_url().unwrap();
        assert_eq!(psql(&cluster, &tcp, "SELECT 1 + 1"), "2");
        let other = cluster.create_database("second").unwrap();
        assert_eq!(
            psql(&cluster, &other, "SELECT current_database()"),
            "second"
        );

        psql(
            &cluster,
            &url,
            "CREATE TABLE kept (x int); INSERT INTO kept VALUES (7)",
        );
        cluster.stop().unwrap();
        assert!(!cluster.is_running());
        cluster.restart().unwrap();
        assert_eq!(psql(&cluster, &url, "SELECT x FROM kept"), "7");

        let dir = cluster.dir().to_owned();
        let pid = cluster.child.as_ref().unwrap().id();
        drop(cluster);
        assert!(!dir.exists(), "{} removed", dir.display());
        assert!(
            !Path::new(&format!("/proc/{pid}")).exists(),
            "the postmaster {pid} has exited and was reaped"
        );
    }

    fn free_port() -> u16 {
        std::net::TcpListener::bind("127.0.0.1:0")
            .unwrap()
            .local_addr()
            .unwrap()
            .port()
    }
}
