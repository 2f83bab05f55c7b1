//! The bubblewrap backend, run for real: confinement, environment, network, timeouts,
//! process cleanup and output capture — each both ways the backend runs commands (a
//! sandbox kept per run with the helper, and a fresh bubblewrap per command); then what
//! only a kept sandbox does (`kept_sandbox`).

use std::collections::BTreeSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use tempfile::TempDir;
use toren_protocol::{ApprovalPolicy, EgressPolicy, HostPattern, ResolvedPolicy, RunId};
use toren_sandbox::{
    Error, ExecOutput, ExecRequest, HELPER_PATH, HostLayout, LocalBackend, LocalSettings,
    RootEntry, Sandbox,
};

use super::support::{Mode, backend, both_modes};

both_modes!(
    commands_run_in_the_workspace_and_their_files_persist,
    the_host_outside_the_workspace_is_read_only_or_absent,
    env_holds_only_the_minimum_and_granted_names_and_values_stay_out_of_argv,
    no_file_descriptor_of_the_runtime_reaches_the_command,
    the_kernel_keyrings_are_out_of_reach,
    network_is_unshared_by_default,
    network_is_shared_when_granted,
    a_host_list_goes_out_only_through_the_egress_proxy,
    timeout_kills_the_command_and_its_children,
    nothing_the_command_started_outlives_the_call,
    huge_output_is_capped_to_head_and_tail,
    stdout_and_stderr_interleave_in_order_and_exit_codes_are_reported,
);

pub(crate) struct Fixture {
    pub(crate) root: TempDir,
    pub(crate) sandbox: Arc<dyn Sandbox>,
}

pub(crate) async fn fixture_with(mode: Mode, network: bool, env: Vec<(String, String)>) -> Fixture {
    let root = tempfile::tempdir().unwrap();
    let policy = ResolvedPolicy {
        checkpoints: Default::default(),
        backend: "local".to_owned(),
        image: None,
        network,
        egress: None,
        approval: ApprovalPolicy::Never,
        env: env.iter().map(|(name, _)| name.clone()).collect(),
        limits: Default::default(),
        workspace: None,
        on_interrupt: Default::default(),
        sandbox_key: None,
        volume: None,
    };
    let sandbox = backend(&root.path().join("sandboxes"), mode)
        .open(&RunId::new(), &policy, env)
        .await
        .unwrap();
    Fixture { root, sandbox }
}

pub(crate) async fn fixture(mode: Mode) -> Fixture {
    fixture_with(mode, false, Vec::new()).await
}

impl Fixture {
    pub(crate) async fn run_for(&self, command: &str, timeout: Duration) -> ExecOutput {
        let req = ExecRequest {
            command: command.to_owned(),
            timeout,
            output_limit: 30_000,
        };
        self.sandbox.exec(req).await.unwrap()
    }

    pub(crate) async fn run(&self, command: &str) -> ExecOutput {
        self.run_for(command, Duration::from_secs(20)).await
    }
}

pub(crate) fn ok(output: &str) -> ExecOutput {
    ExecOutput {
        exit_code: Some(0),
        output: output.to_owned(),
        truncated: false,
        timed_out: false,
        limits_hit: Vec::new(),
    }
}

#[tokio::test]
async fn check_passes_on_this_host_and_names_the_fix_when_bwrap_is_missing() {
    let root = tempfile::tempdir().unwrap();
    let sandboxes = root.path().join("sandboxes");
    let per_call = backend(&sandboxes, Mode::PerCall);
    assert!(!per_call.keeps_sandboxes());
    per_call.check().unwrap();
    let kept = backend(&sandboxes, Mode::Kept);
    assert!(kept.keeps_sandboxes());
    kept.check().unwrap();

    let missing = LocalBackend::new(LocalSettings {
        sandbox_root: root.path().join("sandboxes"),
        bwrap: Some("/nonexistent/bwrap".into()),
    });
    let err = missing.check().unwrap_err();
    assert!(matches!(err, Error::BwrapMissing { .. }), "{err:?}");
    assert!(
        err.to_string().contains("apt-get install bubblewrap"),
        "{err}"
    );
    assert!(!err.is_model_fixable());
}

async fn commands_run_in_the_workspace_and_their_files_persist(mode: Mode) {
    let f = fixture(mode).await;
    assert_eq!(f.sandbox.backend(), "local");
    assert_eq!(
        f.sandbox.instance_id(),
        f.sandbox.workspace().path().display().to_string()
    );

    assert_eq!(
        f.run("pwd; echo hello > made.txt; id -u").await,
        ok("/workspace\n0\n")
    );
    let on_host = std::fs::read_to_string(f.sandbox.workspace().path().join("made.txt")).unwrap();
    assert_eq!(on_host, "hello\n");
    assert_eq!(f.run("cat made.txt").await, ok("hello\n"));
}

async fn the_host_outside_the_workspace_is_read_only_or_absent(mode: Mode) {
    let f = fixture(mode).await;
    let marker = tempfile::Builder::new()
        .prefix("toren-host-marker")
        .tempfile_in("/tmp")
        .unwrap();

    let usr = f.run("touch /usr/planted").await;
    assert_eq!(usr.exit_code, Some(1));
    assert!(
        usr.output.contains("Read-only file system"),
        "{}",
        usr.output
    );

    // The sandbox's root holds exactly the entries the argv builds.
    let mut expected: BTreeSet<String> = ["dev", "etc", "proc", "tmp", "usr", "workspace"]
        .map(String::from)
        .into();
    if mode == Mode::Kept {
        expected.insert(HELPER_PATH.trim_start_matches('/').to_owned());
    }
    for entry in HostLayout::probe().root_entries {
        let (RootEntry::Symlink { path, .. } | RootEntry::Directory { path }) = entry;
        expected.insert(path.file_name().unwrap().to_string_lossy().into_owned());
    }
    let listing = f.run("ls -A /").await;
    let seen: BTreeSet<String> = listing.output.lines().map(String::from).collect();
    assert_eq!(seen, expected);

    let name = marker
        .path()
        .file_name()
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert_eq!(
        f.run("ls -A /tmp").await,
        ok(""),
        "host /tmp ({name}) must not be visible"
    );
    assert_eq!(
        f.run("test -e /root || echo no-root").await,
        ok("no-root\n")
    );
    assert_eq!(
        f.run("test -e /etc/ssl/private || echo no-keys").await,
        ok("no-keys\n")
    );
    // Other workspaces and the sandbox root are not reachable.
    let sibling = f.root.path().join("sandboxes").display().to_string();
    assert_eq!(
        f.run(&format!("test -e {sibling} || echo hidden")).await,
        ok("hidden\n")
    );
}

async fn env_holds_only_the_minimum_and_granted_names_and_values_stay_out_of_argv(mode: Mode) {
    let secret = "canary-value-7c1f";
    let granted = vec![("TOREN_CANARY".to_owned(), secret.to_owned())];
    let f = fixture_with(mode, false, granted).await;
    // The test process itself has CARGO_* variables and a PATH of its own.
    assert!(std::env::var_os("CARGO_MANIFEST_DIR").is_some());

    let out = f.run("env").await;
    let names: BTreeSet<&str> = out
        .output
        .lines()
        .filter_map(|l| l.split_once('='))
        .map(|(k, _)| k)
        .collect();
    // PWD, SHLVL and _ are set by bash itself.
    let expected: BTreeSet<&str> =
        ["HOME", "LANG", "PATH", "PWD", "SHLVL", "TOREN_CANARY", "_"].into();
    assert_eq!(names, expected);
    assert!(
        out.output.contains(&format!("TOREN_CANARY={secret}\n")),
        "{}",
        out.output
    );
    assert!(
        out.output
            .contains(&format!("PATH={}\n", toren_sandbox::SANDBOX_PATH))
    );
    assert!(out.output.contains("HOME=/workspace\n"));

    // Every process's argv inside the sandbox (bwrap's or the helper's included) is free
    // of the value.
    let argv = f.run("cat /proc/[0-9]*/cmdline | tr '\\0' ' '").await;
    let init = match mode {
        Mode::Kept => HELPER_PATH,
        Mode::PerCall => "bwrap",
    };
    assert!(argv.output.contains(init), "{}", argv.output);
    assert!(!argv.output.contains(secret), "{}", argv.output);
    if mode == Mode::Kept {
        // The helper, which runs every command of the run, holds no granted value: they
        // travel with each request.
        let init_env = f.run("cat /proc/1/environ; echo read=$?").await;
        assert!(!init_env.output.contains(secret), "{init_env:?}");
    }
}

async fn no_file_descriptor_of_the_runtime_reaches_the_command(mode: Mode) {
    use nix::fcntl::{FcntlArg, FdFlag, fcntl};
    let f = fixture(mode).await;
    // An inheritable descriptor, like one the runtime's own parent might have passed on.
    let leaky = std::fs::File::open("/etc/hostname").unwrap();
    fcntl(&leaky, FcntlArg::F_SETFD(FdFlag::empty())).unwrap();
    let out = f.run("echo fds: $(ls /proc/self/fd | sort -n)").await;
    // 0-2 are the standard streams, 3 is `ls` reading the directory.
    assert_eq!(out, ok("fds: 0 1 2 3\n"));
    drop(leaky);
}

async fn the_kernel_keyrings_are_out_of_reach(mode: Mode) {
    let f = fixture(mode).await;
    // keyctl(KEYCTL_GET_KEYRING_ID, KEY_SPEC_SESSION_KEYRING): refused by the filter.
    let probe = "python3 -c 'import ctypes, platform; \
                 nr = {\"x86_64\": 250, \"aarch64\": 219}[platform.machine()]; \
                 libc = ctypes.CDLL(None, use_errno=True); \
                 print(libc.syscall(nr, 0, -3, 0), ctypes.get_errno())'";
    assert_eq!(f.run(probe).await, ok("-1 1\n"));
}

#[tokio::test]
async fn invalid_granted_variables_are_refused() {
    let root = tempfile::tempdir().unwrap();
    let policy = ResolvedPolicy {
        checkpoints: Default::default(),
        backend: "local".to_owned(),
        image: None,
        network: false,
        egress: None,
        approval: ApprovalPolicy::Always,
        env: vec!["A=B".to_owned()],
        limits: Default::default(),
        workspace: None,
        on_interrupt: Default::default(),
        sandbox_key: None,
        volume: None,
    };
    let env = vec![("A=B".to_owned(), "x".to_owned())];
    let err = backend(&root.path().join("sandboxes"), Mode::Kept)
        .open(&RunId::new(), &policy, env)
        .await
        .unwrap_err();
    assert!(matches!(err, Error::InvalidEnv { .. }), "{err:?}");
}

async fn connect_from_sandbox(mode: Mode, network: bool) -> (ExecOutput, bool) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let f = fixture_with(mode, network, Vec::new()).await;
    let command = format!("echo ping > /dev/tcp/127.0.0.1/{port} && echo connected");
    let (out, accepted) = tokio::join!(
        f.run(&command),
        tokio::time::timeout(Duration::from_secs(5), listener.accept())
    );
    (out, accepted.is_ok())
}

async fn network_is_unshared_by_default(mode: Mode) {
    let f = fixture(mode).await;
    let devices = f
        .run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
        .await;
    assert_eq!(devices, ok("lo\n"));

    let (out, accepted) = connect_from_sandbox(mode, false).await;
    assert_eq!(out.exit_code, Some(1), "{}", out.output);
    assert!(out.output.contains("Connection refused"), "{}", out.output);
    assert!(!accepted);
}

/// `network: [hosts…]` pins an egress policy with `network: false`: the sandbox
/// keeps only loopback, a direct connection to the host's listener fails, and the one way
/// out is the run's egress proxy, which refuses even a listed name whose address is
/// loopback. Without the helper (which relays to the proxy) such a sandbox is not opened
/// at all rather than fall open.
async fn a_host_list_goes_out_only_through_the_egress_proxy(mode: Mode) {
    let listener = tokio::net::TcpListener::bind("127.0.0.1:0").await.unwrap();
    let port = listener.local_addr().unwrap().port();
    let root = tempfile::tempdir().unwrap();
    let policy = ResolvedPolicy {
        checkpoints: Default::default(),
        backend: "local".to_owned(),
        image: None,
        network: false,
        egress: Some(EgressPolicy {
            allow: vec![HostPattern::parse("localhost").unwrap()],
            ask: true,
            secrets: Vec::new(),
        }),
        approval: ApprovalPolicy::Never,
        env: Vec::new(),
        limits: Default::default(),
        workspace: None,
        on_interrupt: Default::default(),
        sandbox_key: None,
        volume: None,
    };
    let opened = backend(&root.path().join("sandboxes"), mode)
        .open(&RunId::new(), &policy, Vec::new())
        .await;
    if mode == Mode::PerCall {
        let Err(error) = opened else {
            panic!("a host list without the helper was opened");
        };
        assert!(
            matches!(error, toren_sandbox::Error::EgressNeedsHelper),
            "{error}"
        );
        return;
    }
    let sandbox = opened.unwrap();
    let f = Fixture { root, sandbox };
    let devices = f
        .run("tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' '")
        .await;
    assert_eq!(devices, ok("lo\n"));
    let command = format!("echo ping > /dev/tcp/localhost/{port} && echo connected");
    let out = f.run(&command).await;
    assert_eq!(out.exit_code, Some(1), "{}", out.output);
    assert!(!out.output.contains("connected"), "{}", out.output);
    // Through the proxy (HTTP_PROXY is set), the listed name is refused for its address.
    let out = f
        .run(&format!(
            "curl -sS -w ' status=%{{http_code}}' http://localhost:{port}/ 2>&1"
        ))
        .await;
    assert!(
        out.output
            .contains("is a loopback address; the proxy never connects there\n status=403"),
        "{}",
        out.output
    );
    // The command has ended: a connection it made would already wait in the backlog, and
    // a zero timeout still polls `accept` once.
    let accepted = tokio::time::timeout(Duration::ZERO, listener.accept()).await;
    assert!(accepted.is_err(), "the host's listener was reached");
}

async fn network_is_shared_when_granted(mode: Mode) {
    let (out, accepted) = connect_from_sandbox(mode, true).await;
    assert_eq!(out, ok("connected\n"));
    assert!(accepted);
}

async fn timeout_kills_the_command_and_its_children(mode: Mode) {
    let f = fixture(mode).await;
    let started = Instant::now();
    let out = f
        .run_for("echo before; sleep 100 & sleep 100", Duration::from_secs(1))
        .await;
    assert!(
        started.elapsed() < Duration::from_secs(5),
        "took {:?}",
        started.elapsed()
    );
    assert_eq!(
        out,
        ExecOutput {
            exit_code: None,
            output: "before\n".to_owned(),
            truncated: false,
            timed_out: true,
            limits_hit: Vec::new(),
        }
    );
}

async fn nothing_the_command_started_outlives_the_call(mode: Mode) {
    let f = fixture(mode).await;
    let started = Instant::now();
    let command = "setsid sh -c 'sleep 1; touch late1' >/dev/null 2>&1 & \
                   nohup sh -c 'sleep 1; touch late2' >/dev/null 2>&1 & \
                   (sleep 1; touch late3) & \
                   echo started";
    assert_eq!(f.run(command).await, ok("started\n"));
    // The third job holds the output pipe; the call still returns at once.
    assert!(
        started.elapsed() < Duration::from_millis(1500),
        "took {:?}",
        started.elapsed()
    );
    tokio::time::sleep(Duration::from_secs(2)).await;
    for late in ["late1", "late2", "late3"] {
        assert!(
            !f.sandbox.workspace().path().join(late).exists(),
            "{late} was created"
        );
    }
}

async fn huge_output_is_capped_to_head_and_tail(mode: Mode) {
    let f = fixture(mode).await;
    let out = f.run("yes | head -c 200000000; echo; echo the-end").await;
    assert_eq!(out.exit_code, Some(0));
    assert!(out.truncated);
    let (head, rest) = out.output.split_once("\n[... ").unwrap();
    let (marker, tail) = rest.split_once(" ...]\n").unwrap();
    assert_eq!(head.len(), 15_000);
    assert!(head.bytes().all(|b| b == b'y' || b == b'\n'));
    assert_eq!(
        marker,
        "199970009 bytes of output cut; showing the first 15000 and last 15000 bytes"
    );
    assert_eq!(tail.len(), 15_000);
    assert!(
        tail.ends_with("y\ny\n\nthe-end\n"),
        "{}",
        &tail[tail.len() - 20..]
    );
}

async fn stdout_and_stderr_interleave_in_order_and_exit_codes_are_reported(mode: Mode) {
    let f = fixture(mode).await;
    let out = f
        .run("echo out1; echo err1 >&2; echo out2; echo err2 >&2; exit 3")
        .await;
    assert_eq!(
        out,
        ExecOutput {
            exit_code: Some(3),
            output: "out1\nerr1\nout2\nerr2\n".to_owned(),
            truncated: false,
            timed_out: false,
            limits_hit: Vec::new(),
        }
    );
    assert_eq!(f.run("kill -9 $$").await.exit_code, Some(137));
    assert_eq!(f.run("printf 'a\\377b'").await, ok("a\u{fffd}b"));
}
