//! Secret injection, end to end: an agent file injects `INJECTED_TOKEN`
//! for `api.test`; a TLS server of the test's own CA plays that host. Through the run's
//! egress proxy curl and Python reach it over HTTPS, trusting the run's CA from the bundle
//! the sandbox is given, and the server sees `Authorization: Bearer <value>` on each
//! request — the forged header the command sent replaced. The value itself is found nowhere
//! in the sandbox (its environment, every process's environment and argv under `/proc`, its
//! files), nor in the journal, the debug log or any file Toren wrote.
//!
//! Like the network-policy section (`egress`) this runs in a network namespace of its own:
//! the server listens on 203.0.113.9 (TEST-NET-3, which the proxy's address checks allow),
//! `TOREN_TEST_EGRESS_HOSTS` maps the name to it and `TOREN_TEST_EGRESS_CA` makes the
//! proxy verify it against the test's CA instead of the system's roots. The probes print
//! what they search reversed (`rev`), so redaction by value cannot hide a leak from the test.
//!
//! Under e2b the secret becomes E2B's transform rule for `api.test`: the local E2B
//! service's firewall (the platform CA its sandboxes trust at `/.e2b-egress/ca.pem`) puts
//! the header in, the server plays the host on port 443 as E2B matches TLS there, and the
//! value is in exactly one request Toren made, the create on E2B's control plane.

use std::io::{BufRead, BufReader};
use std::path::Path;
use std::process::{Child, Command, Stdio};

use super::harness::{self, Call, bash_for, contains, files_under};
use super::{Backend, report};
use crate::suite::common::Toren;

/// The secret host's address inside the test's namespace.
const HOST_IP: &str = "203.0.113.9";
const GREETING: &str = "hello from the secret host";

fn enter_namespace() {
    nix::sched::unshare(nix::sched::CloneFlags::CLONE_NEWNET)
        .expect("a network namespace of the test's own (the trust suite runs as root)");
    for args in [
        vec!["link", "set", "lo", "up"],
        vec!["addr", "add", "203.0.113.9/32", "dev", "lo"],
    ] {
        let out = Command::new("ip").args(&args).output().unwrap();
        assert!(
            out.status.success(),
            "ip {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
}

fn openssl(dir: &Path, args: &[&str]) {
    let out = Command::new("openssl")
        .args(args)
        .current_dir(dir)
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "openssl {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A CA of the test's own (`ca.pem`) and a leaf for `api.test` it signed.
fn certificates(dir: &Path) {
    openssl(
        dir,
        &[
            "req",
            "-x509",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "ca.key",
            "-out",
            "ca.pem",
            "-days",
            "2",
            "-subj",
            "/CN=trust test CA",
            "-addext",
            "basicConstraints=critical,CA:TRUE",
            "-addext",
            "keyUsage=critical,keyCertSign",
        ],
    );
    openssl(
        dir,
        &[
            "req",
            "-newkey",
            "ec",
            "-pkeyopt",
            "ec_paramgen_curve:P-256",
            "-nodes",
            "-keyout",
            "leaf.key",
            "-out",
            "leaf.csr",
            "-subj",
            "/CN=api.test",
        ],
    );
    std::fs::write(
        dir.join("leaf.ext"),
        "subjectAltName=DNS:api.test\nbasicConstraints=CA:FALSE\nextendedKeyUsage=serverAuth\n",
    )
    .unwrap();
    openssl(
        dir,
        &[
            "x509",
            "-req",
            "-in",
            "leaf.csr",
            "-CA",
            "ca.pem",
            "-CAkey",
            "ca.key",
            "-CAcreateserial",
            "-out",
            "leaf.pem",
            "-days",
            "2",
            "-extfile",
            "leaf.ext",
        ],
    );
}

const SERVER: &str = r#"
import http.server, ssl, sys
log = sys.argv[1]
class Handler(http.server.BaseHTTPRequestHandler):
    def do_GET(self):
        with open(log, "a") as f:
            f.write(self.path + "\n" + "".join(f"{k}: {v}\n" for k, v in self.headers.items()) + "--\n")
        body = b"hello from the secret host\n"
        self.send_response(200)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)
    def log_message(self, *args):
        pass
server = http.server.HTTPServer(("203.0.113.9", int(sys.argv[2])), Handler)
context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
context.load_cert_chain("leaf.pem", "leaf.key")
server.socket = context.wrap_socket(server.socket, server_side=True)
print(server.server_address[1], flush=True)
server.serve_forever()
"#;

/// The TLS server for `api.test` on `port` (0: any), and its port.
fn server(dir: &Path, port: u16) -> (Child, u16) {
    std::fs::write(dir.join("server.py"), SERVER).unwrap();
    let mut child = Command::new("python3")
        .args(["server.py", "requests.log", &port.to_string()])
        .current_dir(dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let mut line = String::new();
    BufReader::new(child.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    (child, line.trim().parse().unwrap())
}

pub(crate) fn suite(backend: &'static Backend) {
    let outcome = std::thread::spawn(move || {
        enter_namespace();
        if backend.sandbox == "e2b" {
            in_namespace_e2b(backend);
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
    let value = format!("trustsecret-{:x}-{}", std::process::id(), "injected-value");
    let reversed: String = value.chars().rev().collect();
    let base = harness::toren_for(backend);
    let certs = base.dir.path().join("tls");
    std::fs::create_dir_all(&certs).unwrap();
    certificates(&certs);
    let (mut child, port) = server(&certs, 0);
    let toren = base
        .env("INJECTED_TOKEN", &value)
        .env("TOREN_TEST_EGRESS_HOSTS", &format!("api.test={HOST_IP}"))
        .env(
            "TOREN_TEST_EGRESS_CA",
            certs.join("ca.pem").to_str().unwrap(),
        )
        .env("TOREN_LOG", "debug");
    let sh = |command: String| bash_for(&format!("{command} 2>&1"), 30);
    let probes: Vec<(&str, Call, String)> = vec![
        (
            "curl over TLS, a forged header sent",
            sh(format!(
                "curl -sS -H 'Authorization: Bearer forged' https://api.test:{port}/curl"
            )),
            GREETING.to_owned(),
        ),
        (
            "python over TLS",
            sh(format!(
                "python3 -c 'import urllib.request; print(urllib.request.urlopen(\"https://api.test:{port}/python\").read().decode())'"
            )),
            GREETING.to_owned(),
        ),
        (
            // Inside the tunnel to the secret's host, an absolute-form request naming it
            // with another Host gets nothing (a front end routing on Host would hand the
            // secret to another tenant).
            "another Host in the secret host's tunnel",
            sh(format!(
                "curl -sS -o /dev/null -w 'status=%{{http_code}}' -H 'Host: other.test' \
                 --request-target https://api.test:{port}/other-host https://api.test:{port}/"
            )),
            "status=421".to_owned(),
        ),
        (
            "the bundle holds certificates and no key",
            sh("echo certs=$(grep -c 'BEGIN CERTIFICATE' \"$SSL_CERT_FILE\") keys=$(grep -c PRIVATE \"$SSL_CERT_FILE\")".to_owned()),
            "keys=0".to_owned(),
        ),
        ("environment", sh("env | rev".to_owned()), "HTAP".to_owned()),
        (
            "every process's environment and argv",
            sh("for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done | rev; echo proc-read".to_owned()),
            "proc-read".to_owned(),
        ),
        // Last: the search's own argv holds the value while it runs.
        (
            "files",
            sh(format!(
                "needle=$(echo '{reversed}' | rev); grep -rlF --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr \
                 --exclude-dir=dev \"$needle\" / 2>/dev/null | head; echo searched"
            )),
            "searched".to_owned(),
        ),
    ];
    let calls: Vec<Call> = probes.iter().map(|(_, c, _)| c.clone()).collect();
    harness::agent(
        &toren,
        "injector",
        "  approval: never\n  network: [api.test]\n  secrets:\n    INJECTED_TOKEN: {hosts: [api.test], \
         header: \"Authorization: Bearer ${value}\"}\n",
        &[calls],
    );
    let ran = harness::run(&toren, "injector");
    let _ = child.kill();
    let _ = child.wait();
    ran.assert_completed();
    let mut count = 0;
    for (i, (name, _, proof)) in probes.iter().enumerate() {
        let output = &ran.result(i).output;
        assert!(
            output.contains(proof.as_str()),
            "{name}: expected {proof:?} in:\n{output}"
        );
        assert!(
            !output.contains(&value) && !output.contains(&reversed),
            "{name} found the value:\n{output}"
        );
        count += 1;
    }
    let files = ran.result(6).output.clone();
    assert_eq!(
        files, "searched\n[exit code: 0]",
        "a file in the sandbox holds the value"
    );

    // The host saw the real value on both requests to it, and only it (the request for
    // another Host never reached it).
    let log = std::fs::read_to_string(certs.join("requests.log")).unwrap();
    let auth: Vec<&str> = log
        .lines()
        .filter(|line| line.to_ascii_lowercase().starts_with("authorization:"))
        .collect();
    let expected = format!("authorization: Bearer {value}");
    assert_eq!(auth, vec![expected.as_str(), expected.as_str()], "{log}");
    count += 1;

    count += nowhere_in_toren(&toren, &ran, &value);
    report(backend, "secret injection", count);
}

/// The value is nowhere Toren keeps or shows things: the journal (names and hosts only are
/// pinned), the debug log, any file under its home.
fn nowhere_in_toren(toren: &Toren, ran: &harness::Ran, value: &str) -> usize {
    assert!(
        !ran.log_text().contains(value),
        "the journal holds the value"
    );
    assert!(ran.events[0]["policy"]["egress"]["secrets"][0]["name"] == "INJECTED_TOKEN");
    let stderr = String::from_utf8_lossy(&ran.out.stderr);
    assert!(!stderr.contains(value), "the log holds the value");
    for file in files_under(&toren.dir.path().join("toren")) {
        let bytes = std::fs::read(&file).unwrap();
        assert!(
            !contains(&bytes, value),
            "{} holds the value",
            file.display()
        );
    }
    3
}

/// The section under e2b: the secret is E2B's transform rule, the local E2B service's
/// firewall puts it in (see the module doc).
fn in_namespace_e2b(backend: &Backend) {
    let value = format!("trustsecret-{:x}-{}", std::process::id(), "injected-value");
    let reversed: String = value.chars().rev().collect();
    let base = harness::toren_for(backend);
    let fake = harness::fake().expect("the local E2B service");
    let certs = base.dir.path().join("tls");
    std::fs::create_dir_all(&certs).unwrap();
    certificates(&certs);
    let (mut child, _) = server(&certs, 443);
    fake.set_egress_host("api.test", HOST_IP.parse().unwrap());
    fake.set_egress_host("other.test", HOST_IP.parse().unwrap());
    fake.set_egress_trust(std::fs::read(certs.join("ca.pem")).unwrap());
    let toren = base.env("INJECTED_TOKEN", &value).env("TOREN_LOG", "debug");
    let sh = |command: String| bash_for(&format!("{command} 2>&1"), 30);
    let via = super::egress_e2b::VIA;
    let probes: Vec<(&str, Call, String)> = vec![
        (
            "curl over TLS, a forged header sent",
            sh(format!(
                "curl -sS {via} --cacert /.e2b-egress/ca.pem -H 'Authorization: Bearer forged' \
                 https://api.test/curl"
            )),
            GREETING.to_owned(),
        ),
        (
            "another allowed host, no secret for it",
            sh(format!("curl -sS {via} --insecure https://other.test/other")),
            GREETING.to_owned(),
        ),
        (
            "the platform CA holds a certificate and no key",
            sh("echo certs=$(grep -c 'BEGIN CERTIFICATE' /.e2b-egress/ca.pem) keys=$(grep -c PRIVATE /.e2b-egress/ca.pem)".to_owned()),
            "certs=1 keys=0".to_owned(),
        ),
        ("environment", sh("env | rev".to_owned()), "HTAP".to_owned()),
        (
            "every process's environment and argv",
            sh("for f in /proc/[0-9]*/environ /proc/[0-9]*/cmdline; do tr '\\0' ' ' < $f; echo; done | rev; echo proc-read".to_owned()),
            "proc-read".to_owned(),
        ),
        (
            "files",
            sh(format!(
                "needle=$(echo '{reversed}' | rev); grep -rlF --exclude-dir=proc --exclude-dir=sys --exclude-dir=usr \
                 --exclude-dir=dev \"$needle\" / 2>/dev/null | head; echo searched"
            )),
            "searched".to_owned(),
        ),
    ];
    let calls: Vec<Call> = probes.iter().map(|(_, c, _)| c.clone()).collect();
    harness::agent(
        &toren,
        "injector",
        "  approval: never\n  network: [api.test, other.test]\n  secrets:\n    INJECTED_TOKEN: {hosts: [api.test], \
         header: \"Authorization: Bearer ${value}\"}\n",
        &[calls],
    );
    let ran = harness::run(&toren, "injector");
    let _ = child.kill();
    let _ = child.wait();
    ran.assert_completed();
    let mut count = 0;
    for (i, (name, _, proof)) in probes.iter().enumerate() {
        let output = &ran.result(i).output;
        assert!(
            output.contains(proof.as_str()),
            "{name}: expected {proof:?} in:\n{output}"
        );
        assert!(
            !output.contains(&value) && !output.contains(&reversed),
            "{name} found the value:\n{output}"
        );
        count += 1;
    }
    assert_eq!(
        ran.result(5).output,
        "searched\n[exit code: 0]",
        "a file in the sandbox holds the value"
    );

    // The host saw the real value, the forged header replaced; the other allowed host (the
    // same server, reached without the rule's interception) got no Authorization at all.
    let log = std::fs::read_to_string(certs.join("requests.log")).unwrap();
    let auth: Vec<(&str, String)> = log
        .split("--\n")
        .filter_map(|entry| {
            let (path, headers) = entry.split_once('\n')?;
            let auth = headers
                .lines()
                .filter(|line| line.to_ascii_lowercase().starts_with("authorization:"))
                .collect::<Vec<_>>()
                .join(" | ");
            Some((path, auth))
        })
        .collect();
    let expected = format!("authorization: Bearer {value}");
    assert_eq!(
        auth,
        vec![("/curl", expected), ("/other", String::new())],
        "{log}"
    );
    count += 1;

    // Of every request Toren made to E2B, only the sandbox's create carried the value (its
    // transform rule); no command, upload or envd call did, and no other header or field.
    // (The `files` probe's own command holds it reversed, as the probes search for it.)
    let carrying: Vec<String> = fake
        .requests()
        .iter()
        .filter(|r| r.text().contains(&value))
        .map(|r| format!("{} {} {}", r.plane, r.method, r.uri))
        .collect();
    assert_eq!(carrying, ["control POST /sandboxes"]);
    let create = super::egress_e2b::created(fake, &ran.run);
    assert_eq!(
        create["network"],
        serde_json::json!({
            "allowOut": ["api.test", "other.test"],
            "denyOut": ["0.0.0.0/0"],
            "rules": {"api.test": [{"transform": {"headers": {"Authorization": format!("Bearer {value}")}}}]},
        })
    );
    assert_eq!(create.get("envVars"), None, "{create}");
    count += 2;
    count += nowhere_in_toren(&toren, &ran, &value);
    report(backend, "secret injection", count);
}
