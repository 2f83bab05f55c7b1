//! Network by host (issue 18): with `network: [hosts…]` the sandbox's only way out is the
//! run's egress proxy. Through it an allowed host is reachable (plain HTTP, CONNECT, and
//! Python's urllib honouring `http_proxy`); a host outside the list gets a 403 with the
//! proxy's reason; a listed name that resolves to a loopback, private or metadata address is
//! refused all the same; an IP literal is refused; and a connection that bypasses the proxy
//! finds no route.
//!
//! The hosts are played by servers this test starts in a network namespace of its own,
//! where `toren` runs too (everything is spawned from the one thread that entered it): the
//! allowed host listens on 203.0.113.7 (TEST-NET-3, an address the proxy's checks allow),
//! and a counting listener on every other address (`0.0.0.0`) stands for the loopback,
//! private (10.99.0.7) and metadata (169.254.169.254) targets, all on the namespace's
//! loopback. Names reach them through the test-only `TOREN_TEST_EGRESS_HOSTS` mapping, which
//! changes only name resolution: the production address checks are what refuse. Nothing of
//! this touches the host's own network.

use std::io::{Read, Write};
use std::net::{TcpListener, TcpStream};
use std::process::Command;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;

use super::harness::{self, Call, bash_for};
use super::{Backend, report};

/// The allowed host's address inside the test's namespace.
const PUBLIC: &str = "203.0.113.7";
/// Addresses the proxy must never connect to, reachable in the namespace all the same.
const PRIVATE: &str = "10.99.0.7";
const METADATA: &str = "169.254.169.254";

/// What the host played by the test server answers.
const GREETING: &str = "hello from the allowed host";

/// A server for one address that answers every HTTP request with [`GREETING`] and keeps
/// each request's first line.
struct Origin {
    port: u16,
    requests: Arc<Mutex<Vec<String>>>,
}

fn origin(address: &str) -> Origin {
    let listener = TcpListener::bind((address, 0)).unwrap();
    let port = listener.local_addr().unwrap().port();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&requests);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let seen = Arc::clone(&seen);
            std::thread::spawn(move || answer(stream, &seen));
        }
    });
    Origin { port, requests }
}

fn answer(mut stream: TcpStream, seen: &Mutex<Vec<String>>) {
    let mut head = Vec::new();
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        match stream.read(&mut byte) {
            Ok(1) => head.push(byte[0]),
            _ => return,
        }
    }
    let text = String::from_utf8_lossy(&head);
    seen.lock()
        .unwrap()
        .push(text.lines().next().unwrap_or_default().to_owned());
    let body = format!("{GREETING}\n");
    let _ = write!(
        stream,
        "HTTP/1.1 200 OK\r\nContent-Length: {}\r\nConnection: close\r\n\r\n{body}",
        body.len()
    );
}

/// A listener on every address of the namespace that only counts connections.
fn counting() -> (u16, Arc<AtomicUsize>) {
    let listener = TcpListener::bind("0.0.0.0:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    (port, accepted)
}

/// Puts the calling thread into a new network namespace whose loopback is up and also holds
/// the test's addresses. Everything the thread spawns from now on lives in it.
fn enter_namespace() {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
        .expect("a network namespace of the test's own (the trust suite runs as root)");
    let ip = |args: &[&str]| {
        let out = Command::new("ip").args(args).output().unwrap();
        assert!(
            out.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    };
    ip(&["link", "set", "lo", "up"]);
    for address in [PUBLIC, PRIVATE, METADATA] {
        ip(&["addr", "add", &format!("{address}/32"), "dev", "lo"]);
    }
}

/// (name, probe, what its output must show).
fn probes(port: u16, closed: u16) -> Vec<(&'static str, Call, String)> {
    let sh = |command: String| bash_for(&format!("{command} 2>&1"), 30);
    vec![
        (
            "allowed host by HTTP_PROXY",
            sh(format!("curl -sS http://allowed.test:{port}/plain")),
            GREETING.to_owned(),
        ),
        (
            "allowed host through CONNECT",
            sh(format!(
                "curl -sS --proxytunnel http://allowed.test:{port}/tunnel"
            )),
            GREETING.to_owned(),
        ),
        (
            "allowed host from python",
            sh(format!(
                "python3 -c 'import urllib.request; print(urllib.request.urlopen(\"http://allowed.test:{port}/python\").read().decode())'"
            )),
            GREETING.to_owned(),
        ),
        (
            "unlisted host refused",
            sh(format!(
                "curl -sS -w 'status=%{{http_code}}' http://other.test:{port}/"
            )),
            "toren egress: this host is not in the agent's network list\nstatus=403".to_owned(),
        ),
        (
            "unlisted host refused on CONNECT",
            sh(format!(
                "curl -sS --proxytunnel http://other.test:{port}/; echo rc=$?"
            )),
            "CONNECT tunnel failed, response 403".to_owned(),
        ),
        (
            "allowed name with a private address refused",
            sh(format!(
                "curl -sS -w 'status=%{{http_code}}' http://private.test:{closed}/"
            )),
            format!(
                "{PRIVATE}:{closed} is a private address; the proxy never connects there\nstatus=403"
            ),
        ),
        (
            "allowed name with a loopback address refused",
            sh(format!(
                "curl -sS -w 'status=%{{http_code}}' http://loopback.test:{closed}/"
            )),
            format!(
                "127.0.0.1:{closed} is a loopback address; the proxy never connects there\nstatus=403"
            ),
        ),
        (
            "allowed name with the metadata address refused",
            sh(format!(
                "curl -sS -w 'status=%{{http_code}}' http://metadata.test:{closed}/"
            )),
            format!(
                "{METADATA}:{closed} is a cloud metadata address; the proxy never connects there\nstatus=403"
            ),
        ),
        (
            "IP literal refused",
            sh(format!(
                "curl -sS -w 'status=%{{http_code}}' http://{PUBLIC}:{port}/"
            )),
            "this host is not in the agent's network list\nstatus=403".to_owned(),
        ),
        (
            "direct connection bypassing the proxy",
            sh(format!(
                "curl -sS --noproxy '*' --max-time 10 http://{PUBLIC}:{port}/; echo rc=$?"
            )),
            "rc=7".to_owned(),
        ),
        (
            "direct socket bypassing the proxy",
            sh(format!(
                "echo hi > /dev/tcp/{PUBLIC}/{port} && echo CONNECTED"
            )),
            "Network is unreachable".to_owned(),
        ),
        (
            "direct to the metadata address",
            sh(format!(
                "echo hi > /dev/tcp/{METADATA}/{closed} && echo CONNECTED"
            )),
            "Network is unreachable".to_owned(),
        ),
        (
            "no name resolution inside",
            sh("getent hosts allowed.test || echo no-resolution".to_owned()),
            "no-resolution".to_owned(),
        ),
    ]
}

/// The network-policy section, in a network namespace of its own (see the module doc).
pub(crate) fn suite(backend: &'static Backend) {
    let outcome = std::thread::spawn(move || {
        enter_namespace();
        in_namespace(backend);
    })
    .join();
    if let Err(panic) = outcome {
        std::panic::resume_unwind(panic);
    }
}

fn in_namespace(backend: &Backend) {
    let server = origin(PUBLIC);
    let (closed, refused_hits) = counting();
    let hosts = format!(
        "allowed.test={PUBLIC},other.test={PUBLIC},private.test={PRIVATE},\
         loopback.test=127.0.0.1,metadata.test={METADATA}"
    );
    let toren = harness::toren_for(backend).env("TOREN_TEST_EGRESS_HOSTS", &hosts);
    let probes = probes(server.port, closed);
    let calls: Vec<Call> = probes.iter().map(|(_, c, _)| c.clone()).collect();
    harness::agent(
        &toren,
        "egress",
        "  approval: never\n  network: [allowed.test, private.test, loopback.test, metadata.test]\n",
        &[calls],
    );
    let ran = harness::run(&toren, "egress");
    ran.assert_completed();
    let mut count = 0;
    for (i, (name, _, proof)) in probes.iter().enumerate() {
        let result = ran.result(i);
        assert!(
            result.output.contains(proof.as_str()),
            "{name}: expected {proof:?} in:\n{}",
            result.output
        );
        assert!(
            !result.output.contains("CONNECTED"),
            "{name}: {}",
            result.output
        );
        count += 1;
    }
    // Only the three allowed requests reached the host, each as the proxy sent it on
    // (origin form for plain HTTP; through the tunnel curl's own request); nothing reached
    // the loopback, private or metadata listener.
    let mut seen = server.requests.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        [
            "GET /plain HTTP/1.1",
            "GET /python HTTP/1.1",
            "GET /tunnel HTTP/1.1"
        ]
    );
    assert_eq!(refused_hits.load(Ordering::SeqCst), 0, "nothing connected");
    count += 2;

    // ASK (egress-ask): `network: {allow: [...], ask: true}` — the first connection to an
    // unlisted host waits, `toren approve` from another process allows it, the command
    // continues and reaches the host; belongs here once the worker's approver is wired in
    // (`SandboxBackend::open_with`, see /tmp/prompts/egress-seam.md).

    report(backend, "network policy", count);
}
