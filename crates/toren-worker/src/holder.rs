//! Who holds a run's lease: a name unique to this process on this machine
//! (`host/pid/start-time`), and the test that a holder on this machine is gone, which lets
//! `toren resume` take over from a killed process at once instead of waiting for its lease
//! to expire. Holders on other machines are never judged gone; their leases must expire.

use std::fs;

/// This process's holder name.
pub fn this_process() -> String {
    let pid = std::process::id();
    format!(
        "{}/{pid}/{}",
        hostname(),
        start_time(pid).unwrap_or_default()
    )
}

/// Whether `holder` names a process of this machine that no longer exists (or whose pid now
/// belongs to another process).
pub fn is_gone(holder: &str) -> bool {
    let mut parts = holder.rsplitn(3, '/');
    let (Some(start), Some(pid), Some(host)) = (parts.next(), parts.next(), parts.next()) else {
        return false;
    };
    if host != hostname() {
        return false;
    }
    let Ok(pid) = pid.parse::<u32>() else {
        return false;
    };
    match start_time(pid) {
        Some(now) => now != start,
        None => true,
    }
}

fn hostname() -> String {
    fs::read_to_string("/proc/sys/kernel/hostname")
        .map(|h| h.trim().to_owned())
        .unwrap_or_else(|_| "localhost".to_owned())
}

/// The process's start time in clock ticks since boot (field 22 of `/proc/PID/stat`),
/// which tells a process from a later one that reused its pid.
fn start_time(pid: u32) -> Option<String> {
    let stat = fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name (field 2) may hold spaces and parentheses; fields after it do not.
    let after_name = &stat[stat.rfind(')')? + 1..];
    after_name.split_whitespace().nth(19).map(str::to_owned)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn this_process_is_alive_and_a_dead_one_is_gone() {
        let me = this_process();
        assert!(!is_gone(&me), "{me}");
        let mut child = std::process::Command::new("true").spawn().unwrap();
        let pid = child.id();
        let start = start_time(pid);
        child.wait().unwrap();
        let dead = format!("{}/{pid}/{}", hostname(), start.unwrap_or_default());
        assert!(is_gone(&dead), "{dead}");
    }

    #[test]
    fn other_machines_and_odd_names_are_never_gone() {
        assert!(!is_gone("elsewhere.example/1/123"));
        assert!(!is_gone("not a holder"));
        assert!(!is_gone(""));
    }

    #[test]
    fn a_reused_pid_is_gone() {
        let pid = std::process::id();
        assert!(is_gone(&format!("{}/{pid}/1", hostname())));
    }
}
