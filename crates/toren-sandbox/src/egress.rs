//! A run's egress proxy as the backends start it: when the pinned policy lists
//! hosts (`network: [pypi.org, …]`, so `network` is false and `egress` is set), the sandbox
//! keeps its own network namespace with nothing but loopback, and its only way out is one
//! `toren_egress::Proxy` per run, owned by the Toren process that drives the run. The proxy
//! listens on a unix socket in the run's private directory (`<run dir>/egress/proxy.sock`,
//! beside the workspace, never in it); the backend binds that directory into the sandbox at
//! [`SANDBOX_EGRESS_DIR`], and the `toren-exec` helper inside relays
//! `127.0.0.1:`[`PROXY_PORT`] to the socket ([`helper_args`]). Commands get `HTTP_PROXY`
//! and friends ([`proxy_env`]). The proxy stops when its [`RunningProxy`] is dropped, which
//! the backends tie to the run's sandbox.
//!
//! The directory, not the socket file, is bound, so a proxy restarted by another process
//! (a run taken over) is reached by a container that outlived the first one.
//!
//! What the proxy asks and tells per run comes from the caller as [`EgressHooks`] (the
//! worker's journal-backed approver and recorder); names are resolved by the backend's
//! [`Resolver`] (the system's, or the binary's test-only mapping).

use std::collections::HashMap;
use std::fmt;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::{DirBuilderExt, FileTypeExt, MetadataExt, PermissionsExt};
use std::path::{Path, PathBuf};
use std::sync::Arc;

use tokio_util::sync::{CancellationToken, DropGuard};
use toren_egress::{
    Approver, Decision, DenyAll, Interception, Outcome, Proxy, ProxyConfig, Recorder, Resolver,
    SystemResolver,
};
use toren_protocol::{EgressPolicy, ResolvedPolicy};

/// What the proxies verify the hosts that get secrets against (re-exported for the binary).
pub use toren_egress::UpstreamTrust;

use crate::error::{Error, Result};

/// Where the proxy's directory appears inside a sandbox.
pub const SANDBOX_EGRESS_DIR: &str = "/.toren-egress";

/// The socket's name in that directory (and in the host directory).
pub const EGRESS_SOCKET: &str = "proxy.sock";

/// The loopback port inside the sandbox that the helper relays to the proxy.
pub const PROXY_PORT: u16 = 3128;

/// The host directory of a run's proxy socket: `egress` beside the workspace, in the run's
/// private 0700 directory (which no sandbox sees).
pub fn egress_dir(workspace: &Path) -> PathBuf {
    workspace.parent().unwrap_or(workspace).join("egress")
}

/// The longest path a unix socket address holds (`sun_path` less its NUL).
const SUN_PATH_MAX: usize = 107;

/// What one run's proxy asks and tells: an [`Approver`] for hosts outside the list on
/// `ask` (the connection is held until it answers) and a [`Recorder`] of every decision.
/// The default refuses every ask and logs each decision; the worker passes its own,
/// journal-backed ones.
#[derive(Clone)]
pub struct EgressHooks {
    pub approver: Arc<dyn Approver>,
    pub recorder: Arc<dyn Recorder>,
    /// The values of the secrets the policy injects (`sandbox.secrets`), by name: given
    /// to the proxy only, never to the sandbox. A secret without its value here makes
    /// the proxy refuse to start, naming it.
    pub secrets: Vec<(String, String)>,
    /// Where a backend that can lose the workspace (E2B) asks what to put back into a
    /// replacement instance; the worker passes one that reads the run's journal.
    pub restore: Option<crate::SharedRestoreSource>,
}

impl Default for EgressHooks {
    fn default() -> Self {
        Self {
            approver: Arc::new(DenyAll),
            recorder: Arc::new(LogRecorder),
            secrets: Vec::new(),
            restore: None,
        }
    }
}

impl fmt::Debug for EgressHooks {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("EgressHooks").finish_non_exhaustive()
    }
}

/// The host list a policy puts behind the proxy, if any (`network: true` needs none).
pub fn proxied(policy: &ResolvedPolicy) -> Option<&EgressPolicy> {
    policy.egress.as_ref().filter(|_| !policy.network)
}

/// The variables that point HTTP clients at the relay inside the sandbox (both cases, as
/// curl reads only the lower-case `http_proxy`), and an empty `NO_PROXY` so nothing is
/// sent around it (a direct connection fails anyway: there is no route).
pub fn proxy_env() -> Vec<(String, String)> {
    let url = format!("http://127.0.0.1:{PROXY_PORT}");
    let mut env: Vec<(String, String)> = ["HTTP_PROXY", "HTTPS_PROXY", "http_proxy", "https_proxy"]
        .iter()
        .map(|name| ((*name).to_owned(), url.clone()))
        .collect();
    env.push(("NO_PROXY".to_owned(), String::new()));
    env.push(("no_proxy".to_owned(), String::new()));
    env
}

/// Adds [`proxy_env`] to a command's granted variables (replacing any of the same name:
/// the proxy is the sandbox's only way out, whatever the operator's environment says).
pub fn add_proxy_env(env: &mut Vec<(String, String)>) {
    let proxy = proxy_env();
    env.retain(|(name, _)| !proxy.iter().any(|(n, _)| n == name));
    env.extend(proxy);
}

/// A backend's resolver for its proxies (the system's unless set), printable.
#[derive(Clone)]
pub struct SharedResolver(pub Arc<dyn Resolver>);

impl Default for SharedResolver {
    fn default() -> Self {
        Self(Arc::new(SystemResolver))
    }
}

impl fmt::Debug for SharedResolver {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("SharedResolver")
    }
}

/// The CA bundle's name in the proxy's directory (system roots + the run's CA), written when
/// the policy injects secrets.
pub const CA_BUNDLE: &str = "ca-bundle.pem";

/// Where the usual system bundles are; the first that exists is the bundle's base.
const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/cert.pem",
];

/// The host's system roots (PEM), empty when none is found.
fn system_roots() -> Vec<u8> {
    SYSTEM_BUNDLES
        .iter()
        .find_map(|path| std::fs::read(path).ok())
        .unwrap_or_default()
}

/// The variables that make curl, Python (requests, ssl), Node, git and OpenSSL-based tools
/// trust the run's CA bundle inside the sandbox.
pub fn ca_env() -> Vec<(String, String)> {
    let path = format!("{SANDBOX_EGRESS_DIR}/{CA_BUNDLE}");
    [
        "SSL_CERT_FILE",
        "REQUESTS_CA_BUNDLE",
        "CURL_CA_BUNDLE",
        "NODE_EXTRA_CA_CERTS",
        "GIT_SSL_CAINFO",
    ]
    .iter()
    .map(|name| ((*name).to_owned(), path.clone()))
    .collect()
}

/// The helper's arguments that make it relay the proxy port to the socket.
pub fn helper_args() -> Vec<String> {
    vec![
        "--forward".to_owned(),
        format!("127.0.0.1:{PROXY_PORT}={SANDBOX_EGRESS_DIR}/{EGRESS_SOCKET}"),
    ]
}

/// One run's proxy, serving until dropped.
pub struct RunningProxy {
    dir: PathBuf,
    /// The socket's (device, inode), so a drop removes only its own socket, never one a
    /// later proxy of the same directory (the session's next turn) made.
    socket: (u64, u64),
    /// Whether `<dir>/ca-bundle.pem` was written (the policy injects secrets).
    ca_bundle: bool,
    _stop: DropGuard,
}

impl fmt::Debug for RunningProxy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("RunningProxy")
            .field("dir", &self.dir)
            .finish_non_exhaustive()
    }
}

impl RunningProxy {
    /// Starts the proxy for `policy` on `<dir>/proxy.sock` (made, or a stale socket
    /// replaced), on the current tokio runtime. `dir` is made 0755 and the socket 0666:
    /// the sandbox's user (a container's may be anyone) must reach it; the run's private
    /// directory above keeps everyone else on the host away.
    ///
    /// A policy with secrets also gets TLS terminated for their hosts
    /// (`toren_egress::Interception`, its hosts verified with `upstream`) and a CA bundle,
    /// `<dir>/`[`CA_BUNDLE`]: the host's system roots and the run's CA certificate (never
    /// its key), which commands are pointed at ([`RunningProxy::add_env`]).
    pub fn start(
        dir: &Path,
        policy: &EgressPolicy,
        resolver: Arc<dyn Resolver>,
        upstream: &UpstreamTrust,
        hooks: EgressHooks,
    ) -> Result<Self> {
        let failed = |what: &str, e: std::io::Error| {
            Error::io(
                format!("cannot start the egress proxy: {what} `{}`", dir.display()),
                e,
            )
        };
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(0o755)
            .create(dir)
            .map_err(|e| failed("cannot make", e))?;
        std::fs::set_permissions(dir, std::fs::Permissions::from_mode(0o755))
            .map_err(|e| failed("cannot set the mode of", e))?;
        let socket = dir.join(EGRESS_SOCKET);
        if socket.as_os_str().len() > SUN_PATH_MAX {
            return Err(Error::io(
                format!(
                    "cannot start the egress proxy: the socket path `{}` is longer than a unix \
                     socket allows ({SUN_PATH_MAX} bytes); use a shorter TOREN_SANDBOX_ROOT",
                    socket.display()
                ),
                std::io::ErrorKind::InvalidInput.into(),
            ));
        }
        match std::fs::symlink_metadata(&socket) {
            Ok(meta) if meta.file_type().is_socket() => {
                std::fs::remove_file(&socket)
                    .map_err(|e| failed("cannot replace the socket in", e))?;
            }
            Ok(_) => {
                return Err(failed(
                    "something other than a socket is at proxy.sock in",
                    std::io::ErrorKind::AlreadyExists.into(),
                ));
            }
            Err(_) => {}
        }
        let listener =
            tokio::net::UnixListener::bind(&socket).map_err(|e| failed("cannot listen in", e))?;
        std::fs::set_permissions(&socket, std::fs::Permissions::from_mode(0o666))
            .map_err(|e| failed("cannot set the socket's mode in", e))?;
        let meta = std::fs::symlink_metadata(&socket).map_err(|e| failed("cannot stat", e))?;
        let interception = Interception::new(policy, &hooks.secrets, upstream).map_err(|e| {
            Error::io(
                format!("cannot start the egress proxy: {e}"),
                std::io::ErrorKind::InvalidInput.into(),
            )
        })?;
        let ca_bundle = match &interception {
            Some(interception) => {
                let bundle = interception.ca().bundle(&system_roots());
                let path = dir.join(CA_BUNDLE);
                std::fs::write(&path, bundle)
                    .map_err(|e| failed("cannot write the CA bundle in", e))?;
                std::fs::set_permissions(&path, std::fs::Permissions::from_mode(0o644))
                    .map_err(|e| failed("cannot set the CA bundle's mode in", e))?;
                true
            }
            None => false,
        };
        let proxy = Proxy::with_interception(
            ProxyConfig {
                policy: policy.clone(),
                resolver,
                approver: hooks.approver,
                recorder: hooks.recorder,
                permit: Vec::new(),
            },
            interception,
        );
        let stop = CancellationToken::new();
        let token = stop.clone();
        let shown = dir.display().to_string();
        tokio::spawn(async move {
            if let Err(error) = proxy.serve_unix(listener, token).await {
                tracing::warn!(%error, dir = %shown, "the egress proxy stopped");
            }
        });
        Ok(Self {
            dir: dir.to_owned(),
            socket: (meta.dev(), meta.ino()),
            ca_bundle,
            _stop: stop.drop_guard(),
        })
    }

    /// Adds the proxy's variables to a command environment ([`add_proxy_env`]) and, when
    /// the proxy injects secrets, points the usual TLS clients at the CA bundle inside the
    /// sandbox ([`ca_env`]).
    pub fn add_env(&self, env: &mut Vec<(String, String)>) {
        add_proxy_env(env);
        if self.ca_bundle {
            let ca = ca_env();
            env.retain(|(name, _)| !ca.iter().any(|(n, _)| n == name));
            env.extend(ca);
        }
    }

    /// The host directory holding the socket (bound into the sandbox).
    pub fn dir(&self) -> &Path {
        &self.dir
    }
}

impl Drop for RunningProxy {
    fn drop(&mut self) {
        // The token (dropped right after) stops the accept loop and every tunnel; a socket
        // left behind would only refuse connections, but tidy up what is ours.
        let socket = self.dir.join(EGRESS_SOCKET);
        if std::fs::symlink_metadata(&socket).is_ok_and(|m| (m.dev(), m.ino()) == self.socket) {
            let _ = std::fs::remove_file(socket);
        }
    }
}

/// The recorder until the worker journals decisions: one log line per decision (host, port,
/// method and outcome; a request carries nothing else the proxy could leak).
#[derive(Clone, Copy, Debug, Default)]
pub struct LogRecorder;

impl Recorder for LogRecorder {
    fn record(&self, decision: Decision) {
        match &decision.outcome {
            Outcome::Allowed { address, approved } => tracing::info!(
                host = %decision.host,
                port = decision.port,
                method = %decision.method,
                %address,
                approved,
                "egress allowed"
            ),
            Outcome::Refused(refusal) => tracing::info!(
                host = %decision.host,
                port = decision.port,
                method = %decision.method,
                why = %refusal.message(),
                "egress refused"
            ),
        }
    }
}

/// Fixed names first, then the system's resolver. The binary builds one from its
/// test-only setting `TOREN_TEST_EGRESS_HOSTS` (`name=ip,…`), so the trust suite reaches
/// its test servers by name. It changes only what a name resolves to, like a line in
/// `/etc/hosts`: every address it gives meets the same address checks as any other.
#[derive(Clone, Debug, Default)]
pub struct MappedResolver {
    names: HashMap<String, Vec<IpAddr>>,
}

impl MappedResolver {
    /// Parses `name=ip,name=ip,…` (a name may repeat, for several addresses).
    pub fn parse(text: &str) -> std::result::Result<Self, String> {
        let mut names: HashMap<String, Vec<IpAddr>> = HashMap::new();
        for entry in text.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            let (name, ip) = entry
                .split_once('=')
                .ok_or_else(|| format!("`{entry}` is not name=address"))?;
            let ip: IpAddr = ip
                .trim()
                .parse()
                .map_err(|_| format!("`{ip}` in `{entry}` is not an IP address"))?;
            names
                .entry(name.trim().to_ascii_lowercase())
                .or_default()
                .push(ip);
        }
        Ok(Self { names })
    }
}

#[async_trait::async_trait]
impl Resolver for MappedResolver {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        match self.names.get(&host.to_ascii_lowercase()) {
            Some(ips) => Ok(ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect()),
            None => SystemResolver.resolve(host, port).await,
        }
    }
}
