//! The fake's egress firewall: a create request's `allow_internet_access` and `network`
//! (`allowOut`, `denyOut`, `rules`), checked as E2B's API checks them and enforced for the
//! sandbox's processes.
//!
//! What E2B does (e2b-dev/infra `tcpfirewall`): with `0.0.0.0/0` denied, a connection to
//! port 80 is matched on its HTTP `Host`, one to port 443 on its TLS SNI, against the
//! allowed names (`*.x.com`: names strictly under `x.com`); E2B dials the name itself and
//! refuses one that resolves to a private, loopback or link-local address; every other port
//! is matched by address only. A `rules` entry's headers are put in each request to that
//! host, HTTPS included (its proxy terminates TLS with a platform CA the templates trust).
//!
//! What the fake does: such a sandbox's processes have no network at all (their own
//! network namespace, nothing but loopback), and its one way out is a socket,
//! `/.e2b-egress/firewall.sock`, where the fake plays E2B's firewall on each connection:
//! TLS is matched on its SNI as port 443, anything else read as HTTP to port 80 (a `Host`
//! naming another port is refused); a name outside `allowOut` is refused by closing the
//! connection, as E2B does; an allowed one is handed to a real `toren_egress::Proxy` as a
//! `CONNECT` (which resolves the name through the fake's resolver, refuses private,
//! loopback, link-local and metadata addresses, and terminates TLS for the hosts a rule
//! names, putting its headers in; a refusal again closes the connection). The platform
//! CA the templates trust is `/.e2b-egress/ca.pem`. The approximations: a client reaches
//! the socket explicitly (`curl --unix-socket /.e2b-egress/firewall.sock`) where E2B
//! redirects every TCP connection of the VM; headers are put in over TLS only (plain HTTP
//! to a host with a rule is closed, as the proxy expects TLS there, where E2B adds the
//! header to it in clear text); `allowOut` addresses and CIDRs, and a `denyOut` short of
//! `0.0.0.0/0`, are accepted and not enforced (the sandbox is then closed, or open, as a
//! whole).

use std::collections::HashMap;
use std::io;
use std::net::{IpAddr, SocketAddr};
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use serde_json::Value;
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::{UnixListener, UnixStream};
use tokio_util::sync::{CancellationToken, DropGuard};
use toren_egress::{
    Decision, DenyAll, Interception, Proxy, ProxyConfig, Recorder, Resolver, SystemResolver,
    UpstreamTrust,
};
use toren_protocol::{EgressPolicy, HostPattern, HostVerdict, SecretRule};

/// Where a firewalled sandbox finds the firewall's socket and the platform CA.
pub const EGRESS_DIR: &str = "/.e2b-egress";
const ALL_TRAFFIC: &str = "0.0.0.0/0";
/// What E2B answers when `allowOut` names domains and `denyOut` lacks `0.0.0.0/0`.
const DOMAINS_NEED_BLOCK_ALL: &str = "When specifying allowed domains in allow out, you must \
     include 'ALL_TRAFFIC' in deny out to block all other traffic.";
/// E2B's limits on rules.
const MAX_RULE_DOMAINS: usize = 10;

/// What a create asked of the network, decided.
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Net {
    /// The internet, unfiltered.
    Open,
    /// No network at all.
    Closed,
    /// Only the firewall: these names, these headers per host.
    Firewalled {
        allow: Vec<HostPattern>,
        headers: Vec<(String, String, String)>,
    },
}

fn is_ip_or_cidr(entry: &str) -> bool {
    let (ip, len) = entry.split_once('/').unwrap_or((entry, "32"));
    ip.parse::<IpAddr>().is_ok() && len.parse::<u8>().is_ok()
}

fn strings(value: Option<&Value>, what: &str) -> Result<Vec<String>, String> {
    match value {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(items)) => items
            .iter()
            .map(|v| v.as_str().map(str::to_owned))
            .collect::<Option<_>>()
            .ok_or_else(|| format!("{what} must be a list of strings")),
        Some(_) => Err(format!("{what} must be a list of strings")),
    }
}

/// Checks `allow_internet_access` and `network` of a create body as E2B's API does
/// (`Err`: its 400 message) and decides what the sandbox may reach.
pub(crate) fn decide(body: &Value) -> Result<Net, String> {
    let internet = body
        .get("allow_internet_access")
        .and_then(Value::as_bool)
        .unwrap_or(true);
    let network = body.get("network").cloned().unwrap_or(Value::Null);
    let allow = strings(network.get("allowOut"), "allowOut")?;
    let deny = strings(network.get("denyOut"), "denyOut")?;
    for entry in &deny {
        let unspecified = entry
            .split('/')
            .next()
            .and_then(|ip| ip.parse::<IpAddr>().ok())
            .is_some_and(|ip| ip.is_unspecified());
        if !is_ip_or_cidr(entry) || (unspecified && entry != ALL_TRAFFIC) {
            return Err(format!("invalid denied CIDR {entry}"));
        }
    }
    let domains: Vec<&String> = allow.iter().filter(|e| !is_ip_or_cidr(e)).collect();
    if !domains.is_empty() && !deny.iter().any(|e| e == ALL_TRAFFIC) {
        return Err(DOMAINS_NEED_BLOCK_ALL.to_owned());
    }
    let mut headers = Vec::new();
    if let Some(rules) = network.get("rules").and_then(Value::as_object) {
        if rules.len() > MAX_RULE_DOMAINS {
            return Err(format!(
                "Network rules can have at most {MAX_RULE_DOMAINS} domains."
            ));
        }
        for (domain, list) in rules {
            let list = list.as_array().map(Vec::as_slice).unwrap_or_default();
            if list.len() > 1 {
                return Err(format!(
                    "Domain \"{domain}\" can have at most 1 transform rule."
                ));
            }
            let set = list
                .first()
                .and_then(|rule| rule.pointer("/transform/headers"))
                .and_then(Value::as_object);
            for (name, value) in set.into_iter().flatten() {
                let value = value.as_str().unwrap_or_default();
                if value.bytes().any(|b| b < 0x20 && b != b'\t') {
                    return Err(format!(
                        "Value for header \"{name}\" in rule for domain \"{domain}\" contains \
                         invalid characters."
                    ));
                }
                headers.push((domain.clone(), name.clone(), value.to_owned()));
            }
        }
    }
    let deny_all = !internet || deny.iter().any(|e| e == ALL_TRAFFIC);
    if !deny_all {
        return Ok(Net::Open);
    }
    let allow: Vec<HostPattern> = domains
        .iter()
        .filter_map(|d| HostPattern::parse(d).ok())
        .collect();
    if allow.is_empty() {
        return Ok(Net::Closed);
    }
    Ok(Net::Firewalled { allow, headers })
}

/// Names the fake's firewall resolves to fixed addresses (a test's servers), the rest by
/// the system's resolver.
#[derive(Clone, Debug, Default)]
pub(crate) struct Names(pub(crate) HashMap<String, Vec<IpAddr>>);

#[async_trait::async_trait]
impl Resolver for Names {
    async fn resolve(&self, host: &str, port: u16) -> io::Result<Vec<SocketAddr>> {
        match self.0.get(&host.to_ascii_lowercase()) {
            Some(ips) => Ok(ips.iter().map(|ip| SocketAddr::new(*ip, port)).collect()),
            None => SystemResolver.resolve(host, port).await,
        }
    }
}

/// Every connection the firewall judged, for tests: (host, port, let through).
pub(crate) type Judged = Arc<std::sync::Mutex<Vec<(String, u16, bool)>>>;

struct Judge(Judged);

impl Recorder for Judge {
    fn record(&self, decision: Decision) {
        let allowed = matches!(decision.outcome, toren_egress::Outcome::Allowed { .. });
        if let Ok(mut seen) = self.0.lock() {
            seen.push((decision.host, decision.port, allowed));
        }
    }
}

/// A firewalled sandbox's firewall, serving until dropped.
pub(crate) struct Firewall {
    _stop: DropGuard,
}

impl std::fmt::Debug for Firewall {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("Firewall")
    }
}

/// Starts the firewall of a sandbox whose disk is `root`: the socket and CA in
/// `root/egress` (bound into the sandbox at [`EGRESS_DIR`]), the proxy behind it on
/// `root/run/egress.sock` (which the sandbox never sees).
pub(crate) fn start(
    root: &Path,
    allow: &[HostPattern],
    headers: &[(String, String, String)],
    names: Names,
    trust: &UpstreamTrust,
    judged: Judged,
) -> io::Result<Firewall> {
    let mut values = Vec::new();
    let mut secrets = Vec::new();
    for (i, (domain, name, value)) in headers.iter().enumerate() {
        let Ok(host) = HostPattern::parse(domain) else {
            continue;
        };
        let rule = format!("E2B_RULE_{i}");
        values.push((rule.clone(), value.clone()));
        secrets.push(SecretRule {
            name: rule,
            hosts: vec![host],
            header: name.clone(),
            template: toren_protocol::SECRET_PLACEHOLDER.to_owned(),
        });
    }
    let policy = EgressPolicy {
        allow: allow.to_vec(),
        ask: false,
        secrets,
    };
    let dir = root.join("egress");
    std::fs::create_dir_all(&dir)?;
    std::fs::set_permissions(&dir, std::fs::Permissions::from_mode(0o755))?;
    let interception = Interception::new(&policy, &values, trust).map_err(io::Error::other)?;
    if let Some(interception) = &interception {
        std::fs::write(dir.join("ca.pem"), interception.ca().cert_pem())?;
    }
    let inner = root.join("run").join("egress.sock");
    let _ = std::fs::remove_file(&inner);
    let proxy_listener = UnixListener::bind(&inner)?;
    let front = dir.join("firewall.sock");
    let _ = std::fs::remove_file(&front);
    let front_listener = UnixListener::bind(&front)?;
    std::fs::set_permissions(&front, std::fs::Permissions::from_mode(0o666))?;
    let proxy = Proxy::with_interception(
        ProxyConfig {
            policy: policy.clone(),
            resolver: Arc::new(names),
            approver: Arc::new(DenyAll),
            recorder: Arc::new(Judge(judged)),
            permit: Vec::new(),
        },
        interception,
    );
    let stop = CancellationToken::new();
    let token = stop.clone();
    tokio::spawn(async move {
        let _ = proxy.serve_unix(proxy_listener, token).await;
    });
    let token = stop.clone();
    let policy = Arc::new(policy);
    tokio::spawn(async move {
        loop {
            tokio::select! {
                () = token.cancelled() => return,
                accepted = front_listener.accept() => {
                    let Ok((stream, _)) = accepted else { return };
                    let (inner, policy, token) = (inner.clone(), Arc::clone(&policy), token.clone());
                    tokio::spawn(async move {
                        tokio::select! {
                            () = token.cancelled() => {}
                            () = judge(stream, &inner, &policy) => {}
                        }
                    });
                }
            }
        }
    });
    Ok(Firewall {
        _stop: stop.drop_guard(),
    })
}

/// One connection from the sandbox: matched as E2B's firewall matches it, then through the
/// proxy, or closed.
async fn judge(mut sandbox: UnixStream, proxy: &PathBuf, policy: &EgressPolicy) {
    let mut head = Vec::new();
    let Some((host, port)) = first_bytes(&mut sandbox, &mut head).await else {
        return;
    };
    if port != 80 && port != 443 || policy.decide(&host) != HostVerdict::Allow {
        return;
    }
    let Ok(mut upstream) = UnixStream::connect(proxy).await else {
        return;
    };
    let connect = format!("CONNECT {host}:{port} HTTP/1.1\r\nHost: {host}:{port}\r\n\r\n");
    if upstream.write_all(connect.as_bytes()).await.is_err() {
        return;
    }
    let mut answer = Vec::new();
    let mut byte = [0u8; 1];
    while !answer.ends_with(b"\r\n\r\n") && answer.len() < 16 * 1024 {
        match upstream.read(&mut byte).await {
            Ok(1) => answer.push(byte[0]),
            _ => return,
        }
    }
    if !answer.starts_with(b"HTTP/1.1 200") {
        return;
    }
    if upstream.write_all(&head).await.is_err() {
        return;
    }
    let _ = tokio::io::copy_bidirectional(&mut sandbox, &mut upstream).await;
}

/// Reads what names the destination: a TLS ClientHello's record (SNI, port 443), or an HTTP
/// request's head (`Host`, port 80 unless it names another). `head` keeps every byte read.
async fn first_bytes(stream: &mut UnixStream, head: &mut Vec<u8>) -> Option<(String, u16)> {
    let mut first = [0u8; 5];
    stream.read_exact(&mut first).await.ok()?;
    head.extend_from_slice(&first);
    if first[0] == 0x16 {
        let len = usize::from(u16::from_be_bytes([first[3], first[4]]));
        let mut record = vec![0u8; len];
        stream.read_exact(&mut record).await.ok()?;
        head.extend_from_slice(&record);
        return Some((sni(&record)?, 443));
    }
    let mut byte = [0u8; 1];
    while !head.ends_with(b"\r\n\r\n") {
        if head.len() > 64 * 1024 || stream.read(&mut byte).await.ok()? != 1 {
            return None;
        }
        head.push(byte[0]);
    }
    let text = String::from_utf8_lossy(head);
    let host = text.lines().skip(1).find_map(|line| {
        let (name, value) = line.split_once(':')?;
        name.trim()
            .eq_ignore_ascii_case("host")
            .then(|| value.trim().to_owned())
    })?;
    match host.rsplit_once(':') {
        Some((name, port)) => Some((name.to_owned(), port.parse().ok()?)),
        None => Some((host, 80)),
    }
}

/// The server name of a ClientHello handshake message.
fn sni(hello: &[u8]) -> Option<String> {
    let take = |at: &mut usize, n: usize| -> Option<&[u8]> {
        let bytes = hello.get(*at..*at + n)?;
        *at += n;
        Some(bytes)
    };
    let u16_at = |b: &[u8]| usize::from(u16::from_be_bytes([b[0], b[1]]));
    let mut at = 0;
    (take(&mut at, 1)? == [1]).then_some(())?;
    take(&mut at, 3 + 2 + 32)?; // length, version, random
    let session = usize::from(take(&mut at, 1)?[0]);
    take(&mut at, session)?;
    let suites = u16_at(take(&mut at, 2)?);
    take(&mut at, suites)?;
    let compression = usize::from(take(&mut at, 1)?[0]);
    take(&mut at, compression)?;
    let end = at + u16_at(take(&mut at, 2)?);
    while at + 4 <= end {
        let kind = u16_at(take(&mut at, 2)?);
        let len = u16_at(take(&mut at, 2)?);
        let body = take(&mut at, len)?;
        if kind == 0 && body.len() > 5 && body[2] == 0 {
            let name_len = u16_at(&body[3..5]);
            let name = body.get(5..5 + name_len)?;
            return String::from_utf8(name.to_vec()).ok();
        }
    }
    None
}

#[cfg(test)]
mod tests {
    use serde_json::json;

    use super::*;

    #[test]
    fn create_bodies_are_checked_and_decided_as_e2b_does() {
        assert_eq!(decide(&json!({})), Ok(Net::Open));
        assert_eq!(
            decide(&json!({"allow_internet_access": false})),
            Ok(Net::Closed)
        );
        assert_eq!(
            decide(&json!({"network": {"allowOut": ["a.test"]}})),
            Err(DOMAINS_NEED_BLOCK_ALL.to_owned())
        );
        assert_eq!(
            decide(&json!({"network": {"denyOut": ["::/0"]}})),
            Err("invalid denied CIDR ::/0".to_owned())
        );
        assert_eq!(
            decide(&json!({"network": {"denyOut": ["a.test"]}})),
            Err("invalid denied CIDR a.test".to_owned())
        );
        let firewalled = decide(&json!({
            "allow_internet_access": false,
            "network": {
                "allowOut": ["a.test", "*.b.test", "8.8.8.8"],
                "denyOut": ["0.0.0.0/0"],
                "rules": {"a.test": [{"transform": {"headers": {"Authorization": "Bearer x"}}}]},
            },
        }));
        assert_eq!(
            firewalled,
            Ok(Net::Firewalled {
                allow: vec![
                    HostPattern::parse("a.test").unwrap(),
                    HostPattern::parse("*.b.test").unwrap()
                ],
                headers: vec![(
                    "a.test".to_owned(),
                    "Authorization".to_owned(),
                    "Bearer x".to_owned()
                )],
            })
        );
    }

    #[test]
    fn the_server_name_is_read_from_a_client_hello() {
        // A ClientHello carrying SNI `api.test` (handshake header, version, random, an
        // empty session id, one suite, null compression, one extension).
        let name = b"api.test";
        let mut server_name = vec![0, (name.len() + 3) as u8, 0, 0, name.len() as u8];
        server_name.extend_from_slice(name);
        let mut extensions = vec![0, 0, 0, server_name.len() as u8];
        extensions.extend_from_slice(&server_name);
        let mut body = vec![3, 3];
        body.extend_from_slice(&[7; 32]);
        body.extend_from_slice(&[0, 0, 2, 0x13, 0x01, 1, 0]);
        body.extend_from_slice(&[0, extensions.len() as u8]);
        body.extend_from_slice(&extensions);
        let mut hello = vec![1, 0, 0, body.len() as u8];
        hello.extend_from_slice(&body);
        assert_eq!(sni(&hello).as_deref(), Some("api.test"));
        assert_eq!(sni(&hello[..20]), None);
    }
}
