//! Network by host under e2b: a host list is E2B's own allow-list, so the
//! network-policy section runs against the local E2B service's firewall
//! (`toren_test_support::e2b`, whose module doc says what it approximates). As on E2B an
//! allowed name is reached on port 80 (HTTP, matched on `Host`) and 443 (TLS, on the SNI);
//! a name outside the list, another port, and an allowed name that resolves to a private,
//! loopback or metadata address get the connection closed; a direct connection finds no
//! route. The fake's one approximation the probes show: a client reaches the firewall
//! through its socket (`curl --unix-socket`), where E2B redirects every connection of the
//! VM. `ask` cannot be kept by E2B's firewall, so `toren run` refuses such an agent before
//! any run or sandbox exists (exit 2, naming the fix).
//!
//! Like `egress`, this runs in a network namespace of the test's own, where the fake (and
//! with it its firewalls) is started too.

use std::net::{IpAddr, TcpListener};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{Arc, Mutex};

use pretty_assertions::assert_eq;
use serde_json::json;

use super::egress::{GREETING, METADATA, PRIVATE, PUBLIC, answer};
use super::harness::{self, Call, bash_for};
use super::{Backend, report};
use crate::suite::common::text;

/// How a command in the fake's sandbox reaches E2B's firewall (see the module doc).
pub(crate) const VIA: &str = "--unix-socket /.e2b-egress/firewall.sock";

/// An HTTP server on `address:80` answering [`GREETING`], keeping each request line.
fn origin80(address: &str) -> Arc<Mutex<Vec<String>>> {
    let listener = TcpListener::bind((address, 80)).unwrap();
    let requests = Arc::new(Mutex::new(Vec::new()));
    let seen = Arc::clone(&requests);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let seen = Arc::clone(&seen);
            std::thread::spawn(move || answer(stream, &seen));
        }
    });
    requests
}

/// A listener on `address:80` that only counts connections.
fn counting80(address: &str, accepted: &Arc<AtomicUsize>) {
    let listener = TcpListener::bind((address, 80)).unwrap();
    let counter = Arc::clone(accepted);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
}

/// (name, probe, what its output must show).
fn probes() -> Vec<(&'static str, Call, String)> {
    let sh = |command: String| bash_for(&format!("{command} 2>&1"), 30);
    let curl = |url: &str| sh(format!("curl -sS {VIA} {url}; echo rc=$?"));
    vec![
        (
            "allowed host",
            curl("http://allowed.test/plain"),
            format!("{GREETING}\nrc=0"),
        ),
        (
            "allowed by a pattern",
            curl("http://mirror.pkg.test/pattern"),
            format!("{GREETING}\nrc=0"),
        ),
        (
            "unlisted host refused",
            curl("http://other.test/"),
            "rc=52".to_owned(),
        ),
        (
            "the pattern's apex is not under it",
            curl("http://pkg.test/"),
            "rc=52".to_owned(),
        ),
        (
            "an allowed host on another port refused",
            curl("http://allowed.test:8080/"),
            "rc=52".to_owned(),
        ),
        (
            "unlisted host over TLS refused",
            curl("https://other.test/"),
            "rc=35".to_owned(),
        ),
        (
            "allowed name with a private address refused",
            curl("http://private.test/"),
            "rc=52".to_owned(),
        ),
        (
            "allowed name with a loopback address refused",
            curl("http://loopback.test/"),
            "rc=52".to_owned(),
        ),
        (
            "allowed name with the metadata address refused",
            curl("http://metadata.test/"),
            "rc=52".to_owned(),
        ),
        (
            "direct connection bypassing the firewall",
            sh(format!(
                "curl -sS --max-time 10 http://{PUBLIC}/; echo rc=$?"
            )),
            "rc=7".to_owned(),
        ),
        (
            "direct socket to the metadata address",
            sh(format!(
                "echo hi > /dev/tcp/{METADATA}/80 && echo CONNECTED"
            )),
            "Network is unreachable".to_owned(),
        ),
    ]
}

/// The body of the create request that made `run`'s sandbox (the sandbox itself is gone
/// once the run ended).
pub(crate) fn created(fake: &toren_test_support::e2b::FakeE2b, run: &str) -> serde_json::Value {
    let bodies: Vec<serde_json::Value> = fake
        .requests()
        .iter()
        .filter(|r| r.plane == "control" && r.method == "POST" && r.uri == "/sandboxes")
        .map(|r| serde_json::from_str(&r.body).unwrap())
        .filter(|b: &serde_json::Value| b["metadata"]["toren_run"] == run)
        .collect();
    assert_eq!(bodies.len(), 1, "one create for {run}");
    bodies.into_iter().next().unwrap()
}

/// The network-policy section under e2b, in the test's namespace.
pub(crate) fn in_namespace(backend: &Backend) {
    let seen = origin80(PUBLIC);
    let refused_hits = Arc::new(AtomicUsize::new(0));
    for address in [PRIVATE, "127.0.0.1", METADATA] {
        counting80(address, &refused_hits);
    }
    let toren = harness::toren_for(backend);
    let fake = harness::fake().expect("the local E2B service");
    for (name, ip) in [
        ("allowed.test", PUBLIC),
        ("mirror.pkg.test", PUBLIC),
        ("pkg.test", PUBLIC),
        ("other.test", PUBLIC),
        ("private.test", PRIVATE),
        ("loopback.test", "127.0.0.1"),
        ("metadata.test", METADATA),
    ] {
        fake.set_egress_host(name, ip.parse::<IpAddr>().unwrap());
    }
    let probes = probes();
    let calls: Vec<Call> = probes.iter().map(|(_, c, _)| c.clone()).collect();
    harness::agent(
        &toren,
        "egress",
        "  approval: never\n  network: [allowed.test, \"*.pkg.test\", private.test, loopback.test, \
         metadata.test]\n",
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
            !result.output.contains("CONNECTED") && (i < 2 || !result.output.contains(GREETING)),
            "{name}: {}",
            result.output
        );
        count += 1;
    }
    // The sandbox was made with E2B's own allow-list, and only the allowed requests
    // reached the host; nothing reached the private, loopback or metadata listeners.
    let ids = harness::sandbox_ids(&ran.events);
    assert_eq!(ids.len(), 1, "{}", ran.log_text());
    let create = created(fake, &ran.run);
    assert_eq!(create["allow_internet_access"], false);
    assert_eq!(
        create["network"],
        json!({
            "allowOut": ["allowed.test", "*.pkg.test", "private.test", "loopback.test", "metadata.test"],
            "denyOut": ["0.0.0.0/0"],
        })
    );
    let mut requests = seen.lock().unwrap().clone();
    requests.sort();
    assert_eq!(requests, ["GET /pattern HTTP/1.1", "GET /plain HTTP/1.1"]);
    assert_eq!(refused_hits.load(Ordering::SeqCst), 0, "nothing connected");
    count += 3;

    count += ask_refused(backend);
    report(backend, "network policy", count);
}

/// `network: {allow: [...], ask: true}` cannot be kept by E2B's firewall: `toren run`
/// refuses it before a run or a sandbox exists, naming the fix.
fn ask_refused(backend: &Backend) -> usize {
    let toren = harness::toren_for(backend);
    let fake = harness::fake().expect("the local E2B service");
    let creates = fake.calls("create");
    harness::agent(
        &toren,
        "asking",
        "  approval: never\n  network: {allow: [allowed.test], ask: true}\n",
        &[vec![harness::bash("curl http://asked.test/")]],
    );
    let out = toren.run(&["run", "asking", "--input", "probe"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("asks about hosts outside its network list")
            && stderr.contains("the e2b sandbox backend cannot hold a connection")
            && stderr.contains("TOREN_SANDBOX=local or TOREN_SANDBOX=docker"),
        "{stderr}"
    );
    let listed = toren.run(&["runs", "list", "--json"]);
    assert_eq!(text(&listed.stdout).trim(), "[]", "no run was created");
    assert_eq!(fake.calls("create"), creates, "no sandbox was created");
    3
}
