//! Who holds a run's lease, and whether that holder is provably gone.
//!
//! A holder name says which process holds a lease in terms another process can check:
//! `host/pid/start/boot=BOOT_ID/pidns=INODE/timens=INODE` — the host name (for people
//! only), the pid, the process's start time (clock ticks since boot, field 22 of
//! `/proc/PID/stat`), the kernel's boot id, and the inodes of the process's PID and time
//! namespaces. `toren resume` takes a live lease over at once only when [`is_gone`] proves
//! its holder dead; in every other case it waits for the lease to expire. The store's
//! compare-and-swap (`take_over_lease`) and fencing tokens do the rest.
//!
//! Host names prove nothing (containers and pods share them, and often a database file),
//! and a pid means something only in its own PID namespace: a judge in another namespace
//! sees other processes, or the same ones under other numbers. So a holder is judged only
//! by a process of the same boot and the same PID and time namespaces, whose `/proc` shows
//! that PID namespace.

use std::fs;
use std::io;

use nix::errno::Errno;
use nix::sys::signal::kill;
use nix::unistd::Pid;

/// Said in a holder name for a namespace or boot id this process cannot read.
const UNKNOWN: &str = "unknown";

/// What identifies one process across PID namespaces, boots and machines.
#[derive(Clone, Debug, PartialEq, Eq)]
struct Holder {
    host: String,
    pid: u32,
    start: String,
    boot: String,
    pid_ns: String,
    time_ns: String,
}

impl Holder {
    /// This process as it names itself.
    fn this_process() -> Self {
        Self {
            host: hostname(),
            pid: std::process::id(),
            start: fs::read_to_string("/proc/self/stat")
                .ok()
                .and_then(|stat| Stat::parse(&stat))
                .map(|stat| stat.start)
                .unwrap_or_else(|| UNKNOWN.to_owned()),
            boot: boot_id().unwrap_or_else(|| UNKNOWN.to_owned()),
            pid_ns: namespace("pid").unwrap_or_else(|| UNKNOWN.to_owned()),
            time_ns: time_namespace().unwrap_or_else(|| UNKNOWN.to_owned()),
        }
    }

    fn name(&self) -> String {
        let Self {
            host,
            pid,
            start,
            boot,
            pid_ns,
            time_ns,
        } = self;
        format!("{host}/{pid}/{start}/boot={boot}/pidns={pid_ns}/timens={time_ns}")
    }

    /// Reads a holder name written by [`Holder::name`]. Names of older Toren versions
    /// (`host/pid/start`) and anything else give `None`.
    fn parse(name: &str) -> Option<Self> {
        let mut parts = name.rsplitn(6, '/');
        let time_ns = parts.next()?.strip_prefix("timens=")?;
        let pid_ns = parts.next()?.strip_prefix("pidns=")?;
        let boot = parts.next()?.strip_prefix("boot=")?;
        let start = parts.next()?;
        let pid = parts.next()?.parse().ok()?;
        let host = parts.next()?;
        Some(Self {
            host: host.to_owned(),
            pid,
            start: start.to_owned(),
            boot: boot.to_owned(),
            pid_ns: pid_ns.to_owned(),
            time_ns: time_ns.to_owned(),
        })
    }

    /// Whether `self` and `judge` share a boot and PID and time namespaces, all known: only
    /// then do the holder's pid and start time mean to the judge what they meant to it.
    fn comparable(&self, judge: &Self) -> bool {
        let known = |value: &str| value != UNKNOWN;
        known(&self.boot)
            && known(&self.pid_ns)
            && known(&self.time_ns)
            && known(&self.start)
            && self.boot == judge.boot
            && self.pid_ns == judge.pid_ns
            && self.time_ns == judge.time_ns
    }
}

/// This process's holder name.
pub fn this_process() -> String {
    Holder::this_process().name()
}

/// Whether `holder` names a process that provably no longer runs: one of this boot, in
/// this process's PID and time namespaces, whose pid is free, a zombie (killed but not yet
/// reaped), or taken by a later process. Anything this process cannot check — another
/// machine or boot, another namespace (a container, a pod, `unshare`), a `/proc` of another
/// namespace, a process it may not inspect, a name of an older Toren — is not gone.
pub fn is_gone(holder: &str) -> bool {
    let Some(holder) = Holder::parse(holder) else {
        return false;
    };
    if !holder.comparable(&Holder::this_process()) {
        return false;
    }
    let Ok(pid) = i32::try_from(holder.pid) else {
        return false;
    };
    // Signal 0 checks existence in this process's own PID namespace (the holder's), and
    // sees processes that a `hidepid` /proc hides. A zombie still exists for it.
    if kill(Pid::from_raw(pid), None) == Err(Errno::ESRCH) {
        return true;
    }
    // The pid is in use: by the holder, a zombie of it, or a later process.
    if !proc_is_own_namespace() {
        return false;
    }
    match fs::read_to_string(format!("/proc/{pid}/stat")).map(|stat| Stat::parse(&stat)) {
        Ok(Some(stat)) => stat.start != holder.start || stat.is_dead(),
        // Hidden from us (`hidepid`), or it ended a moment ago: in doubt.
        Ok(None) | Err(_) => false,
    }
}

/// The fields of `/proc/PID/stat` that tell a process's life.
struct Stat {
    /// Field 3: `R`, `S`, … `Z` (zombie), `X` (dead).
    state: char,
    /// Field 22: the start time in clock ticks since boot.
    start: String,
}

impl Stat {
    fn parse(stat: &str) -> Option<Self> {
        // The command name (field 2) may hold spaces and parentheses; fields after it do not.
        let mut fields = stat[stat.rfind(')')? + 1..].split_whitespace();
        let state = fields.next()?.chars().next()?;
        let start = fields.nth(18)?.to_owned();
        Some(Self { state, start })
    }

    /// A zombie or a dead process: it runs no more code and holds nothing.
    fn is_dead(&self) -> bool {
        matches!(self.state, 'Z' | 'X' | 'x')
    }
}

/// Whether `/proc` is mounted for this process's own PID namespace, so `/proc/PID` means
/// the pid this process would pass to `kill`: then `NSpid` lists exactly one pid, ours.
fn proc_is_own_namespace() -> bool {
    let Ok(status) = fs::read_to_string("/proc/self/status") else {
        return false;
    };
    status
        .lines()
        .find_map(|line| line.strip_prefix("NSpid:"))
        .is_some_and(|pids| {
            let pids: Vec<&str> = pids.split_whitespace().collect();
            pids == [std::process::id().to_string()]
        })
}

fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned())
}

/// The id the kernel chose at boot: tells this boot of this machine from every other.
fn boot_id() -> Option<String> {
    let id = fs::read_to_string("/proc/sys/kernel/random/boot_id").ok()?;
    let id = id.trim();
    (!id.is_empty() && !id.contains('/')).then(|| id.to_owned())
}

/// The inode of this process's namespace of `kind` (`/proc/self/ns/pid` reads
/// `pid:[4026531836]`).
fn namespace(kind: &str) -> Option<String> {
    namespace_link(kind).ok()
}

fn namespace_link(kind: &str) -> io::Result<String> {
    let link = fs::read_link(format!("/proc/self/ns/{kind}"))?;
    let link = link.to_string_lossy();
    link.strip_prefix(kind)
        .and_then(|rest| rest.strip_prefix(":["))
        .and_then(|rest| rest.strip_suffix(']'))
        .filter(|inode| !inode.is_empty() && inode.bytes().all(|b| b.is_ascii_digit()))
        .map(str::to_owned)
        .ok_or_else(|| io::Error::other(format!("unexpected namespace link {link}")))
}

/// The time namespace's inode; `none` on kernels without time namespaces (before 5.6),
/// where every process shares one clock. Start times in `/proc` are shifted by the
/// reader's time namespace, so only readers in the holder's one may compare them.
fn time_namespace() -> Option<String> {
    match namespace_link("time") {
        Ok(inode) => Some(inode),
        Err(e) if e.kind() == io::ErrorKind::NotFound => Some("none".to_owned()),
        Err(_) => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This process's identity with another pid and start time.
    fn named(pid: u32, start: &str) -> String {
        Holder {
            pid,
            start: start.to_owned(),
            ..Holder::this_process()
        }
        .name()
    }

    fn start_of(pid: u32) -> String {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).unwrap();
        Stat::parse(&stat).unwrap().start
    }

    fn state_of(pid: u32) -> Option<char> {
        let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
        Stat::parse(&stat).map(|s| s.state)
    }

    #[test]
    fn this_process_names_itself_fully_and_is_alive() {
        let me = this_process();
        let parsed = Holder::parse(&me).unwrap();
        assert_eq!(parsed, Holder::this_process(), "{me}");
        assert_eq!(parsed.pid, std::process::id());
        for field in [&parsed.start, &parsed.boot, &parsed.pid_ns, &parsed.time_ns] {
            assert_ne!(field, UNKNOWN, "{me}");
        }
        assert!(proc_is_own_namespace());
        assert!(!is_gone(&me), "{me}");
    }

    #[test]
    fn a_dead_process_and_a_reused_pid_are_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start = start_of(pid);
        child.wait().unwrap();
        assert!(is_gone(&named(pid, &start)));
        // Our own pid with another start time: a later process took the pid.
        assert!(is_gone(&named(std::process::id(), "1")));
    }

    #[test]
    fn a_zombie_is_gone() {
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        let pid = child.id();
        let name = named(pid, &start_of(pid));
        assert!(!is_gone(&name), "alive");
        child.kill().unwrap();
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(10);
        while state_of(pid) != Some('Z') {
            assert!(std::time::Instant::now() < deadline, "never a zombie");
            std::thread::sleep(std::time::Duration::from_millis(5));
        }
        assert!(is_gone(&name), "a zombie, not reaped yet");
        child.wait().unwrap();
        assert!(is_gone(&name), "reaped");
    }

    #[test]
    fn a_holder_of_another_boot_or_namespace_is_never_gone() {
        // A pid nobody uses here, so only the identity can keep it from being gone.
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        child.wait().unwrap();
        let dead = Holder {
            pid,
            ..Holder::this_process()
        };
        assert!(is_gone(&dead.name()));
        let others = [
            Holder {
                boot: "8a0c6f4e-0000-4000-8000-000000000000".into(),
                ..dead.clone()
            },
            Holder {
                pid_ns: "4026599999".into(),
                ..dead.clone()
            },
            Holder {
                time_ns: "4026599998".into(),
                ..dead.clone()
            },
            Holder {
                boot: UNKNOWN.into(),
                ..dead.clone()
            },
            Holder {
                pid_ns: UNKNOWN.into(),
                ..dead.clone()
            },
            Holder {
                start: UNKNOWN.into(),
                ..dead.clone()
            },
        ];
        for other in others {
            assert!(!is_gone(&other.name()), "{}", other.name());
        }
        // The host name is for people: a process of this boot and namespace is judged
        // even if its UTS namespace called the machine something else.
        let renamed = Holder {
            host: "elsewhere/with/slashes".into(),
            ..dead
        };
        assert_eq!(Holder::parse(&renamed.name()), Some(renamed.clone()));
        assert!(is_gone(&renamed.name()));
    }

    #[test]
    fn old_and_odd_names_are_never_gone() {
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start = start_of(pid);
        child.wait().unwrap();
        // The format of older versions, for a process that is dead: still in doubt.
        let old = format!("{}/{pid}/{start}", hostname());
        for name in [old.as_str(), "elsewhere.example/1/123", "not a holder", ""] {
            assert_eq!(Holder::parse(name), None, "{name}");
            assert!(!is_gone(name), "{name}");
        }
    }

    #[test]
    fn stat_lines_with_odd_command_names_parse() {
        let line = "42 (a) b (c) Z 1 42 42 0 -1 4194560 100 0 0 0 0 0 0 0 20 0 1 0 98765 0 0";
        let stat = Stat::parse(line).unwrap();
        assert_eq!((stat.state, stat.start.as_str()), ('Z', "98765"));
        assert!(stat.is_dead());
    }
}
