//! The reaper: finds this instance's sandbox containers by label and removes the ones no
//! run needs. Its four rules: a container whose run is finished goes; a container older
//! than the given age whose run the store does not know goes; a container of a live run
//! (running, awaiting approval, or waiting to be resumed) is never touched; and no
//! workspace directory is ever deleted (removing a container leaves its bind mounts
//! alone). Which containers go is decided by the pure [`plan_reap`]; the caller tells it
//! what the store knows about each run.

use std::collections::HashMap;
use std::time::Duration;

use bollard::query_parameters::ListContainersOptionsBuilder;
use jiff::Timestamp;

use crate::backend::DockerBackend;
use crate::container;
use crate::error::{Error, Result};
use crate::spec::{LABEL_CREATED, LABEL_INSTANCE, LABEL_RUN, LABEL_WORKSPACE};

/// The age past which a container of a run the store does not know is removed.
pub const ORPHAN_AGE: Duration = Duration::from_secs(24 * 60 * 60);

/// A sandbox container of this Toren instance.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TorenContainer {
    pub id: String,
    pub name: String,
    /// The run it belongs to (its `toren.run` label).
    pub run: String,
    /// The workspace on the host (its `toren.workspace` label).
    pub workspace: Option<String>,
    /// When Toren created it (its `toren.created` label, else the daemon's record).
    pub created: Timestamp,
    /// The daemon's state: `running`, `exited`, `created`…
    pub state: String,
    pub image: String,
}

/// What the store knows of a run.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum RunLiveness {
    /// Running, awaiting approval, or interrupted and waiting to be resumed.
    Live,
    /// Completed, failed or cancelled.
    Finished,
    /// Not in the store (another store's run, or one deleted).
    Unknown,
}

/// Why a container is removed.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ReapReason {
    /// Its run is finished.
    RunFinished,
    /// Its run is unknown and it is older than the given age.
    Orphaned { age: Duration },
}

/// What became of a container the reaper chose.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum ReapOutcome {
    /// A dry run: it would have been removed.
    WouldRemove,
    Removed,
    /// It was gone by the time the reaper came.
    AlreadyGone,
    /// The daemon refused; the next sweep tries again.
    Failed(String),
}

/// One container the reaper chose, and what happened to it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ReapAction {
    pub container: TorenContainer,
    pub reason: ReapReason,
    pub outcome: ReapOutcome,
}

/// Chooses which of `containers` to remove at time `now`. Containers of live runs, and
/// those of unknown runs younger than `older_than`, are kept.
pub fn plan_reap(
    containers: Vec<TorenContainer>,
    is_live: impl Fn(&str) -> RunLiveness,
    older_than: Duration,
    now: Timestamp,
) -> Vec<(TorenContainer, ReapReason)> {
    containers
        .into_iter()
        .filter_map(|c| {
            let reason = match is_live(&c.run) {
                RunLiveness::Live => return None,
                RunLiveness::Finished => ReapReason::RunFinished,
                RunLiveness::Unknown => {
                    let age = now
                        .duration_since(c.created)
                        .try_into()
                        .unwrap_or(Duration::ZERO);
                    if age <= older_than {
                        return None;
                    }
                    ReapReason::Orphaned { age }
                }
            };
            Some((c, reason))
        })
        .collect()
}

impl DockerBackend {
    /// This instance's sandbox containers, running or not.
    pub async fn list_toren_containers(&self) -> Result<Vec<TorenContainer>> {
        let filters = HashMap::from([(
            "label",
            vec![
                format!("{LABEL_INSTANCE}={}", self.settings().instance),
                LABEL_RUN.to_owned(),
            ],
        )]);
        let options = ListContainersOptionsBuilder::new()
            .all(true)
            .filters(&filters)
            .build();
        let listed = self
            .client()
            .list_containers(Some(options))
            .await
            .map_err(|e| Error::docker("list the sandbox containers", e))?;
        Ok(listed
            .into_iter()
            .filter_map(|c| {
                let labels = c.labels.unwrap_or_default();
                let created = labels
                    .get(LABEL_CREATED)
                    .and_then(|t| t.parse::<Timestamp>().ok())
                    .or_else(|| Timestamp::from_second(c.created?).ok())
                    .unwrap_or(Timestamp::UNIX_EPOCH);
                Some(TorenContainer {
                    name: c
                        .names
                        .and_then(|n| n.into_iter().next())
                        .map(|n| n.trim_start_matches('/').to_owned())
                        .unwrap_or_default(),
                    run: labels.get(LABEL_RUN)?.clone(),
                    workspace: labels.get(LABEL_WORKSPACE).cloned(),
                    created,
                    state: c.state.map(|s| s.to_string()).unwrap_or_default(),
                    image: c.image.unwrap_or_default(),
                    id: c.id?,
                })
            })
            .collect())
    }

    /// One sweep: removes (or, with `dry_run`, only reports) the containers [`plan_reap`]
    /// chooses. A container the daemon refuses to remove is reported and left for the next
    /// sweep; only listing failures are errors.
    pub async fn reap(
        &self,
        is_live: impl Fn(&str) -> RunLiveness,
        older_than: Duration,
        dry_run: bool,
    ) -> Result<Vec<ReapAction>> {
        let containers = self.list_toren_containers().await?;
        let mut actions = Vec::new();
        for (container, reason) in plan_reap(containers, is_live, older_than, Timestamp::now()) {
            let outcome = if dry_run {
                ReapOutcome::WouldRemove
            } else {
                match container::remove(self.client(), &container.id).await {
                    Ok(true) => ReapOutcome::Removed,
                    Ok(false) => ReapOutcome::AlreadyGone,
                    Err(err) => ReapOutcome::Failed(err.to_string()),
                }
            };
            tracing::info!(
                container = %container.name,
                run = %container.run,
                ?reason,
                ?outcome,
                "sandbox reaper"
            );
            actions.push(ReapAction {
                container,
                reason,
                outcome,
            });
        }
        Ok(actions)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use pretty_assertions::assert_eq;

    fn container(run: &str, hours_old: i64, now: Timestamp) -> TorenContainer {
        TorenContainer {
            id: format!("id-{run}"),
            name: format!("toren-test-{run}"),
            run: run.to_owned(),
            workspace: None,
            created: now - jiff::SignedDuration::from_hours(hours_old),
            state: "running".to_owned(),
            image: "img".to_owned(),
        }
    }

    #[test]
    fn the_plan_follows_the_rules() {
        let now = Timestamp::now();
        let containers = vec![
            container("live-old", 48, now),
            container("finished-new", 0, now),
            container("unknown-new", 1, now),
            container("unknown-old", 25, now),
        ];
        let liveness = |run: &str| match run {
            "live-old" => RunLiveness::Live,
            "finished-new" => RunLiveness::Finished,
            _ => RunLiveness::Unknown,
        };
        let plan: Vec<(String, ReapReason)> = plan_reap(containers, liveness, ORPHAN_AGE, now)
            .into_iter()
            .map(|(c, r)| (c.run, r))
            .collect();
        assert_eq!(
            plan,
            vec![
                ("finished-new".to_owned(), ReapReason::RunFinished),
                (
                    "unknown-old".to_owned(),
                    ReapReason::Orphaned {
                        age: Duration::from_secs(25 * 3600)
                    }
                ),
            ]
        );
    }
}
