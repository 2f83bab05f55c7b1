//! The e2b reaper's rules: which of this installation's sandboxes (listed by metadata) no
//! run needs. A run's sandbox is killed when its run has finished, or when its run is
//! unknown and the sandbox is over [`ORPHAN_AGE`] old; a live run's sandbox is never
//! touched, and neither is a session's (its sandbox waits, paused, for the next message,
//! for days; removing the session kills it). [`plan_reap`] decides; `E2bBackend::reap`
//! lists and kills.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::client::SandboxInfo;
use crate::sandbox::{META_KEY, META_RUN};

/// How old a sandbox of no known run must be before it is killed.
pub const ORPHAN_AGE: Duration = Duration::from_secs(24 * 3600);

/// What the run store says of a sandbox's run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunLiveness {
    /// Not ended (whether or not a process drives it now).
    Live,
    Finished,
    /// No such run.
    Unknown,
}

/// One of Toren's sandboxes, as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TorenSandbox {
    pub id: String,
    pub run: String,
    pub key: String,
    pub state: String,
    pub started_at: Option<jiff::Timestamp>,
}

impl TorenSandbox {
    pub(crate) fn from_info(info: &SandboxInfo) -> Self {
        let meta = info.metadata.clone().unwrap_or_default();
        let get = |key: &str, meta: &BTreeMap<String, String>| meta.get(key).cloned();
        Self {
            id: info.sandbox_id.clone(),
            run: get(META_RUN, &meta).unwrap_or_default(),
            key: get(META_KEY, &meta).unwrap_or_default(),
            state: info.state.clone().unwrap_or_default(),
            started_at: info.started_at.as_deref().and_then(|s| s.parse().ok()),
        }
    }

    /// Whether this is a session's sandbox (kept under a key that is not its run's id).
    pub fn is_session(&self) -> bool {
        !self.key.is_empty() && self.key != self.run
    }
}

/// Why a sandbox is reaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReapReason {
    RunFinished,
    Orphaned { age: Duration },
}

/// The sandboxes to kill, with why.
pub fn plan_reap(
    sandboxes: &[TorenSandbox],
    liveness: impl Fn(&str) -> RunLiveness,
    orphan_age: Duration,
    now: jiff::Timestamp,
) -> Vec<(TorenSandbox, ReapReason)> {
    let mut plan = Vec::new();
    for sandbox in sandboxes {
        if sandbox.is_session() {
            continue;
        }
        match liveness(&sandbox.run) {
            RunLiveness::Live => {}
            RunLiveness::Finished => plan.push((sandbox.clone(), ReapReason::RunFinished)),
            RunLiveness::Unknown => {
                let age = sandbox
                    .started_at
                    .and_then(|t| Duration::try_from(now.duration_since(t)).ok());
                if let Some(age) = age.filter(|age| *age >= orphan_age) {
                    plan.push((sandbox.clone(), ReapReason::Orphaned { age }));
                }
            }
        }
    }
    plan
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sandbox(id: &str, run: &str, key: &str, hours_old: i64) -> TorenSandbox {
        TorenSandbox {
            id: id.into(),
            run: run.into(),
            key: key.into(),
            state: "running".into(),
            started_at: Some(
                jiff::Timestamp::from_second(1_000_000_000 - hours_old * 3600).unwrap(),
            ),
        }
    }

    #[test]
    fn finished_and_day_old_orphans_go_live_runs_and_sessions_stay() {
        let now = jiff::Timestamp::from_second(1_000_000_000).unwrap();
        let all = vec![
            sandbox("a", "live", "live", 100),
            sandbox("b", "done", "done", 0),
            sandbox("c", "gone", "gone", 25),
            sandbox("d", "gone2", "gone2", 2),
            sandbox("e", "done", "session-1", 100),
        ];
        let liveness = |run: &str| match run {
            "live" => RunLiveness::Live,
            "done" => RunLiveness::Finished,
            _ => RunLiveness::Unknown,
        };
        let plan: Vec<(&str, ReapReason)> = plan_reap(&all, liveness, ORPHAN_AGE, now)
            .iter()
            .map(|(s, r)| (if s.id == "b" { "b" } else { "c" }, *r))
            .collect();
        assert_eq!(
            plan,
            vec![
                ("b", ReapReason::RunFinished),
                (
                    "c",
                    ReapReason::Orphaned {
                        age: Duration::from_secs(25 * 3600)
                    }
                ),
            ]
        );
    }
}
