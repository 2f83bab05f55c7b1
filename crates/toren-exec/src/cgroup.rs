//! The container's resource-limit counters, read from its cgroup so a response can say
//! that a command ran into the memory or the process limit: the OOM kill count and the
//! count of forks refused at the process limit, before and after each command. Works on
//! cgroup v2 and v1 (as Docker mounts the container's own cgroup at `/sys/fs/cgroup`);
//! where neither file can be read, the counters stay at zero.

use std::path::Path;

/// Where each counter may be, v2 first: (file, key).
const OOM_KILLS: [(&str, &str); 2] = [
    ("/sys/fs/cgroup/memory.events", "oom_kill"),
    ("/sys/fs/cgroup/memory/memory.oom_control", "oom_kill"),
];
const PIDS_MAX: [(&str, &str); 2] = [
    ("/sys/fs/cgroup/pids.events", "max"),
    ("/sys/fs/cgroup/pids/pids.events", "max"),
];

/// A snapshot of the counters.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub(crate) struct Counters {
    pub(crate) oom_kills: u64,
    pub(crate) pids_max: u64,
}

impl Counters {
    pub(crate) fn read() -> Self {
        Self {
            oom_kills: first_value(&OOM_KILLS),
            pids_max: first_value(&PIDS_MAX),
        }
    }

    /// What happened since `earlier`.
    pub(crate) fn since(self, earlier: Self) -> Self {
        Self {
            oom_kills: self.oom_kills.saturating_sub(earlier.oom_kills),
            pids_max: self.pids_max.saturating_sub(earlier.pids_max),
        }
    }
}

fn first_value(candidates: &[(&str, &str)]) -> u64 {
    candidates
        .iter()
        .find_map(|(file, key)| value_in(Path::new(file), key))
        .unwrap_or(0)
}

fn value_in(file: &Path, key: &str) -> Option<u64> {
    let text = std::fs::read_to_string(file).ok()?;
    parse(&text, key)
}

/// The value of `key` in a flat-keyed cgroup file (`key value` per line).
fn parse(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|line| {
        let (k, v) = line.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_a_key_from_a_flat_keyed_file() {
        let v1 = "oom_kill_disable 0\nunder_oom 0\noom_kill 3\n";
        assert_eq!(parse(v1, "oom_kill"), Some(3));
        assert_eq!(parse("max 12\n", "max"), Some(12));
        assert_eq!(parse("low 0\nhigh 0\n", "oom_kill"), None);
    }

    #[test]
    fn since_never_goes_negative() {
        let before = Counters {
            oom_kills: 5,
            pids_max: 1,
        };
        let after = Counters {
            oom_kills: 7,
            pids_max: 0,
        };
        assert_eq!(
            after.since(before),
            Counters {
                oom_kills: 2,
                pids_max: 0
            }
        );
    }
}
