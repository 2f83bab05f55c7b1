//! A fake sandbox's disk and how its processes start: a temp dir whose `workspace`, `home`
//! and `tmp` are what the sandbox sees at `/workspace`, `/home/user` and `/tmp`; every
//! process a bubblewrap sandbox over them (host `/usr` and `/etc` read-only, no network
//! unless allowed).
//!
//! The sandbox is one machine for its processes where this host lets a new PID namespace
//! have its own `/proc` (probed once, [`machines_work`]): a kept bubblewrap (the *keeper*,
//! made with the disk) holds the sandbox's own user and PID namespaces, and every process
//! joins them (`--userns` / `--pidns`), so the sandbox's processes see and signal each
//! other and nothing of the host, and the keeper's end (its outer bubblewrap, our own
//! child, killed: its init dies with it, and with the init every process in the namespace)
//! ends them all, as a VM's end does. Inside a Docker container, whose masked `/proc` may
//! not be mounted anew in a user namespace, each process is a fresh bubblewrap instead (the
//! per-command sandbox): same disk, but the fake's own PID namespace, and the sandbox's end
//! kills only the processes envd started.
//!
//! No process is ever signalled by a number that may have been reused. The keeper is
//! killed through its outer bubblewrap, a child of ours that is never reaped before;
//! its namespaces are held open as descriptors from the moment they are checked against
//! bubblewrap's report, so a process joins them and not whatever later took the init's
//! pid; every command is signalled through a pidfd opened when it started and checked to be
//! in the sandbox's PID namespace; pausing stops every process of a kept machine from
//! inside it (`kill -STOP -1`). Every process starts in a process group of its own, so a
//! `kill 0` in the sandbox cannot reach the host's processes. Every descriptor but 0-2
//! (the namespaces bubblewrap joins through 5 and 6 among them) is closed before the
//! command starts.

use std::fs::File;
use std::os::fd::{AsFd, AsRawFd, OwnedFd};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Stdio};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Mutex, OnceLock, PoisonError};

use super::vm::Bounds;
use rustix::process::{Pid as RawPid, PidfdFlags, Signal, pidfd_open, pidfd_send_signal};

/// The places of a sandbox's filesystem that live on its own disk.
const MOUNTS: &[(&str, &str)] = &[
    ("/workspace", "workspace"),
    ("/home/user", "home"),
    ("/tmp", "tmp"),
];

/// How a command's shell starts it in a kept machine: opens the info FIFO as descriptor 3,
/// the reporter's as 4 and the machine's namespaces as 5 and 6 (`sh` takes one-digit
/// descriptors only), joins
/// the sandbox's cgroups (`vm`), and becomes bwrap, which writes its info on 3 before it
/// starts the command. A cgroup that refuses the process (its process limit reached) is
/// skipped: the process must start (Toren's kill of a fork bomb is such a process).
const JOIN_KEPT: &str = r#"g=$1; f=$2; s=$3; u=$4; p=$5; shift 5; exec 3>"$f" 4>"$s" 5<"$u" 6<"$p"; for c in $g; do echo $$ 2>/dev/null > "$c" || true; done; exec "$@""#;
/// The same for a per-command sandbox (no namespaces to join).
const JOIN_ONE: &str = r#"g=$1; f=$2; s=$3; shift 3; exec 3>"$f" 4>"$s"; for c in $g; do echo $$ 2>/dev/null > "$c" || true; done; exec "$@""#;

/// The machine's init: reaps whatever is orphaned to it, forever (it ends with the
/// keeper's outer bubblewrap, `--die-with-parent`).
const INIT: &str = "while (1) { sleep 1 if wait() == -1 }";

/// Stands between bubblewrap and the command as envd does between itself and its child:
/// closes every descriptor but 0-2 and the status pipe on 4 (the namespaces bubblewrap
/// joined through 5 and 6, and whatever the process running the fake inherited, a test
/// harness's job-server pipes, say; the open ones, as `/proc/self/fd` lists them), forks
/// the command (which closes 4 too and so holds nothing of the host's, as a VM's processes
/// do not), tells its pid on 4, waits for it and tells how it ended there: `exit N`, or
/// `signal N` (`core` if it dumped one), which bubblewrap's own status (128 + N for a
/// signal) cannot tell apart from an exit. Perl, as the host image's `sh` (dash) cannot
/// name descriptors above 9, and core Perl only: loading `POSIX` took about 10 ms of CPU
/// per command, more than the rest of the reporter (a descriptor is closed through a
/// handle opened on it, `<&=`). On one line, as `ps` shows it.
const REPORTER: &[&str] = &[
    "/usr/bin/perl",
    "-e",
    concat!(
        r#"sub shut { open(my $h, "<&=", $_[0]) and close $h } "#,
        r#"opendir(my $d, "/proc/self/fd") or exit 126; "#,
        r#"my @fds = grep { /^\d+$/ && $_ > 2 && $_ != 4 && $_ != fileno($d) } readdir $d; "#,
        r#"closedir $d; shut($_) for @fds; my $pid = fork; "#,
        r#"defined $pid or do { print STDERR "fork: $!\n"; exit 126 }; "#,
        r#"if ($pid == 0) { shut(4); "#,
        r#"exec { $ARGV[0] } @ARGV or do { print STDERR "$ARGV[0]: $!\n"; exit 127 } } "#,
        r#"open(my $st, ">&=", 4) or exit 126; select((select($st), $| = 1)[0]); "#,
        r#"print $st "pid $pid\n"; waitpid($pid, 0) == $pid or exit 126; my $w = $?; "#,
        r#"if ($w & 127) { print $st "signal ", $w & 127, ($w & 128 ? " core" : ""), "\n"; "#,
        r#"exit 128 + ($w & 127) } print $st "exit ", $w >> 8, "\n"; exit $w >> 8;"#
    ),
];

/// How a command ended, as the reporter saw it (its `wait` status).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Ended {
    Exited(i32),
    Signaled { signal: i32, core: bool },
}

impl Ended {
    fn parse(line: &str) -> Option<Self> {
        let mut words = line.split_whitespace();
        match (words.next()?, words.next()?.parse().ok()?, words.next()) {
            ("exit", code, None) => Some(Self::Exited(code)),
            ("signal", signal, core) => Some(Self::Signaled {
                signal,
                core: core == Some("core"),
            }),
            _ => None,
        }
    }
}

/// What the reporter of one process tells: the command's pid in the sandbox once it is
/// forked, then how it ended (`None`: it did not say, e.g. it was killed itself).
pub(crate) struct Report {
    pub(crate) pid: tokio::sync::oneshot::Receiver<Option<u32>>,
    pub(crate) ended: tokio::sync::oneshot::Receiver<Option<Ended>>,
}

/// Reads the reporter's pipe `fifo` on a blocking thread (opening it waits for the
/// process's shell to open its end).
pub(crate) fn read_report(fifo: PathBuf) -> Report {
    use std::io::{BufRead, Read};
    let (pid_tx, pid) = tokio::sync::oneshot::channel();
    let (ended_tx, ended) = tokio::sync::oneshot::channel();
    std::thread::spawn(move || {
        let Ok(file) = File::open(&fifo) else { return };
        let _ = std::fs::remove_file(&fifo);
        let mut reader = std::io::BufReader::new(file);
        let mut first = String::new();
        let _ = reader.read_line(&mut first);
        let _ = pid_tx.send(
            first
                .strip_prefix("pid ")
                .and_then(|p| p.trim().parse().ok()),
        );
        let mut rest = String::new();
        let _ = reader.read_to_string(&mut rest);
        let _ = ended_tx.send(rest.lines().next_back().and_then(Ended::parse));
    });
    Report { pid, ended }
}

/// Lets a reader of `fifo` that waits for a writer go (a process that never started).
pub(crate) fn release_fifo(fifo: &Path) {
    use std::os::unix::fs::OpenOptionsExt;
    let _ = std::fs::OpenOptions::new()
        .write(true)
        .custom_flags(nix::fcntl::OFlag::O_NONBLOCK.bits())
        .open(fifo);
    let _ = std::fs::remove_file(fifo);
}

/// One sandbox's disk.
#[derive(Debug)]
pub struct Disk {
    root: PathBuf,
    machine: Machine,
    /// The inode of the PID namespace the sandbox's processes are in (the keeper's, or the
    /// fake's own for per-command sandboxes): a pidfd is trusted only for a process there.
    pidns: u64,
    /// Whether the machine was stopped.
    stopped: AtomicBool,
    /// Its size: a cgroup every process joins, and its disk's own mount if it has one.
    bounds: Mutex<Bounds>,
}

/// How a sandbox's processes are made.
#[derive(Debug)]
enum Machine {
    /// Every process joins the keeper's namespaces.
    Kept(Keeper),
    /// Every process is a fresh bubblewrap in the fake's own PID namespace.
    PerCommand,
}

#[derive(Debug)]
struct Keeper {
    /// The keeper's outer bubblewrap (its monitor), reaped only when the machine stops, so
    /// its pid is never anyone else's while we hold it. Its init dies with it
    /// (`--die-with-parent`), and every process in the PID namespace with the init.
    monitor: Mutex<Option<Child>>,
    /// The sandbox's user and PID namespaces, opened once and checked.
    userns: File,
    pidns: File,
}

/// Whether this host can give each sandbox a machine of its own: a bubblewrap with new user
/// and PID namespaces and its own `/proc` starts (probed once; inside a Docker container
/// the `/proc` mount is refused).
pub fn machines_work() -> bool {
    static WORKS: OnceLock<bool> = OnceLock::new();
    *WORKS.get_or_init(|| {
        let mut argv = vec!["--unshare-user".to_owned(), "--unshare-pid".to_owned()];
        argv.extend(image());
        argv.extend(["--", "true"].map(str::to_owned));
        std::process::Command::new("bwrap")
            .args(&argv)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
    })
}

impl Disk {
    /// Makes the disk (a tmpfs of `disk_size` bytes if given) and its bounds (`vm`) and,
    /// where machines work, starts the sandbox's keeper.
    pub(crate) fn create(
        root: PathBuf,
        name: &str,
        disk_size: Option<u64>,
    ) -> std::io::Result<Self> {
        let bounds = Bounds::new(&root, name, disk_size)?;
        for (_, dir) in MOUNTS {
            std::fs::create_dir_all(root.join(dir))?;
        }
        std::fs::create_dir_all(root.join("run"))?;
        std::fs::write(root.join("run").join("e2b"), "{\"templateID\": \"fake\"}\n")?;
        if !machines_work() {
            let pidns = std::fs::metadata("/proc/self/ns/pid")?.ino();
            return Ok(Self {
                root,
                machine: Machine::PerCommand,
                pidns,
                stopped: AtomicBool::new(false),
                bounds: Mutex::new(bounds),
            });
        }
        let (keeper, pidns) = Keeper::start(&root)?;
        Ok(Self {
            root,
            machine: Machine::Kept(keeper),
            pidns,
            stopped: AtomicBool::new(false),
            bounds: Mutex::new(bounds),
        })
    }

    /// Whether the sandbox's memory and processes are bounded, as a VM's are (`vm`).
    pub fn is_bounded(&self) -> bool {
        self.bounds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .bounded()
    }

    /// The `cgroup.procs` files every process of the sandbox joins.
    fn procs_files(&self) -> String {
        self.bounds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .procs_files()
    }

    /// Whether the sandbox is one machine (a kept PID namespace) rather than per-command
    /// sandboxes.
    pub fn is_machine(&self) -> bool {
        matches!(self.machine, Machine::Kept(_))
    }

    /// Ends the machine: kills the keeper, and with it every process in the sandbox's PID
    /// namespace; for per-command sandboxes, the processes envd knows (and their groups).
    pub(crate) fn stop(&self, known: &[Proc]) {
        if self.stopped.swap(true, Ordering::SeqCst) {
            return;
        }
        match &self.machine {
            Machine::Kept(keeper) => keeper.stop(),
            Machine::PerCommand => {
                for proc in known {
                    proc.signal_group(Signal::KILL);
                }
            }
        }
        self.bounds
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .release_cgroups();
    }

    /// Stops (`pause`) or continues every process of the sandbox: from inside a kept
    /// machine, all of them (`kill -STOP -1`), as a paused VM is frozen whole; for
    /// per-command sandboxes, the groups of the processes envd knows.
    pub(crate) fn signal_all(&self, known: &[Proc], signal: Signal) {
        match &self.machine {
            Machine::Kept(keeper) => {
                let name = if signal == Signal::STOP {
                    "STOP"
                } else {
                    "CONT"
                };
                let mut command = self.std_command(keeper, &format!("kill -{name} -1"));
                let _ = command.status();
            }
            Machine::PerCommand => {
                for proc in known {
                    proc.signal_group(signal);
                }
            }
        }
    }

    /// A root shell in the kept machine running `script`, synchronously.
    fn std_command(&self, keeper: &Keeper, script: &str) -> std::process::Command {
        let mut bwrap = vec![
            "--userns".to_owned(),
            "5".into(),
            "--pidns".into(),
            "6".into(),
        ];
        bwrap.extend(image());
        bwrap.extend(
            ["--", "/bin/sh", "-c", &format!("exec 5<&- 6<&-; {script}")].map(str::to_owned),
        );
        let mut command = std::process::Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(r#"g=$1; u=$2; p=$3; shift 3; for c in $g; do echo $$ 2>/dev/null > "$c" || true; done; exec bwrap "$@" 5<"$u" 6<"$p""#)
            .arg("sh")
            .arg(self.procs_files())
            .arg(own_fd_path(&keeper.userns))
            .arg(own_fd_path(&keeper.pidns))
            .args(&bwrap)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        command
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
    /// unprivileged user, writing bwrap's info (the reporter's pid) to `info` and the
    /// reporter's to `status` (FIFOs).
    pub(crate) fn command(
        &self,
        cmd: &str,
        args: &[String],
        env: &[(String, String)],
        cwd: &str,
        who: Who,
        (info, status): (&Path, &Path),
    ) -> tokio::process::Command {
        let mut bwrap: Vec<String> = vec!["bwrap".into(), "--info-fd".into(), "3".into()];
        if let Machine::Kept(_) = self.machine {
            // No --die-with-parent: the machine's end ends the process, and a parent-death
            // signal set while bubblewrap's intermediate child (which joins the PID
            // namespace and exits at once) is still its parent would kill it at birth.
            bwrap.extend(["--userns", "5", "--pidns", "6"].map(str::to_owned));
        } else {
            bwrap.push("--die-with-parent".into());
        }
        bwrap.extend(image());
        for (inside, dir) in MOUNTS {
            let host = self.root.join(dir).display().to_string();
            bwrap.extend(["--bind".into(), host, (*inside).to_owned()]);
        }
        if let Machine::Kept(_) = self.machine {
            // What E2B's template build writes into every VM; a per-command sandbox, which
            // is no machine of its own, does not claim to be one.
            let marker = self.root.join("run").join("e2b").display().to_string();
            bwrap.extend(["--ro-bind".into(), marker, "/.e2b".into()]);
        }
        if !who.root {
            // Any user but root is an ordinary user of the VM: no capabilities (no raw
            // sockets, no mounts, no device nodes).
            bwrap.extend(["--cap-drop".into(), "ALL".into()]);
        }
        if !who.internet {
            bwrap.push("--unshare-net".into());
        }
        // A firewalled sandbox's one way out (`egress`): made only for such a sandbox, in
        // the disk's root, which the sandbox itself never sees.
        let egress = self.root.join("egress");
        if egress.is_dir() {
            let host = egress.display().to_string();
            bwrap.extend([
                "--ro-bind".into(),
                host,
                super::egress::EGRESS_DIR.to_owned(),
            ]);
        }
        // /dev/shm a tmpfs of its own, as a VM's; and, as in a VM, the root and /dev are
        // root's alone to write (every user of the fake is root in its namespace, so they
        // are made read-only for the others). Last: nothing can be mounted on them after.
        bwrap.extend(["--tmpfs", "/dev/shm"].map(str::to_owned));
        if !who.root {
            bwrap.extend(["--remount-ro", "/", "--remount-ro", "/dev"].map(str::to_owned));
        }
        bwrap.extend(["--chdir".into(), cwd.to_owned(), "--".into()]);
        let mut command = tokio::process::Command::new("/bin/sh");
        command.arg("-c");
        match &self.machine {
            Machine::Kept(keeper) => {
                // The machine's namespaces are our own descriptors, through /proc.
                command
                    .arg(JOIN_KEPT)
                    .arg("sh")
                    .arg(self.procs_files())
                    .arg(info)
                    .arg(status)
                    .arg(own_fd_path(&keeper.userns))
                    .arg(own_fd_path(&keeper.pidns));
            }
            Machine::PerCommand => {
                command
                    .arg(JOIN_ONE)
                    .arg("sh")
                    .arg(self.procs_files())
                    .arg(info)
                    .arg(status);
            }
        }
        bwrap.extend(REPORTER.iter().map(|a| (*a).to_owned()));
        bwrap.push(cmd.to_owned());
        bwrap.extend(args.iter().cloned());
        command
            .args(&bwrap)
            .env_clear()
            .envs(env.iter().map(|(k, v)| (k.as_str(), v.as_str())))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .process_group(0)
            .kill_on_drop(false);
        command
    }

    /// A fresh FIFO for one process's `kind` (`info`: bubblewrap's, `status`: the
    /// reporter's).
    pub(crate) fn fifo(&self, kind: &str, n: u64) -> std::io::Result<PathBuf> {
        let path = self.root.join("run").join(format!("{kind}-{n}"));
        let _ = std::fs::remove_file(&path);
        nix::unistd::mkfifo(&path, nix::sys::stat::Mode::from_bits_truncate(0o600))
            .map_err(std::io::Error::from)?;
        Ok(path)
    }

    /// Takes hold of a started command (a pidfd), if it is still there and in the
    /// sandbox's PID namespace: its reporter's pid from bwrap's info on `fifo` (blocks
    /// until bwrap wrote it), then the reporter's child whose pid in the sandbox is the one
    /// the reporter tells on `inside`. `n` tells it from the sandbox's other processes.
    /// Returns it with its pid in the sandbox.
    pub(crate) async fn read_proc(
        &self,
        fifo: PathBuf,
        n: u64,
        inside: tokio::sync::oneshot::Receiver<Option<u32>>,
    ) -> Option<(Proc, u32)> {
        let reporter = tokio::task::spawn_blocking(move || {
            let text = std::fs::read_to_string(&fifo).ok();
            let _ = std::fs::remove_file(&fifo);
            child_pid(&text?)
        })
        .await
        .ok()??;
        let inside = inside.await.ok()??;
        let pidns = self.pidns;
        let proc = tokio::task::spawn_blocking(move || {
            // Only the reporter's own child has it as parent, and the reporter, which
            // forks once, has not reaped it while it runs: no other process matches.
            let proc = child_of(reporter, inside)
                .map_or_else(|| Proc::ended(n), |host| Proc::hold(host, pidns, n));
            if proc.inside == inside {
                proc
            } else {
                Proc::ended(n)
            }
        })
        .await
        .ok()?;
        Some((proc, inside))
    }
}

/// The host pid of `parent`'s child whose pid in its own PID namespace is `inside`: among
/// the children `/proc/PARENT/task/PARENT/children` lists (the reporter has one thread),
/// else (a kernel without that file) among every process of the host, a walk of all of
/// `/proc` that cost a few milliseconds per command on a busy host.
fn child_of(parent: u32, inside: u32) -> Option<u32> {
    let matches = |host: u32| {
        let status = std::fs::read_to_string(format!("/proc/{host}/status")).ok()?;
        let field = |name: &str| status.lines().find_map(|l| l.strip_prefix(name));
        let ppid: u32 = field("PPid:")?.trim().parse().ok()?;
        let nspid: u32 = field("NSpid:")?.split_whitespace().last()?.parse().ok()?;
        (ppid == parent && nspid == inside).then_some(host)
    };
    if let Ok(children) = std::fs::read_to_string(format!("/proc/{parent}/task/{parent}/children"))
    {
        return children
            .split_whitespace()
            .filter_map(|pid| pid.parse().ok())
            .find_map(matches);
    }
    std::fs::read_dir("/proc")
        .ok()?
        .flatten()
        .find_map(|entry| matches(entry.file_name().to_str()?.parse().ok()?))
}

impl Keeper {
    /// Starts the keeper over `root` and checks and opens its namespaces; returns it and
    /// its PID namespace's inode.
    /// It stays out of the sandbox's cgroups (`vm`): the machine's bounds are for what runs
    /// in it, and the OOM killer must not end the machine by taking its outer bubblewrap.
    fn start(root: &Path) -> std::io::Result<(Self, u64)> {
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
        // Its init is the machine's PID 1 itself (`--as-pid-1`), as a VM's is: nothing in
        // the machine can kill it (`kill -KILL -1` spares PID 1), and it reaps the orphans.
        keeper.extend(["--as-pid-1", "--", "/usr/bin/perl", "-e", INIT].map(str::to_owned));
        let mut command = std::process::Command::new("/bin/sh");
        command
            .arg("-c")
            .arg(r#"f=$1; shift; exec bwrap --info-fd 3 "$@" 3>"$f""#)
            .arg("sh")
            .arg(&fifo)
            .args(&keeper)
            .env_clear()
            .env("PATH", "/usr/sbin:/usr/bin:/sbin:/bin")
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::null());
        std::os::unix::process::CommandExt::process_group(&mut command, 0);
        let mut child = command.spawn()?;
        // Blocks until bwrap wrote its info (it does before it starts the init), or died.
        let text = std::fs::read_to_string(&fifo);
        let _ = std::fs::remove_file(&fifo);
        let opened = text
            .ok()
            .and_then(|t| Some((child_pid(&t)?, ns_id(&t, "pid-namespace")?)))
            .and_then(|(init, want)| {
                // Opened by the init's pid, then held: the PID namespace must be the one
                // bwrap reported, or the pid was already someone else's.
                let userns = File::open(format!("/proc/{init}/ns/user")).ok()?;
                let pidns = File::open(format!("/proc/{init}/ns/pid")).ok()?;
                let oom = std::fs::OpenOptions::new()
                    .write(true)
                    .open(format!("/proc/{init}/oom_score_adj"))
                    .ok()?;
                (pidns.metadata().ok()?.ino() == want).then_some((userns, pidns, want, oom))
            })
            .map(|(userns, pidns, want, mut oom)| {
                // Never the OOM killer's choice, as a VM's init is not: a memory hog or a
                // fork bomb at the sandbox's memory bound must not end the machine.
                let _ = std::io::Write::write_all(&mut oom, b"-1000");
                (userns, pidns, want)
            });
        let Some((userns, pidns, inode)) = opened else {
            let _ = child.kill();
            let _ = child.wait();
            return Err(std::io::Error::other("the sandbox's keeper did not start"));
        };
        let keeper = Self {
            monitor: Mutex::new(Some(child)),
            userns,
            pidns,
        };
        Ok((keeper, inode))
    }

    fn stop(&self) {
        let child = self
            .monitor
            .lock()
            .unwrap_or_else(PoisonError::into_inner)
            .take();
        if let Some(mut child) = child {
            // Unreaped until now, so this is our keeper and nobody else.
            let _ = child.kill();
            let _ = child.wait();
        }
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
        self.stop(&[]);
    }
}

/// A process envd started: its pid in the sandbox and a pidfd for it (none when it had
/// already ended by the time it was looked at: then nothing is ever signalled for it).
#[derive(Debug)]
pub(crate) struct Proc {
    /// Which start of the sandbox it is (envd's own count).
    pub(crate) n: u64,
    /// Its pid in the sandbox (0: it had already ended).
    pub(crate) inside: u32,
    pidfd: Option<OwnedFd>,
    /// Its host pid, good only while `pidfd` says the process lives.
    host: u32,
}

impl Proc {
    /// A process that had ended before it was looked at: never signalled.
    fn ended(n: u64) -> Self {
        Self {
            n,
            inside: 0,
            pidfd: None,
            host: 0,
        }
    }

    /// Takes hold of host pid `host`: a pidfd, trusted only if the process it names is in
    /// the PID namespace `pidns` and was alive throughout the look.
    fn hold(host: u32, pidns: u64, n: u64) -> Self {
        let gone = Self {
            host,
            ..Self::ended(n)
        };
        let Some(pid) = i32::try_from(host).ok().and_then(RawPid::from_raw) else {
            return gone;
        };
        let Ok(pidfd) = pidfd_open(pid, PidfdFlags::empty()) else {
            return gone;
        };
        let in_sandbox =
            std::fs::metadata(format!("/proc/{host}/ns/pid")).is_ok_and(|m| m.ino() == pidns);
        let inside = std::fs::read_to_string(format!("/proc/{host}/status"))
            .ok()
            .and_then(|status| {
                status
                    .lines()
                    .find_map(|l| l.strip_prefix("NSpid:"))?
                    .split_whitespace()
                    .last()?
                    .parse::<u32>()
                    .ok()
            });
        // Alive now means /proc/<host> was this process all along.
        if !(in_sandbox && pidfd_alive(&pidfd, host)) {
            return gone;
        }
        match inside {
            Some(inside) => Self {
                n,
                inside,
                pidfd: Some(pidfd),
                host,
            },
            None => gone,
        }
    }

    /// Signals the process itself (envd's `SendSignal`); nothing if it is gone.
    pub(crate) fn signal(&self, signal: Signal) {
        if let Some(pidfd) = &self.pidfd {
            let _ = pidfd_send_signal(pidfd, signal);
        }
    }

    /// Signals the process's group (the group it leads once the command's `setsid` ran),
    /// only while the process lives (so the group id is still its own), and the process.
    fn signal_group(&self, signal: Signal) {
        let Some(pidfd) = &self.pidfd else { return };
        if pidfd_alive(pidfd, self.host)
            && let Some(pid) = i32::try_from(self.host).ok().and_then(RawPid::from_raw)
        {
            let _ = rustix::process::kill_process_group(pid, signal);
        }
        let _ = pidfd_send_signal(pidfd, signal);
    }
}

/// Whether the process of `pidfd` still lives (and is host pid `host`): its fdinfo says
/// `Pid: -1` once it ended.
fn pidfd_alive(pidfd: &OwnedFd, host: u32) -> bool {
    let info = std::fs::read_to_string(format!("/proc/self/fdinfo/{}", pidfd.as_fd().as_raw_fd()));
    info.ok()
        .and_then(|i| {
            i.lines()
                .find_map(|l| l.strip_prefix("Pid:"))
                .map(|p| p.trim() == host.to_string())
        })
        .unwrap_or(false)
}

/// The path under which a child can open descriptor `file` of ours.
fn own_fd_path(file: &File) -> String {
    format!("/proc/{}/fd/{}", std::process::id(), file.as_raw_fd())
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

fn ns_id(info: &str, name: &str) -> Option<u64> {
    let value: serde_json::Value = serde_json::from_str(info).ok()?;
    value.get(name)?.as_u64()
}
