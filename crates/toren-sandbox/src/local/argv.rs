//! The bubblewrap command line, built by a pure function from a [`BwrapSpec`], and the
//! environment the sandboxed command receives. Nothing here touches the host except
//! [`HostLayout::probe`], which records how the host's `/bin`, `/lib`… are laid out so the
//! sandbox can mirror them. The spawning lives in `exec`.
//!
//! Two kinds of sandbox share it ([`Inside`]): one for a single shell command, gone when
//! the command ends, and one kept for a run, whose PID 1 is the `toren-exec` helper (bound
//! read-only at [`HELPER_PATH`]) running each command on request.
//!
//! The sandbox's root is a fresh, read-only tmpfs holding only: `/usr` read-only, the
//! top-level `/bin`-like directories (as symlinks or read-only binds, like the host), the few
//! files of `/etc` that programs need, fresh `/proc`, a read-only `/dev`, size-limited
//! `/tmp` and `/dev/shm`, and the workspace at [`SANDBOX_WORKDIR`]. No home directory, no Toren state, no other workspace, no host
//! `/tmp`. Values of granted variables never appear here: they travel in the process
//! environment ([`sandbox_env`]), never in argv (I-7).

use std::ffi::OsString;
use std::path::{Path, PathBuf};

use crate::egress::{SANDBOX_EGRESS_DIR, helper_args};
use crate::sandbox::{SANDBOX_PATH, SHM_SIZE};
use crate::workspace::SANDBOX_WORKDIR;

/// The shell every command runs under. `/bin/bash` resolves on merged-`/usr` hosts
/// (through the `/bin` symlink) and on split ones alike.
pub const SHELL: &str = "/bin/bash";

/// The host's top-level program and library directories, mirrored into the sandbox.
const ROOT_DIRS: [&str; 6] = ["/bin", "/sbin", "/lib", "/lib64", "/lib32", "/libx32"];

/// Files and directories of `/etc` that ordinary programs read (user names, the dynamic
/// linker cache, alternatives, CA certificates, time zone). Bound only if they exist.
/// Not `/etc/ssl/private` and nothing else that holds secrets.
const ETC_ENTRIES: [&str; 17] = [
    "/etc/passwd",
    "/etc/group",
    "/etc/nsswitch.conf",
    "/etc/host.conf",
    "/etc/hosts",
    "/etc/gai.conf",
    "/etc/protocols",
    "/etc/services",
    "/etc/ld.so.cache",
    "/etc/ld.so.conf",
    "/etc/ld.so.conf.d",
    "/etc/alternatives",
    "/etc/localtime",
    "/etc/mime.types",
    "/etc/ssl/certs",
    "/etc/ssl/openssl.cnf",
    "/etc/ca-certificates",
];

/// Where the helper appears inside a kept sandbox (as in the docker backend's containers).
pub const HELPER_PATH: &str = "/.toren-exec";

/// Only with network access: where to find a name server.
const ETC_NETWORK_ENTRIES: [&str; 1] = ["/etc/resolv.conf"];

/// How one of the host's top-level directories (`/bin`, `/lib64`, …) exists.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum RootEntry {
    /// A symlink, as on merged-`/usr` systems (`/bin -> usr/bin`).
    Symlink { path: PathBuf, target: PathBuf },
    /// A real directory, bound read-only.
    Directory { path: PathBuf },
}

/// The host's layout of top-level program and library directories.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HostLayout {
    pub root_entries: Vec<RootEntry>,
}

impl HostLayout {
    /// Looks at the host's `/bin`, `/sbin`, `/lib`, `/lib64`, `/lib32`, `/libx32`; missing
    /// ones are left out.
    pub fn probe() -> Self {
        let root_entries = ROOT_DIRS
            .iter()
            .filter_map(|dir| {
                let path = PathBuf::from(dir);
                let meta = std::fs::symlink_metadata(&path).ok()?;
                if meta.file_type().is_symlink() {
                    let target = std::fs::read_link(&path).ok()?;
                    Some(RootEntry::Symlink { path, target })
                } else if meta.is_dir() {
                    Some(RootEntry::Directory { path })
                } else {
                    None
                }
            })
            .collect();
        Self { root_entries }
    }

    /// The layout of a merged-`/usr` Debian 12 amd64 host.
    pub fn merged_usr() -> Self {
        let link = |path: &str, target: &str| RootEntry::Symlink {
            path: PathBuf::from(path),
            target: PathBuf::from(target),
        };
        Self {
            root_entries: vec![
                link("/bin", "usr/bin"),
                link("/sbin", "usr/sbin"),
                link("/lib", "usr/lib"),
                link("/lib64", "usr/lib64"),
            ],
        }
    }
}

/// Everything the bubblewrap command line depends on.
#[derive(Clone, Copy, Debug)]
pub struct BwrapSpec<'a> {
    /// The workspace directory on the host.
    pub workspace: &'a Path,
    /// Whether the sandbox shares the host's network (`network: true`).
    pub network: bool,
    pub layout: &'a HostLayout,
    /// Bytes the sandbox's `/tmp` may hold (it lives in memory), normally the memory
    /// limit; `/dev/shm` gets at most [`SHM_SIZE`] of it. A kept sandbox's `/tmp` gets half
    /// of it and its `/dev/shm` at most a quarter.
    pub tmp_size: u64,
    /// The descriptor from which bubblewrap reads the seccomp filter, if any.
    pub seccomp_fd: Option<i32>,
    /// What runs in the sandbox.
    pub inside: Inside<'a>,
    /// With a host list: the host directory of the run's egress proxy socket, bound
    /// read-only at [`SANDBOX_EGRESS_DIR`]; the helper then relays the proxy port to it
    /// (`crate::egress`). The network namespace stays unshared: only loopback exists.
    pub egress: Option<&'a Path>,
}

/// What a sandbox runs.
#[derive(Clone, Copy, Debug)]
pub enum Inside<'a> {
    /// One shell command under bubblewrap's own init; the sandbox ends with it, and is
    /// killed if the thread that started bubblewrap goes away (`--die-with-parent`).
    Command(&'a str),
    /// The helper (at this host path) as PID 1 (`--as-pid-1`), serving commands over its
    /// stdio until its input ends, which is how the sandbox ends.
    Helper(&'a Path),
}

/// The arguments to pass to `bwrap` (without the program name) to run `spec.command`.
pub fn bwrap_argv(spec: &BwrapSpec<'_>) -> Vec<OsString> {
    let mut argv = Args::default();
    // Every namespace, including a user namespace even when running as root; then no
    // nested user namespaces and no capabilities for the command.
    argv.push(["--unshare-all", "--unshare-user"]);
    if spec.network {
        argv.push(["--share-net"]);
    }
    argv.push(["--disable-userns", "--cap-drop", "ALL"]);
    match spec.inside {
        Inside::Command(_) => argv.push(["--die-with-parent"]),
        // The helper is the sandbox's init and reaper. A kept sandbox must not die with
        // the thread that happened to start it: it ends when its input does (the backend
        // closed it, or went away), and the backend kills it by its cgroup.
        Inside::Helper(_) => argv.push(["--as-pid-1"]),
    }
    argv.push(["--new-session", "--hostname", "toren-sandbox"]);

    argv.push(["--ro-bind", "/usr", "/usr"]);
    for entry in &spec.layout.root_entries {
        match entry {
            RootEntry::Symlink { path, target } => {
                argv.push_os(["--symlink".as_ref(), target.as_os_str(), path.as_os_str()]);
            }
            RootEntry::Directory { path } => {
                argv.push_os(["--ro-bind".as_ref(), path.as_os_str(), path.as_os_str()]);
            }
        }
    }
    let network_entries: &[&str] = if spec.network {
        &ETC_NETWORK_ENTRIES
    } else {
        &[]
    };
    for entry in ETC_ENTRIES.iter().chain(network_entries) {
        argv.push(["--ro-bind-try", entry, entry]);
    }
    // The memory-backed filesystems are sized, and the rest of `/dev` and the root itself
    // are read-only, so no command can fill the host's memory through them.
    let (tmp, shm) = match spec.inside {
        Inside::Command(_) => (spec.tmp_size, spec.tmp_size.min(SHM_SIZE)),
        // They last for the run and what they hold counts against the memory limit that
        // all of the sandbox's commands share: at least a quarter is always left.
        Inside::Helper(_) => (spec.tmp_size / 2, (spec.tmp_size / 4).min(SHM_SIZE)),
    };
    let (tmp, shm) = (tmp.to_string(), shm.to_string());
    argv.push(["--proc", "/proc", "--dev", "/dev"]);
    argv.push([
        "--size",
        &shm,
        "--tmpfs",
        "/dev/shm",
        "--remount-ro",
        "/dev",
    ]);
    argv.push(["--size", &tmp, "--tmpfs", "/tmp"]);

    // bubblewrap mounts every `--bind` with MS_NOSUID and MS_NODEV (only `--dev-bind`
    // allows devices), so set-uid programs and device nodes in the workspace mean nothing
    // in here; the trust suite's hardening probe reads /proc/self/mountinfo to prove it.
    argv.push_os([
        "--bind".as_ref(),
        spec.workspace.as_os_str(),
        SANDBOX_WORKDIR.as_ref(),
    ]);
    if let Inside::Helper(path) = spec.inside {
        argv.push_os(["--ro-bind".as_ref(), path.as_os_str(), HELPER_PATH.as_ref()]);
    }
    if let Some(dir) = spec.egress {
        argv.push_os([
            "--ro-bind".as_ref(),
            dir.as_os_str(),
            SANDBOX_EGRESS_DIR.as_ref(),
        ]);
    }
    argv.push(["--remount-ro", "/", "--chdir", SANDBOX_WORKDIR]);
    if let Some(fd) = spec.seccomp_fd {
        argv.push(["--seccomp", &fd.to_string()]);
    }
    match spec.inside {
        Inside::Command(command) => argv.push(["--", SHELL, "-c", command]),
        Inside::Helper(_) => {
            argv.push(["--", HELPER_PATH]);
            if spec.egress.is_some() {
                argv.0.extend(helper_args().into_iter().map(OsString::from));
            }
        }
    }
    argv.0
}

/// The environment of the sandboxed command: a minimal `PATH`, `HOME` and `LANG`, then the
/// granted variables (which may override those three). bwrap is spawned with exactly this
/// environment and passes it on, so the values never appear in any argv.
pub fn sandbox_env(granted: &[(String, String)]) -> Vec<(String, String)> {
    let mut env = vec![
        ("PATH".to_owned(), SANDBOX_PATH.to_owned()),
        ("HOME".to_owned(), SANDBOX_WORKDIR.to_owned()),
        ("LANG".to_owned(), "C.UTF-8".to_owned()),
    ];
    for (name, value) in granted {
        env.retain(|(n, _)| n != name);
        env.push((name.clone(), value.clone()));
    }
    env
}

#[derive(Default)]
struct Args(Vec<OsString>);

impl Args {
    fn push<const N: usize>(&mut self, args: [&str; N]) {
        self.0.extend(args.iter().map(OsString::from));
    }

    fn push_os<const N: usize>(&mut self, args: [&std::ffi::OsStr; N]) {
        self.0.extend(args.iter().map(OsString::from));
    }
}
