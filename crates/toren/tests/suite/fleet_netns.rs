//! Network namespaces for the fleet tests: each one a separate "machine" joined to the host
//! by a veth pair with its own /30, whose link to the host can be cut (a partition: packets
//! dropped both ways, no reset, exactly what a dead switch looks like) and restored.
//! Everything made here is removed when the [`Namespaces`] is dropped, also while a test
//! panics; names carry the test process's pid (and a counter), so test processes running
//! side by side never collide, and what a SIGKILLed test process left behind is swept by
//! the next one. Needs root, `ip` (iproute2) and `nft` (nftables): `scripts/setup`
//! installs them.
//!
//! Neighbours: `fleet_chaos.rs` runs `toren worker`s inside these namespaces against a
//! Postgres listening on the host ends.

use std::fs::File;
use std::net::Ipv4Addr;
use std::process::{Command, Output, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};

/// The block the /30s are taken from: `10.77.0.0/16`, 16,384 links.
const BLOCK: [u8; 2] = [10, 77];
/// The prefix of every namespace this module makes: `toren-fleet-<pid>-<n>`.
const PREFIX: &str = "toren-fleet-";
/// The nftables table that cuts a namespace's link (it lives inside the namespace).
const CUT_TABLE: &str = "toren_cut";
/// The namespace end of every veth pair (inside its own namespace, so it needs no uniqueness).
const INNER_IF: &str = "fleet0";

/// One namespace and its link to the host.
#[derive(Debug)]
pub(crate) struct Link {
    /// The namespace's name (`ip netns exec <netns> …`).
    pub(crate) netns: String,
    /// The host end of the veth pair.
    pub(crate) host_if: String,
    /// The host end's address: what a process inside the namespace connects to.
    pub(crate) host_addr: Ipv4Addr,
    /// The namespace end's address.
    pub(crate) ns_addr: Ipv4Addr,
}

impl Link {
    /// `program` to be run inside this namespace (`ip netns exec`; the namespace's
    /// processes keep it alive until they exit, even after it is removed by name).
    pub(crate) fn command(&self, program: &str) -> Command {
        let mut cmd = Command::new("ip");
        cmd.args(["netns", "exec", &self.netns, program]);
        cmd
    }

    /// Cuts the link: every packet in or out of the namespace's veth end is dropped
    /// silently, so connections hang rather than fail, as in a partition. Idempotent.
    pub(crate) fn cut(&self) {
        self.restore();
        let rules = format!(
            "table inet {CUT_TABLE} {{\n\
             chain in {{ type filter hook input priority -100; policy accept; iifname \"{INNER_IF}\" drop; }}\n\
             chain out {{ type filter hook output priority -100; policy accept; oifname \"{INNER_IF}\" drop; }}\n\
             }}\n"
        );
        let mut nft = Command::new("ip");
        nft.args(["netns", "exec", &self.netns, "nft", "-f", "-"]);
        run_with_stdin(nft, &rules);
    }

    /// Restores a cut link (no-op when it is not cut): connections that hung resume.
    pub(crate) fn restore(&self) {
        let _ = quiet(Command::new("ip").args([
            "netns",
            "exec",
            &self.netns,
            "nft",
            "delete",
            "table",
            "inet",
            CUT_TABLE,
        ]));
    }

    /// Whether the link is cut now.
    pub(crate) fn is_cut(&self) -> bool {
        quiet(Command::new("ip").args([
            "netns",
            "exec",
            &self.netns,
            "nft",
            "list",
            "table",
            "inet",
            CUT_TABLE,
        ]))
        .status
        .success()
    }
}

/// `n` namespaces, each with its link; all removed on drop.
#[derive(Debug)]
pub(crate) struct Namespaces {
    links: Vec<Link>,
}

impl Namespaces {
    /// Makes `n` namespaces with a veth pair each (host end up with `host_addr`/30, the
    /// other end `fleet0` inside with `ns_addr`/30 and the default route through the host
    /// end, and the namespace's loopback up).
    /// Panics, having removed whatever it made, when the host refuses.
    pub(crate) fn create(n: usize) -> Self {
        static NEXT: AtomicU32 = AtomicU32::new(0);
        sweep_stale();
        let pid = std::process::id();
        // One allocator at a time across processes: the free /30s are read from the host's
        // addresses, then taken, under an exclusive lock.
        let lock = File::create(std::env::temp_dir().join("toren-fleet-netns.lock"))
            .expect("the allocation lock file");
        lock.lock().expect("the allocation lock");
        let mut namespaces = Self { links: Vec::new() };
        let mut taken = used_subnets();
        for _ in 0..n {
            let k = NEXT.fetch_add(1, Ordering::Relaxed);
            let index = (0..16_384u16)
                .find(|i| !taken.contains(i))
                .expect("a free /30 in 10.77.0.0/16");
            taken.push(index);
            // 14 bits: the third octet is index / 64, the fourth (index % 64) * 4.
            let third = (index / 64) as u8;
            let fourth = ((index % 64) * 4) as u8;
            let link = Link {
                netns: format!("{PREFIX}{pid}-{k}"),
                host_if: format!("tf{pid}h{k}"),
                host_addr: Ipv4Addr::new(BLOCK[0], BLOCK[1], third, fourth + 1),
                ns_addr: Ipv4Addr::new(BLOCK[0], BLOCK[1], third, fourth + 2),
            };
            // Pushed before it is built, so a half-built link is removed too.
            namespaces.links.push(link);
            let link = namespaces.links.last().expect("just pushed");
            build(link);
        }
        drop(lock);
        namespaces
    }

    pub(crate) fn links(&self) -> &[Link] {
        &self.links
    }

    pub(crate) fn link(&self, k: usize) -> &Link {
        &self.links[k]
    }
}

impl Drop for Namespaces {
    fn drop(&mut self) {
        for link in &self.links {
            remove(&link.netns, &link.host_if);
        }
    }
}

/// Builds one link; panics naming the command that failed.
fn build(link: &Link) {
    let host = format!("{}/30", link.host_addr);
    let inner = format!("{}/30", link.ns_addr);
    let steps: [&[&str]; 6] = [
        &["netns", "add", &link.netns],
        &[
            "link",
            "add",
            &link.host_if,
            "type",
            "veth",
            "peer",
            "name",
            INNER_IF,
            "netns",
            &link.netns,
        ],
        &["addr", "add", &host, "dev", &link.host_if],
        &["link", "set", &link.host_if, "up"],
        &["-n", &link.netns, "addr", "add", &inner, "dev", INNER_IF],
        &["-n", &link.netns, "link", "set", INNER_IF, "up"],
    ];
    for args in steps {
        must(Command::new("ip").args(args));
    }
    must(Command::new("ip").args(["-n", &link.netns, "link", "set", "lo", "up"]));
    // Everything else goes to the host too, so any of the host's addresses is reachable.
    let via = link.host_addr.to_string();
    must(Command::new("ip").args(["-n", &link.netns, "route", "add", "default", "via", &via]));
}

/// Removes a namespace and its veth pair (deleting the host end deletes both). Quiet: a
/// half-built link lacks some of it.
fn remove(netns: &str, host_if: &str) {
    let _ = quiet(Command::new("ip").args(["link", "del", host_if]));
    let _ = quiet(Command::new("ip").args(["netns", "del", netns]));
}

/// Removes what test processes that no longer exist left behind (SIGKILLed before their
/// drop ran): namespaces `toren-fleet-<pid>-<k>` whose pid is gone, with their veths.
fn sweep_stale() {
    let out = quiet(Command::new("ip").args(["netns", "list"]));
    for line in String::from_utf8_lossy(&out.stdout).lines() {
        let Some(name) = line.split_whitespace().next() else {
            continue;
        };
        let Some((pid, k)) = name.strip_prefix(PREFIX).and_then(|r| r.split_once('-')) else {
            continue;
        };
        if std::path::Path::new(&format!("/proc/{pid}")).exists() {
            continue;
        }
        remove(name, &format!("tf{pid}h{k}"));
    }
}

/// The /30 indices in 10.77.0.0/16 that an address on this host already uses.
fn used_subnets() -> Vec<u16> {
    let out = must(Command::new("ip").args(["-o", "-4", "addr", "show"]));
    String::from_utf8_lossy(&out.stdout)
        .split_whitespace()
        .filter_map(|word| word.split('/').next()?.parse::<Ipv4Addr>().ok())
        .filter(|a| a.octets()[..2] == BLOCK)
        .map(|a| u16::from(a.octets()[2]) * 64 + u16::from(a.octets()[3]) / 4)
        .collect()
}

fn quiet(cmd: &mut Command) -> Output {
    cmd.stdin(Stdio::null())
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"))
}

fn must(cmd: &mut Command) -> Output {
    let out = quiet(cmd);
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    out
}

fn run_with_stdin(mut cmd: Command, input: &str) {
    use std::io::Write as _;
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap_or_else(|e| panic!("cannot run {cmd:?}: {e}"));
    child
        .stdin
        .take()
        .expect("piped stdin")
        .write_all(input.as_bytes())
        .expect("write to nft");
    let out = child.wait_with_output().expect("nft exits");
    assert!(
        out.status.success(),
        "{cmd:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

mod tests {
    use std::io::Read as _;
    use std::net::TcpListener;
    use std::time::Duration;

    use super::*;

    /// Connects from inside `link`'s namespace to `addr:port` (bash's /dev/tcp), giving up
    /// after `secs`; true when the connection was made.
    fn connects(link: &Link, addr: Ipv4Addr, port: u16, secs: u32) -> bool {
        link.command("timeout")
            .args([
                &secs.to_string(),
                "bash",
                "-c",
                &format!("exec 3<>/dev/tcp/{addr}/{port} && echo hello >&3"),
            ])
            .stdin(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .unwrap()
            .success()
    }

    fn gone(link: &Link) -> bool {
        let netns = quiet(Command::new("ip").args(["netns", "list"]));
        let listed = String::from_utf8_lossy(&netns.stdout)
            .lines()
            .any(|l| l.split_whitespace().next() == Some(link.netns.as_str()));
        let veth = quiet(Command::new("ip").args(["link", "show", &link.host_if]));
        !listed && !veth.status.success()
    }

    #[test]
    fn namespaces_reach_the_host_until_cut_and_again_once_restored_and_vanish_on_drop() {
        let namespaces = Namespaces::create(2);
        let [a, b] = namespaces.links() else {
            panic!("two links")
        };
        assert_ne!(a.host_addr, b.host_addr);
        assert_ne!(a.netns, b.netns);

        // A listener on one host end; both namespaces reach it (the host routes between its
        // own addresses), and what is sent arrives.
        let listener = TcpListener::bind((a.host_addr, 0)).unwrap();
        let port = listener.local_addr().unwrap().port();
        assert!(connects(a, a.host_addr, port, 5));
        let (mut conn, peer) = listener.accept().unwrap();
        assert_eq!(peer.ip(), a.ns_addr);
        let mut got = String::new();
        conn.read_to_string(&mut got).unwrap();
        assert_eq!(got, "hello\n");
        assert!(connects(b, a.host_addr, port, 5));
        let (_, peer) = listener.accept().unwrap();
        assert_eq!(peer.ip(), b.ns_addr);

        // Cut: the connect hangs (no refusal, no reset) until the timeout; the other
        // namespace is unaffected.
        a.cut();
        assert!(a.is_cut());
        let started = std::time::Instant::now();
        assert!(!connects(a, a.host_addr, port, 2));
        assert!(
            started.elapsed() >= Duration::from_secs(2),
            "a cut link hangs"
        );
        assert!(connects(b, a.host_addr, port, 5));
        let _ = listener.accept().unwrap();

        // Restored: it connects again.
        a.restore();
        assert!(!a.is_cut());
        assert!(connects(a, a.host_addr, port, 5));
        let _ = listener.accept().unwrap();

        let links: Vec<(String, String)> = namespaces
            .links()
            .iter()
            .map(|l| (l.netns.clone(), l.host_if.clone()))
            .collect();
        drop(namespaces);
        for (netns, host_if) in links {
            let link = Link {
                netns,
                host_if,
                host_addr: Ipv4Addr::UNSPECIFIED,
                ns_addr: Ipv4Addr::UNSPECIFIED,
            };
            assert!(gone(&link), "{link:?} removed on drop");
        }
    }

    #[test]
    fn a_panicking_test_leaves_no_namespace_behind() {
        let made = std::sync::Mutex::new(None);
        let outcome = std::panic::catch_unwind(|| {
            let namespaces = Namespaces::create(1);
            let link = namespaces.link(0);
            *made.lock().unwrap() = Some(Link {
                netns: link.netns.clone(),
                host_if: link.host_if.clone(),
                host_addr: link.host_addr,
                ns_addr: link.ns_addr,
            });
            link.cut();
            panic!("the test fails while its namespace exists and is cut");
        });
        assert!(outcome.is_err());
        let link = made.into_inner().unwrap().unwrap();
        assert!(gone(&link), "{link:?} removed while unwinding");
    }

    #[test]
    fn a_dead_processs_namespaces_are_swept() {
        // A namespace named for a pid that cannot exist (above the kernel's pid_max).
        let stale = Link {
            netns: format!("{PREFIX}99999999-0"),
            host_if: "tf99999999h0".to_owned(),
            host_addr: Ipv4Addr::UNSPECIFIED,
            ns_addr: Ipv4Addr::UNSPECIFIED,
        };
        must(Command::new("ip").args(["netns", "add", &stale.netns]));
        let namespaces = Namespaces::create(1);
        assert!(gone(&stale), "the stale namespace was swept");
        drop(namespaces);
    }
}
