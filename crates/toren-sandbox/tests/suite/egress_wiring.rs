//! How a run's egress proxy is laid out on the host (`toren_sandbox::egress`): its socket
//! beside the workspace, never in it, reachable by any sandbox user (0755 directory, 0666
//! socket) and serving the policy; a stale socket replaced, anything else at its path left
//! alone; a dropped proxy removing only its own socket (a session's next turn may have made
//! the current one); the test-only name mapping; and the variables commands get.

use std::io::{Read, Write};
use std::os::unix::fs::{FileTypeExt, PermissionsExt};
use std::os::unix::net::UnixStream;
use std::path::Path;
use std::sync::Arc;

use pretty_assertions::assert_eq;
use toren_egress::{Resolver, SystemResolver, UpstreamTrust};
use toren_protocol::{EgressPolicy, HostPattern};
use toren_sandbox::EgressHooks;
use toren_sandbox::egress::{
    EGRESS_SOCKET, MappedResolver, RunningProxy, egress_dir, helper_args, proxy_env,
};

fn policy() -> EgressPolicy {
    EgressPolicy {
        allow: vec![HostPattern::parse("pypi.org").unwrap()],
        ask: false,
        secrets: Vec::new(),
    }
}

fn start(dir: &Path) -> toren_sandbox::Result<RunningProxy> {
    RunningProxy::start(
        dir,
        &policy(),
        Arc::new(SystemResolver),
        &UpstreamTrust::System,
        EgressHooks::default(),
    )
}

/// A `CONNECT` to a host outside the list, sent over the socket on a thread of its own (the
/// proxy runs on this test's runtime): the proxy's whole answer.
async fn refused_connect(socket: &Path) -> String {
    let socket = socket.to_owned();
    tokio::task::spawn_blocking(move || {
        let mut stream = UnixStream::connect(&socket).unwrap();
        stream
            .write_all(b"CONNECT example.com:443 HTTP/1.1\r\nHost: example.com:443\r\nConnection: close\r\n\r\n")
            .unwrap();
        let mut answer = String::new();
        stream.read_to_string(&mut answer).unwrap();
        answer
    })
    .await
    .unwrap()
}

#[tokio::test]
async fn the_socket_lives_beside_the_workspace_and_serves_the_policy() {
    let run = tempfile::tempdir().unwrap();
    let workspace = run.path().join("workspace");
    std::fs::create_dir(&workspace).unwrap();
    let dir = egress_dir(&workspace);
    assert_eq!(dir, run.path().join("egress"));
    // A socket a killed process left behind is replaced.
    std::fs::create_dir_all(&dir).unwrap();
    drop(std::os::unix::net::UnixListener::bind(dir.join(EGRESS_SOCKET)).unwrap());
    let proxy = start(&dir).unwrap();
    let socket = dir.join(EGRESS_SOCKET);
    let mode = |p: &Path| std::fs::metadata(p).unwrap().permissions().mode() & 0o777;
    assert_eq!((mode(&dir), mode(&socket)), (0o755, 0o666));
    assert!(
        std::fs::symlink_metadata(&socket)
            .unwrap()
            .file_type()
            .is_socket()
    );
    let answer = refused_connect(&socket).await;
    assert!(
        answer.starts_with("HTTP/1.1 403"),
        "the proxy answered {answer:?}"
    );
    assert!(
        answer.contains("toren egress: this host is not in the agent's network list"),
        "{answer:?}"
    );
    drop(proxy);
    assert!(!socket.exists(), "a dropped proxy removes its socket");
    assert!(UnixStream::connect(&socket).is_err());
}

#[tokio::test]
async fn something_else_at_the_socket_path_is_left_alone() {
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join(EGRESS_SOCKET);
    std::fs::write(&path, "not a socket").unwrap();
    let error = start(dir.path()).unwrap_err();
    assert!(
        error.to_string().contains("something other than a socket"),
        "{error}"
    );
    assert_eq!(std::fs::read_to_string(&path).unwrap(), "not a socket");
}

#[tokio::test]
async fn a_dropped_proxy_leaves_a_later_proxy_s_socket() {
    let dir = tempfile::tempdir().unwrap();
    let first = start(dir.path()).unwrap();
    let second = start(dir.path()).unwrap();
    drop(first);
    let socket = dir.path().join(EGRESS_SOCKET);
    assert!(socket.exists(), "the second proxy's socket is still there");
    let answer = refused_connect(&socket).await;
    assert!(answer.starts_with("HTTP/1.1 403"), "{answer:?}");
    drop(second);
    assert!(!socket.exists());
}

#[tokio::test]
async fn the_test_mapping_resolves_only_its_names_and_rejects_nonsense() {
    let mapped =
        MappedResolver::parse("allowed.test=203.0.113.7, Allowed.Test=2001:db8::7,x.test=10.0.0.1")
            .unwrap();
    assert_eq!(
        mapped.resolve("ALLOWED.test", 8080).await.unwrap(),
        vec![
            "203.0.113.7:8080".parse().unwrap(),
            "[2001:db8::7]:8080".parse().unwrap()
        ]
    );
    assert_eq!(
        mapped.resolve("x.test", 1).await.unwrap(),
        vec!["10.0.0.1:1".parse().unwrap()]
    );
    for bad in ["allowed.test", "allowed.test=nope", "=", "a=1.2.3"] {
        assert!(MappedResolver::parse(bad).is_err(), "{bad} was accepted");
    }
    assert!(MappedResolver::parse("").is_ok());
}

#[test]
fn commands_are_pointed_at_the_relay_and_the_helper_told_to_run_it() {
    let url = "http://127.0.0.1:3128".to_owned();
    assert_eq!(
        proxy_env(),
        [
            ("HTTP_PROXY".to_owned(), url.clone()),
            ("HTTPS_PROXY".to_owned(), url.clone()),
            ("http_proxy".to_owned(), url.clone()),
            ("https_proxy".to_owned(), url),
            ("NO_PROXY".to_owned(), String::new()),
            ("no_proxy".to_owned(), String::new()),
        ]
    );
    assert_eq!(
        helper_args(),
        ["--forward", "127.0.0.1:3128=/.toren-egress/proxy.sock"]
    );
}
