//! The e2b reaper: which of this installation's sandboxes (listed by metadata) nobody
//! needs, and the sweep that kills them. A run's sandbox is killed when its run has
//! finished, or when its run is unknown and the sandbox is over [`ORPHAN_AGE`] old. A
//! session's sandbox waits, paused, for the session's next message, for days: it is kept
//! while the session exists, and killed once the session is removed (its turn is known to
//! the store but the session is not; `toren sessions rm` kills it at once, the sweep
//! collects it if that failed) or when neither its turn nor its session is known and it is
//! over [`ORPHAN_AGE`] old. A live run's sandbox is never touched, session or not.
//! [`plan_reap`] decides, a pure function; [`E2bBackend::reap`] lists and kills.

use std::collections::BTreeMap;
use std::time::Duration;

use crate::backend::E2bBackend;
use crate::client::SandboxInfo;
use crate::error::Result;
use crate::sandbox::{META_KEY, META_RUN};

/// How old a sandbox of no known run (or session) must be before it is killed.
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

/// What the session store says of a session's sandbox key (the session's id).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum SessionLiveness {
    /// The session exists: its sandbox waits for the next message.
    Live,
    /// No such session: removed, or never of this store.
    Unknown,
}

/// One of Toren's sandboxes, as listed.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TorenSandbox {
    pub id: String,
    /// The run that made it (a session's: the turn that made it).
    pub run: String,
    /// What it is kept under: the run's id, or the session's.
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

    fn age(&self, now: jiff::Timestamp) -> Option<Duration> {
        self.started_at
            .and_then(|t| Duration::try_from(now.duration_since(t)).ok())
    }
}

/// Why a sandbox is reaped.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReapReason {
    RunFinished,
    /// A session's, whose turn the store knows but whose session it does not: removed.
    SessionRemoved,
    /// Of no known run (or session), and this old.
    Orphaned {
        age: Duration,
    },
}

impl std::fmt::Display for ReapReason {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Self::RunFinished => f.write_str("its run is finished"),
            Self::SessionRemoved => f.write_str("its session was removed"),
            Self::Orphaned { age } => {
                write!(f, "no known run or session, {} h old", age.as_secs() / 3600)
            }
        }
    }
}

/// The sandboxes to kill, with why. `runs` answers for a run id, `sessions` for a
/// session's key; when in doubt, each should say live.
pub fn plan_reap(
    sandboxes: &[TorenSandbox],
    runs: impl Fn(&str) -> RunLiveness,
    sessions: impl Fn(&str) -> SessionLiveness,
    orphan_age: Duration,
    now: jiff::Timestamp,
) -> Vec<(TorenSandbox, ReapReason)> {
    let mut plan = Vec::new();
    for sandbox in sandboxes {
        let run = runs(&sandbox.run);
        let session = sandbox.is_session().then(|| sessions(&sandbox.key));
        let reason = match (run, session) {
            // A live run's sandbox, and a live session's, stay.
            (RunLiveness::Live, _) | (_, Some(SessionLiveness::Live)) => None,
            (RunLiveness::Finished, None) => Some(ReapReason::RunFinished),
            (RunLiveness::Finished, Some(SessionLiveness::Unknown)) => {
                Some(ReapReason::SessionRemoved)
            }
            (RunLiveness::Unknown, None | Some(SessionLiveness::Unknown)) => sandbox
                .age(now)
                .filter(|age| *age >= orphan_age)
                .map(|age| ReapReason::Orphaned { age }),
        };
        if let Some(reason) = reason {
            plan.push((sandbox.clone(), reason));
        }
    }
    plan
}

impl E2bBackend {
    /// One sweep: kills (unless `dry_run`) the sandboxes [`plan_reap`] picks; returns them,
    /// each with why and whether it was killed (`false`: already gone, or a dry run).
    pub async fn reap(
        &self,
        runs: impl Fn(&str) -> RunLiveness,
        sessions: impl Fn(&str) -> SessionLiveness,
        orphan_age: Duration,
        dry_run: bool,
    ) -> Result<Vec<(TorenSandbox, ReapReason, bool)>> {
        let listed = self.list_toren_sandboxes().await?;
        let mut done = Vec::new();
        let now = jiff::Timestamp::now();
        for (sandbox, reason) in plan_reap(&listed, runs, sessions, orphan_age, now) {
            let killed = !dry_run && self.client().kill(&sandbox.id).await?;
            done.push((sandbox, reason, killed));
        }
        Ok(done)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const NOW: i64 = 1_000_000_000;

    fn sandbox(id: &str, run: &str, key: &str, hours_old: i64) -> TorenSandbox {
        TorenSandbox {
            id: id.into(),
            run: run.into(),
            key: key.into(),
            state: "running".into(),
            started_at: Some(jiff::Timestamp::from_second(NOW - hours_old * 3600).unwrap()),
        }
    }

    fn runs(run: &str) -> RunLiveness {
        match run {
            r if r.starts_with("live") => RunLiveness::Live,
            r if r.starts_with("done") => RunLiveness::Finished,
            _ => RunLiveness::Unknown,
        }
    }

    fn sessions(key: &str) -> SessionLiveness {
        if key.starts_with("ses_live") {
            SessionLiveness::Live
        } else {
            SessionLiveness::Unknown
        }
    }

    fn plan(all: &[TorenSandbox]) -> Vec<(String, ReapReason)> {
        let now = jiff::Timestamp::from_second(NOW).unwrap();
        plan_reap(all, runs, sessions, ORPHAN_AGE, now)
            .into_iter()
            .map(|(s, r)| (s.id, r))
            .collect()
    }

    #[test]
    fn finished_runs_and_day_old_orphans_go_live_runs_stay() {
        let all = vec![
            sandbox("a", "live", "live", 100),
            sandbox("b", "done", "done", 0),
            sandbox("c", "gone", "gone", 25),
            sandbox("d", "gone2", "gone2", 2),
            // No start time: its age is unknown, so it is never an orphan.
            TorenSandbox {
                started_at: None,
                ..sandbox("e", "gone3", "gone3", 0)
            },
        ];
        assert_eq!(
            plan(&all),
            vec![
                ("b".to_owned(), ReapReason::RunFinished),
                (
                    "c".to_owned(),
                    ReapReason::Orphaned {
                        age: Duration::from_secs(25 * 3600)
                    }
                ),
            ]
        );
    }

    #[test]
    fn a_sessions_sandbox_goes_with_its_session_never_while_it_or_a_run_lives() {
        let all = vec![
            // A live session's paused sandbox stays, however old, its turn long finished.
            sandbox("kept", "done-1", "ses_live1", 24 * 30),
            // Also when the turn that made it is unknown (its log pruned).
            sandbox("kept-unknown-turn", "x-1", "ses_live2", 24 * 30),
            // The session was removed (its turn is known, the session is not): at once.
            sandbox("removed", "done-2", "ses_gone1", 0),
            // A live turn's sandbox is never touched, even with its session unknown.
            sandbox("live-turn", "live-3", "ses_gone2", 48),
            // Nothing known of it: an orphan once a day old, not before.
            sandbox("orphan", "x-4", "ses_gone3", 30),
            sandbox("young", "x-5", "ses_gone4", 23),
        ];
        assert_eq!(
            plan(&all),
            vec![
                ("removed".to_owned(), ReapReason::SessionRemoved),
                (
                    "orphan".to_owned(),
                    ReapReason::Orphaned {
                        age: Duration::from_secs(30 * 3600)
                    }
                ),
            ]
        );
    }

    #[test]
    fn reasons_read_as_the_sweep_prints_them() {
        assert_eq!(ReapReason::RunFinished.to_string(), "its run is finished");
        assert_eq!(
            ReapReason::SessionRemoved.to_string(),
            "its session was removed"
        );
        assert_eq!(
            ReapReason::Orphaned {
                age: Duration::from_secs(25 * 3600)
            }
            .to_string(),
            "no known run or session, 25 h old"
        );
    }
}
