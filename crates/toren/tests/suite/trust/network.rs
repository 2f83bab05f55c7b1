//! Network (I-8): with `network: false` nothing leaves the sandbox — not a connection to a
//! listener on the host's loopback, not a name lookup, not a raw socket, not an abstract
//! unix socket of the host; with `network: true` the loopback listener is reachable.

use std::net::TcpListener;
use std::os::linux::net::SocketAddrExt;
use std::os::unix::net::{SocketAddr, UnixListener};
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::Duration;

use pretty_assertions::assert_eq;

use super::harness::{self, Call, bash_for};
use super::{Backend, report};

/// A listener on the host's loopback that counts the connections it accepts.
struct Listener {
    port: u16,
    accepted: Arc<AtomicUsize>,
}

fn listen() -> Listener {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    let port = listener.local_addr().unwrap().port();
    let accepted = Arc::new(AtomicUsize::new(0));
    let counter = Arc::clone(&accepted);
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            counter.fetch_add(1, Ordering::SeqCst);
            drop(stream);
        }
    });
    Listener { port, accepted }
}

/// (name, probe, what its output must show).
fn offline_probes(port: u16, abstract_name: &str) -> Vec<(&'static str, Call, &'static str)> {
    let py = |code: &str| bash_for(&format!("python3 -c '{code}' 2>&1 | tail -1"), 20);
    vec![
        (
            "loopback connect",
            bash_for(
                &format!("echo hi > /dev/tcp/127.0.0.1/{port} && echo CONNECTED"),
                20,
            ),
            "Connection refused",
        ),
        (
            "name resolution",
            bash_for("getent hosts example.com || echo no-resolution", 20),
            "no-resolution",
        ),
        (
            "no resolver configuration",
            bash_for("test -e /etc/resolv.conf || echo no-resolv-conf", 20),
            "no-resolv-conf",
        ),
        (
            "udp to the internet",
            bash_for("echo q > /dev/udp/8.8.8.8/53 && echo SENT", 20),
            "Network is unreachable",
        ),
        (
            "raw sockets",
            py(
                "import socket; socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP); print(\"RAW\")",
            ),
            "PermissionError",
        ),
        (
            "abstract unix socket",
            py(&format!(
                "import socket; s = socket.socket(socket.AF_UNIX); s.connect(\"\\0{abstract_name}\"); print(\"ABSTRACT\")"
            )),
            "ConnectionRefusedError",
        ),
        (
            "interfaces",
            bash_for(
                "echo \"interfaces: $(tail -n +3 /proc/net/dev | cut -d: -f1 | tr -d ' ' | tr '\\n' ' ')\"",
                20,
            ),
            "interfaces: lo \n",
        ),
    ]
}

pub(crate) fn suite(backend: &Backend) {
    let mut count = 0;
    let listener = listen();
    // An abstract unix socket lives in the host's network namespace.
    let abstract_name = format!("toren-trust-{}", std::process::id());
    let address = SocketAddr::from_abstract_name(abstract_name.as_bytes()).unwrap();
    let unix = UnixListener::bind_addr(&address).unwrap();

    let toren = harness::toren_for(backend);
    let mut probes = offline_probes(listener.port, &abstract_name);
    probes.retain(|(name, _, _)| backend.applies(name));
    let calls: Vec<Call> = probes.iter().map(|(_, c, _)| c.clone()).collect();
    harness::agent(&toren, "offline", "  approval: never\n", &[calls]);
    let ran = harness::run(&toren, "offline");
    ran.assert_completed();
    for (i, (_, probe, proof)) in probes.iter().enumerate() {
        let result = ran.result(i);
        assert!(
            result.output.contains(proof),
            "{probe:?}: expected {proof:?} in:\n{}",
            result.output
        );
        for escaped in ["CONNECTED", "SENT", "RAW\n", "ABSTRACT"] {
            assert!(
                !result.output.contains(escaped),
                "{probe:?}:\n{}",
                result.output
            );
        }
        count += 1;
    }
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(
        listener.accepted.load(Ordering::SeqCst),
        0,
        "nothing connected"
    );
    unix.set_nonblocking(true).unwrap();
    assert!(
        unix.accept().is_err(),
        "nothing connected to the abstract socket"
    );
    count += 1;

    // Granted, the same listener is reachable (where the backend shares the host's loopback).
    if !backend.applies("host loopback with network") {
        report(backend, "network", count);
        return;
    }
    let online = vec![bash_for(
        &format!(
            "echo hi > /dev/tcp/127.0.0.1/{} && echo CONNECTED",
            listener.port
        ),
        20,
    )];
    harness::agent(
        &toren,
        "online",
        "  approval: never\n  network: true\n",
        &[online],
    );
    let ran = harness::run(&toren, "online");
    ran.assert_completed();
    assert!(
        ran.result(0).output.contains("CONNECTED"),
        "{:?}",
        ran.result(0)
    );
    std::thread::sleep(Duration::from_millis(200));
    assert_eq!(listener.accepted.load(Ordering::SeqCst), 1);
    count += 1;

    report(backend, "network", count);
}
