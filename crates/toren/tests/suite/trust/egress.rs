//! Network by host: with `network: [hosts…]` the sandbox's only way out is the
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
use std::process::{Child, Command};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::Value;

use super::harness::{self, Call, bash_for};
use super::{Backend, report};
use crate::suite::common::{Toren, text};

/// The allowed host's address inside the test's namespace.
pub(crate) const PUBLIC: &str = "203.0.113.7";
/// Addresses the proxy must never connect to, reachable in the namespace all the same.
pub(crate) const PRIVATE: &str = "10.99.0.7";
pub(crate) const METADATA: &str = "169.254.169.254";

/// What the host played by the test server answers.
pub(crate) const GREETING: &str = "hello from the allowed host";

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

pub(crate) fn answer(mut stream: TcpStream, seen: &Mutex<Vec<String>>) {
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

/// The `host_approval_requested` events of `run`.
fn host_requests(toren: &Toren, run: &str) -> Vec<Value> {
    toren
        .events(run)
        .into_iter()
        .filter(|e| e["type"] == "host_approval_requested")
        .collect()
}

/// Waits until `run` asks about `host` (a `toren run` child that exits first explains why).
fn wait_for_host(toren: &Toren, child: &mut Child, run: &str, host: &str) -> Value {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        if let Some(request) = host_requests(toren, run)
            .into_iter()
            .find(|e| e["host"] == host)
        {
            return request;
        }
        if let Some(exit) = child.try_wait().unwrap() {
            let mut stderr = String::new();
            Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
            panic!("toren exited ({exit}) before asking about {host}: {stderr}");
        }
        assert!(Instant::now() < deadline, "{host} was never asked about");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn decide(toren: &Toren, verb: &str, run: &str, host: &str) {
    let out = toren.run(&[verb, run, &format!("host:{host}")]);
    assert_eq!(
        out.status.code(),
        Some(0),
        "{verb} host:{host}: {}",
        text(&out.stderr)
    );
}

/// `network: {allow: [...], ask: true}`: a connection to an unlisted host waits for a
/// person; `toren approve RUN host:NAME` from another process lets it through (and later
/// connections to that host in the run are not asked about again), `toren deny` refuses it
/// with the proxy's reason, and a run killed while a host waits keeps its requests and
/// decisions when resumed: the decision made meanwhile holds and nothing is asked twice.
fn ask(backend: &Backend, hosts: &str, port: u16) -> usize {
    let hosts = format!("{hosts},asked.test={PUBLIC},denied.test={PUBLIC},resumed.test={PUBLIC}");
    let toren = harness::toren_for(backend).env("TOREN_TEST_EGRESS_HOSTS", &hosts);
    let curl = |host: &str, path: &str| {
        format!("curl -sS -w ' status=%{{http_code}}' http://{host}:{port}/{path}")
    };
    let first = format!(
        "{}; echo; {}",
        curl("asked.test", "asked-first"),
        curl("asked.test", "asked-again")
    );
    let calls = vec![
        bash_for(&format!("{first} 2>&1"), 60),
        bash_for(&format!("{} 2>&1", curl("denied.test", "denied")), 60),
        bash_for(
            &format!("{} 2>&1", curl("resumed.test", "asked-resumed")),
            60,
        ),
    ];
    harness::agent(
        &toren,
        "asking",
        "  approval: never\n  network: {allow: [allowed.test], ask: true}\n",
        &[calls],
    );
    let mut child = toren.spawn(&["run", "asking", "--input", "probe"]);
    let mut count = 0;

    // The first connection waits, and the log says for which host and which command.
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    let request = wait_for_host(&toren, &mut child, &run, "asked.test");
    assert_eq!(request["port"], port, "{request}");
    assert_eq!(request["call_id"], "call_1", "{request}");
    assert!(
        request["command"]
            .as_str()
            .is_some_and(|c| c.contains("asked-first")),
        "{request}"
    );
    assert!(!has_result(&toren, &run, "call_1"), "the call went on");
    count += 1;

    // Approved from another process: both connections of the call reach the host, the
    // second without a new request.
    decide(&toren, "approve", &run, "asked.test");

    // Denied: the command sees the proxy's 403 and its reason.
    wait_for_host(&toren, &mut child, &run, "denied.test");
    decide(&toren, "deny", &run, "denied.test");

    // Killed while a host waits; decided while no toren runs; resumed.
    let request = wait_for_host(&toren, &mut child, &run, "resumed.test");
    assert_eq!(request["call_id"], "call_3", "{request}");
    child.kill().unwrap();
    child.wait().unwrap();
    decide(&toren, "approve", &run, "resumed.test");
    let out = toren.run(&["resume", &run]);
    assert_eq!(out.status.code(), Some(0), "resume: {}", text(&out.stderr));
    let ran = harness::Ran::collect(&toren, out);

    let first = ran.result(0);
    assert!(!first.is_error, "{first:?}");
    assert_eq!(
        shown(&first.output),
        format!("{GREETING}\n status=200\n{GREETING}\n status=200"),
        "approved host"
    );
    count += 2;
    let denied = ran.result(1);
    assert!(
        denied.output.contains("a human denied this host") && denied.output.contains("status=403"),
        "denied host: {denied:?}"
    );
    count += 1;
    // The interrupted call runs again (the default `on_interrupt: rerun`), and the host
    // approved while no toren ran is let through without a new request.
    let resumed = ran.result(2);
    let rerun = shown(&resumed.output);
    assert!(
        rerun.contains("has been run again")
            && rerun.ends_with(&format!("\n{GREETING}\n status=200")),
        "host approved while the run was down: {resumed:?}"
    );
    let mut asked: Vec<String> = host_requests(&toren, &run)
        .iter()
        .map(|e| e["host"].as_str().unwrap().to_owned())
        .collect();
    asked.sort();
    assert_eq!(
        asked,
        ["asked.test", "denied.test", "resumed.test"],
        "one request per host, none again after the resume"
    );
    let decided = ran
        .events
        .iter()
        .filter(|e| e["type"] == "approval_decided")
        .count();
    assert_eq!(decided, 3, "{}", ran.log_text());
    assert_eq!(toren.show(&run)["status"], "completed");
    count += 2;
    count
}

/// A bash result's output without the exit code line the tool adds.
fn shown(output: &str) -> &str {
    output
        .trim_end()
        .trim_end_matches("[exit code: 0]")
        .trim_end()
}

fn has_result(toren: &Toren, run: &str, call: &str) -> bool {
    toren
        .events(run)
        .iter()
        .any(|e| e["type"] == "tool_completed" && e["call_id"] == call)
}

/// The network-policy section, in a network namespace of its own (see the module doc);
/// under e2b, E2B's own firewall is what it probes (`egress_e2b`).
pub(crate) fn suite(backend: &'static Backend) {
    let outcome = std::thread::spawn(move || {
        enter_namespace();
        if backend.sandbox == "e2b" {
            super::egress_e2b::in_namespace(backend);
        } else {
            in_namespace(backend);
        }
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

    count += ask(backend, &hosts, server.port);
    // The asked hosts' requests reached the server only once approved; the denied one never.
    let mut seen = server.requests.lock().unwrap().clone();
    seen.sort();
    assert_eq!(
        seen,
        [
            "GET /asked-again HTTP/1.1",
            "GET /asked-first HTTP/1.1",
            "GET /asked-resumed HTTP/1.1",
            "GET /plain HTTP/1.1",
            "GET /python HTTP/1.1",
            "GET /tunnel HTTP/1.1"
        ],
        "only approved connections reached the host"
    );

    report(backend, "network policy", count);
}
