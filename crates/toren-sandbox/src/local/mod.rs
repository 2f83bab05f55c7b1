//! The `local` backend: commands run under bubblewrap (Linux namespaces, no daemon) over
//! the run's workspace directory. [`LocalBackend`] checks bwrap once and opens one
//! [`Sandbox`] per run. With the `toren-exec` helper (the normal case) a run keeps one
//! bubblewrap sandbox with the helper as its PID 1 and sends it each command (`warm`, over
//! `session`); without it, each command is a fresh `bwrap … bash -c` (`exec`), several
//! times slower but with the same confinement. Either way the argv is built by the pure
//! `argv` module, under the resource limits of `limits` (with `cgroup`) and the system
//! call filter of `seccomp`.

mod argv;
mod cgroup;
mod exec;
mod limits;
mod seccomp;
mod session;
mod warm;

use std::fmt;
use std::fs::DirBuilder;
use std::os::fd::{AsRawFd, OwnedFd};
use std::os::unix::fs::DirBuilderExt;
use std::path::{Path, PathBuf};
use std::process::Stdio;
use std::sync::Arc;

use async_trait::async_trait;
use toren_protocol::{ResolvedPolicy, ResourceLimits, RunId};

pub use argv::{
    BwrapSpec, HELPER_PATH, HostLayout, Inside, RootEntry, SHELL, bwrap_argv, sandbox_env,
};
pub use limits::{Enforcement, LimitEnforcement};

use limits::Limiter;
use warm::Warm;

use crate::backend::SandboxBackend;
use crate::egress::{self, EgressHooks, RunningProxy, SharedResolver};
use crate::error::{Error, Result};
use crate::pinned::pinned_workspace;
use crate::sandbox::{ExecOutput, ExecRequest, Sandbox, check_command};
use crate::workspace::Workspace;

/// Where `bwrap` is looked for when the settings name no path.
const BWRAP_CANDIDATES: [&str; 3] = ["/usr/bin/bwrap", "/usr/local/bin/bwrap", "/bin/bwrap"];

/// Settings of the local backend, resolved by the caller.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct LocalSettings {
    /// Workspaces live at `<sandbox_root>/<run id>/workspace` (see `workspace_path`).
    pub sandbox_root: PathBuf,
    /// The `bwrap` binary; `None` looks in `/usr/bin`, `/usr/local/bin` and `/bin`.
    pub bwrap: Option<PathBuf>,
}

/// The bubblewrap backend.
#[derive(Clone, Debug)]
pub struct LocalBackend {
    settings: LocalSettings,
    bwrap: Option<PathBuf>,
    /// The helper as configured ([`LocalBackend::with_exec_helper`]).
    exec_helper: Option<PathBuf>,
    /// The helper, if there is one at the configured path.
    helper: Option<PathBuf>,
    layout: Arc<HostLayout>,
    limiter: Arc<Limiter>,
    /// How the egress proxies of runs with a host list resolve names.
    resolver: SharedResolver,
    /// What the egress proxies verify the hosts that get secrets against.
    upstream: toren_egress::UpstreamTrust,
}

impl LocalBackend {
    /// The backend's name, as recorded in policies and events.
    pub const NAME: &'static str = "local";

    /// Finds bwrap, records the host's directory layout and finds how resource limits can
    /// be enforced here; call [`check`](Self::check) once at startup to find out whether
    /// sandboxes can actually be created.
    pub fn new(settings: LocalSettings) -> Self {
        let bwrap = match &settings.bwrap {
            Some(path) => path.is_file().then(|| path.clone()),
            None => BWRAP_CANDIDATES
                .iter()
                .map(PathBuf::from)
                .find(|p| p.is_file()),
        };
        Self {
            settings,
            bwrap,
            exec_helper: None,
            helper: None,
            layout: Arc::new(HostLayout::probe()),
            limiter: Arc::new(Limiter::probe()),
            resolver: SharedResolver::default(),
            upstream: toren_egress::UpstreamTrust::default(),
        }
    }

    /// The egress proxies of runs with a host list resolve names with `resolver` instead of
    /// the system's (the binary's test-only mapping). Whatever it answers, the proxy's
    /// address checks still refuse loopback, private and metadata addresses.
    pub fn with_egress_resolver(mut self, resolver: Arc<dyn toren_egress::Resolver>) -> Self {
        self.resolver = SharedResolver(resolver);
        self
    }

    /// The egress proxies verify the hosts that get secrets against `upstream` instead of
    /// the system's roots. Tests only: the binary sets it from a test-only setting.
    #[must_use]
    pub fn with_egress_upstream(mut self, upstream: toren_egress::UpstreamTrust) -> Self {
        self.upstream = upstream;
        self
    }

    pub fn settings(&self) -> &LocalSettings {
        &self.settings
    }

    /// How each resource limit is enforced on this host.
    pub fn enforcement(&self) -> LimitEnforcement {
        self.limiter.enforcement()
    }

    /// Runs keep one sandbox each with the `toren-exec` helper at `path` as its PID 1, and
    /// send it each command: several times faster than a fresh bubblewrap per command,
    /// equally confined. Where there is no file at `path`, each command starts a fresh
    /// bubblewrap as without it ([`LocalBackend::check`] warns). (A method rather than a
    /// field of [`LocalSettings`], so existing settings stay valid as they are.)
    pub fn with_exec_helper(mut self, path: PathBuf) -> Self {
        self.helper = path.is_file().then(|| path.clone());
        self.exec_helper = Some(path);
        self
    }

    /// Whether runs keep a sandbox with the helper (else each command is a fresh bwrap).
    pub fn keeps_sandboxes(&self) -> bool {
        self.helper.is_some()
    }

    /// Runs `true` in a sandbox built exactly like a real one (over the sandbox root), so a
    /// missing binary or a host without user namespaces fails at startup with the fix;
    /// then, with the helper, `true` once more through a kept sandbox, so a helper that
    /// cannot serve fails here too.
    pub fn check(&self) -> Result<()> {
        let bwrap = self.bwrap()?;
        let root = &self.settings.sandbox_root;
        DirBuilder::new()
            .recursive(true)
            .mode(0o700)
            .create(root)
            .map_err(|e| {
                Error::io(
                    format!("cannot create the sandbox root `{}`", root.display()),
                    e,
                )
            })?;
        let spec = BwrapSpec {
            workspace: root,
            network: false,
            layout: &self.layout,
            tmp_size: ResourceLimits::default().memory,
            seccomp_fd: None,
            inside: Inside::Command("true"),
            egress: None,
        };
        // The seccomp filter, on a descriptor bwrap inherits (the real commands get theirs
        // from the pre-exec hook instead).
        let filter = seccomp_for_check()?;
        let spec = BwrapSpec {
            seccomp_fd: filter.as_ref().map(AsRawFd::as_raw_fd),
            ..spec
        };
        let child = std::process::Command::new(bwrap)
            .args(bwrap_argv(&spec))
            .env_clear()
            .envs(sandbox_env(&[]))
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .map_err(|e| Error::io(format!("cannot start `{}`", bwrap.display()), e))?;
        let probe = wait_bounded(child, PROBE_TIMEOUT)
            .map_err(|e| Error::io(format!("cannot run `{}`", bwrap.display()), e))?;
        drop(filter);
        let Some(probe) = probe else {
            return Err(Error::BwrapUnusable {
                stderr: format!(
                    "bubblewrap did not finish a trivial command within {} s",
                    PROBE_TIMEOUT.as_secs()
                ),
            });
        };
        if probe.status.success() {
            self.check_helper()?;
            let enforcement = self.enforcement();
            if self.keeps_sandboxes() {
                tracing::info!(
                    %enforcement,
                    "sandbox resource limits (a run's kept sandbox: one cgroup for all its \
                     commands, rlimits per command)"
                );
            } else {
                tracing::info!(%enforcement, "sandbox resource limits (per command)");
            }
            if enforcement.pids == Enforcement::Unenforced {
                tracing::warn!(
                    "no limit on the number of processes a sandboxed command may start: no \
                     writable cgroup was found, and RLIMIT_NPROC does not bind root; see \
                     SECURITY.md"
                );
            }
            Ok(())
        } else {
            let stderr = String::from_utf8_lossy(&probe.stderr).trim().to_owned();
            let stderr = if stderr.is_empty() {
                format!("bwrap {}", probe.status)
            } else {
                stderr
            };
            Err(Error::BwrapUnusable { stderr })
        }
    }

    /// Creates (or reopens) the run's workspace and returns a sandbox over it. `env` holds
    /// the granted variables with their values; they reach the command through its
    /// environment only. The policy's `image` means nothing to this backend. A host list
    /// gets an egress proxy with the default hooks ([`LocalBackend::open_with`]).
    pub async fn open(
        &self,
        run_id: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
    ) -> Result<Arc<dyn Sandbox>> {
        self.open_with(run_id, policy, env, EgressHooks::default())
            .await
    }

    /// [`open`](Self::open), and with a host list in the policy, the run's egress proxy
    /// (`crate::egress`) started with `hooks` on a socket beside the workspace, bound into
    /// the kept sandbox, where the helper relays `127.0.0.1:3128` to it; it stops when the
    /// sandbox is dropped. A host list needs the helper: without it, opening fails.
    pub async fn open_with(
        &self,
        run_id: &RunId,
        policy: &ResolvedPolicy,
        mut env: Vec<(String, String)>,
        hooks: EgressHooks,
    ) -> Result<Arc<dyn Sandbox>> {
        let bwrap = self.bwrap()?.to_owned();
        for (name, value) in &env {
            check_env(name, value)?;
        }
        let workspace = pinned_workspace(&self.settings.sandbox_root, run_id, policy)?;
        // As root, bwrap maps only uid 0 into the sandbox: a workspace owned by anyone else
        // would be read-only in there. Say so now rather than at the first failed write.
        let owner = workspace.owner_uid()?;
        let uid = nix::unistd::geteuid().as_raw();
        if owner != uid {
            return Err(Error::ForeignWorkspace {
                path: workspace.path().display().to_string(),
                owner,
                uid,
            });
        }
        let proxy = match egress::proxied(policy) {
            None => None,
            Some(_) if self.helper.is_none() => return Err(Error::EgressNeedsHelper),
            Some(hosts) => {
                let dir = egress::egress_dir(workspace.path());
                let proxy = RunningProxy::start(
                    &dir,
                    hosts,
                    Arc::clone(&self.resolver.0),
                    &self.upstream,
                    hooks,
                )?;
                proxy.add_env(&mut env);
                Some(proxy)
            }
        };
        let warm = self.helper.as_ref().map(|helper| {
            Warm::new(warm::Setup {
                bwrap: bwrap.clone(),
                helper: helper.clone(),
                workspace: workspace.path().to_owned(),
                network: policy.network,
                layout: Arc::clone(&self.layout),
                limiter: Arc::clone(&self.limiter),
                limits: policy.limits,
                egress: proxy.as_ref().map(|p| p.dir().to_owned()),
            })
        });
        Ok(Arc::new(LocalSandbox {
            bwrap,
            workspace,
            network: policy.network,
            layout: Arc::clone(&self.layout),
            limiter: Arc::clone(&self.limiter),
            limits: policy.limits,
            env: sandbox_env(&env),
            warm,
            _proxy: proxy,
        }))
    }

    /// With a helper, runs `true` through a kept sandbox over the sandbox root, on a
    /// thread of its own (this may be called from async code, which must not block on
    /// another runtime); without one, warns that each command starts a fresh bubblewrap.
    fn check_helper(&self) -> Result<()> {
        let Some(helper) = &self.helper else {
            let looked = self.exec_helper.as_ref().map_or_else(
                || "none configured".to_owned(),
                |p| format!("`{}`", p.display()),
            );
            tracing::warn!(
                "no sandbox helper (toren-exec) found ({looked}): each command starts a fresh \
                 bubblewrap, several times slower; build it with scripts/build-exec-helper"
            );
            return Ok(());
        };
        let warm = Warm::new(warm::Setup {
            bwrap: self.bwrap()?.to_owned(),
            helper: helper.clone(),
            workspace: self.settings.sandbox_root.clone(),
            network: false,
            layout: Arc::clone(&self.layout),
            limiter: Arc::clone(&self.limiter),
            limits: ResourceLimits::default(),
            egress: None,
        });
        let failed = |why: String| Error::HelperFailed {
            path: helper.display().to_string(),
            why,
        };
        let probe = std::thread::Builder::new()
            .name("helper-probe".into())
            .spawn(move || {
                let runtime = tokio::runtime::Builder::new_current_thread()
                    .enable_all()
                    .build()
                    .map_err(|e| Error::io("cannot start a runtime for the probe", e))?;
                runtime.block_on(async {
                    let req = ExecRequest {
                        command: "true".to_owned(),
                        timeout: PROBE_TIMEOUT,
                        output_limit: 1024,
                    };
                    let out = warm.exec(&req, &sandbox_env(&[])).await;
                    // Gone before the probe's runtime is: no cgroup is left behind.
                    warm.close().await;
                    out
                })
            })
            .map_err(|e| Error::io("cannot start the helper probe", e))?;
        let out = probe
            .join()
            .map_err(|_| failed("the probe panicked".to_owned()))??;
        if out.exit_code == Some(0) {
            tracing::info!(helper = %helper.display(), "runs keep a sandbox with the helper");
            Ok(())
        } else {
            Err(failed(format!("`true` came back as {out:?}")))
        }
    }

    fn bwrap(&self) -> Result<&Path> {
        self.bwrap.as_deref().ok_or_else(|| Error::BwrapMissing {
            searched: match &self.settings.bwrap {
                Some(path) => format!("`{}`", path.display()),
                None => BWRAP_CANDIDATES.map(|p| format!("`{p}`")).join(", "),
            },
        })
    }
}

#[async_trait]
impl SandboxBackend for LocalBackend {
    fn name(&self) -> &'static str {
        Self::NAME
    }

    async fn open(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
    ) -> Result<Arc<dyn Sandbox>> {
        LocalBackend::open(self, run, policy, env).await
    }

    async fn open_with(
        &self,
        run: &RunId,
        policy: &ResolvedPolicy,
        env: Vec<(String, String)>,
        egress: EgressHooks,
    ) -> Result<Arc<dyn Sandbox>> {
        LocalBackend::open_with(self, run, policy, env, egress).await
    }

    // `finish` and `release` keep the default: a run's kept sandbox ends when the sandbox
    // is dropped, which the worker does when it stops driving the run.

    async fn ready(&self) -> Result<()> {
        let bwrap = self.bwrap()?;
        if !bwrap.is_file() {
            return Err(Error::BwrapMissing {
                searched: format!("`{}`", bwrap.display()),
            });
        }
        if let Some(helper) = &self.helper
            && !helper.is_file()
        {
            return Err(Error::HelperFailed {
                path: helper.display().to_string(),
                why: "it is gone".to_owned(),
            });
        }
        Ok(())
    }
}

/// How long the check's trivial command may take before bubblewrap is judged unusable here.
const PROBE_TIMEOUT: std::time::Duration = std::time::Duration::from_secs(20);

/// Waits for `child` at most `timeout`; kills it and answers `None` past that.
fn wait_bounded(
    mut child: std::process::Child,
    timeout: std::time::Duration,
) -> std::io::Result<Option<std::process::Output>> {
    let deadline = std::time::Instant::now() + timeout;
    loop {
        if child.try_wait()?.is_some() {
            return child.wait_with_output().map(Some);
        }
        if std::time::Instant::now() >= deadline {
            let _ = child.kill();
            let _ = child.wait();
            return Ok(None);
        }
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}

/// The seccomp filter every command of this backend runs under, as the bytes bubblewrap's
/// `--seccomp FD` reads; `None` on an architecture without one. For programs that run
/// bubblewrap exactly as the backend does (the local benchmark's floor).
pub fn seccomp_filter() -> Option<Vec<u8>> {
    seccomp::SUPPORTED.then(seccomp::program)
}

/// The seccomp filter in a pipe whose read end is inheritable, for [`LocalBackend::check`].
fn seccomp_for_check() -> Result<Option<OwnedFd>> {
    if !seccomp::SUPPORTED {
        return Ok(None);
    }
    let fail = |e: nix::errno::Errno| Error::io("cannot pass the seccomp filter", e.into());
    let (reader, writer) = nix::unistd::pipe().map_err(fail)?;
    let program = seccomp::program();
    let written = nix::unistd::write(&writer, &program).map_err(fail)?;
    if written != program.len() {
        return Err(fail(nix::errno::Errno::EIO));
    }
    Ok(Some(reader))
}

fn check_env(name: &str, value: &str) -> Result<()> {
    let invalid = |why| {
        Err(Error::InvalidEnv {
            name: name.to_owned(),
            why,
        })
    };
    if name.is_empty() {
        invalid("the name is empty")
    } else if name.contains(['=', '\0']) {
        invalid("the name contains `=` or a NUL byte")
    } else if value.contains('\0') {
        invalid("the value contains a NUL byte")
    } else {
        Ok(())
    }
}

/// One run's bubblewrap sandbox: kept, with the helper (`warm`), or a fresh
/// `bwrap … bash -c` for every `exec`.
struct LocalSandbox {
    bwrap: PathBuf,
    workspace: Workspace,
    network: bool,
    layout: Arc<HostLayout>,
    limiter: Arc<Limiter>,
    limits: ResourceLimits,
    /// The command's whole environment, granted values included: never logged.
    env: Vec<(String, String)>,
    /// The kept sandbox, when the helper is there.
    warm: Option<Warm>,
    /// The run's egress proxy (a host list), serving while this sandbox lives.
    _proxy: Option<RunningProxy>,
}

impl fmt::Debug for LocalSandbox {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("LocalSandbox")
            .field("workspace", &self.workspace.path())
            .field("network", &self.network)
            .field("limits", &self.limits)
            .field("kept", &self.warm.is_some())
            .field(
                "env",
                &self.env.iter().map(|(name, _)| name).collect::<Vec<_>>(),
            )
            .finish_non_exhaustive()
    }
}

#[async_trait]
impl Sandbox for LocalSandbox {
    fn workspace(&self) -> &Workspace {
        &self.workspace
    }

    fn backend(&self) -> &'static str {
        LocalBackend::NAME
    }

    fn instance_id(&self) -> String {
        self.workspace.path().display().to_string()
    }

    async fn exec(&self, req: ExecRequest) -> Result<ExecOutput> {
        check_command(&req.command)?;
        if let Some(warm) = &self.warm {
            return warm.exec(&req, &self.env).await;
        }
        let prepared = self
            .limiter
            .prepare(&self.limits)
            .map_err(|e| Error::io("cannot set up the command's resource limits", e))?;
        let spec = BwrapSpec {
            workspace: self.workspace.path(),
            network: self.network,
            layout: &self.layout,
            tmp_size: self.limits.memory,
            seccomp_fd: prepared.setup.seccomp_fd(),
            inside: Inside::Command(&req.command),
            // Never with a host list: that needs the kept sandbox (`open_with`).
            egress: None,
        };
        exec::run(
            &self.bwrap,
            bwrap_argv(&spec),
            &self.env,
            &req,
            &self.limits,
            prepared,
        )
        .await
    }
}
