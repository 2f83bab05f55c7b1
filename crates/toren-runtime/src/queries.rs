//! The run service's questions about many runs: a page of the listing
//! ([`RunService::list_page`], what `GET /runs` and `toren runs list` show) and the runs a
//! worker may claim ([`RunService::claimable`], what a pool of workers takes next). Both
//! are the store's queries (`toren_store::RunQuery`, `toren_store::ClaimQuery`); this layer
//! adds what only a process can judge: whether a lease's holder is provably gone, and
//! recording unreplayable logs as failed before they are listed.

use std::time::Duration;

use toren_store::{ClaimLeases, ClaimQuery, ClaimRequest, Lease, RunPage, RunQuery, RunSummary};
use toren_worker::holder;

use toren_protocol::RunId;

use crate::{Error, Result, RunService};

/// How many runs leased by processes of this boot and namespaces a claim looks at to find
/// those whose holder is gone: at most the runs such processes drive at once.
const GONE_SCAN: u32 = 1000;

/// How often [`RunService::claim`] looks for runs of provably gone holders at most.
const GONE_EVERY: Duration = Duration::from_millis(500);

impl RunService {
    /// A page of runs, newest first, as `query` selects them. A run on it that claims to be
    /// resumable but whose log cannot be replayed is recorded as failed (with the reason)
    /// first, and the page read again: it then shows the run as failed (or, filtered by
    /// status, not at all).
    pub async fn list_page(&self, query: &RunQuery) -> Result<RunPage> {
        let page = self.store().query_runs(query).await?;
        if self.fail_unreplayable(&page.runs).await? {
            return Ok(self.store().query_runs(query).await?);
        }
        Ok(page)
    }

    /// The runs a worker may claim now, oldest first, at most `limit`: queued or running
    /// (never one awaiting approval: its decision makes it running again), and nobody
    /// driving them — no lease, an expired one, or a live one whose holder is provably gone
    /// ([`holder::is_gone`]: a process of this machine that died, e.g. a `toren serve`
    /// killed mid-run). A snapshot: claiming one is still
    /// `acquire_lease`'s race. Logs are not checked here: the worker that drives a run
    /// records an unreplayable one as failed.
    pub async fn claimable(&self, limit: u32) -> Result<Vec<RunSummary>> {
        let store = self.store();
        let mut runs = store.claimable_runs(&ClaimQuery::free(limit)).await?;
        if let Some(suffix) = judged_suffix(&self.holder) {
            let held = ClaimQuery {
                limit: GONE_SCAN,
                leases: ClaimLeases::LiveHeldBySuffix(suffix.to_owned()),
            };
            let gone = store
                .claimable_runs(&held)
                .await?
                .into_iter()
                .filter(|run| {
                    run.lease
                        .as_ref()
                        .is_some_and(|lease| holder::is_gone(&lease.holder))
                });
            runs.extend(gone);
            runs.sort_by(|a, b| (a.created_at, &a.id).cmp(&(b.created_at, &b.id)));
            runs.truncate(limit as usize);
        }
        Ok(runs)
    }

    /// Claims the oldest run `request` lets through and leases it to `request.holder`
    /// ([`EventLog::claim`](toren_store::EventLog::claim), one atomic store operation).
    /// Runs whose live lease is held by a process that is provably gone
    /// ([`holder::is_gone`]: one of this machine that died) are freed first, so they are
    /// claimable at once instead of after their lease's expiry; that look costs a query,
    /// so it is taken at most every [`GONE_EVERY`] (a pool claiming many runs in one pass
    /// looks once).
    pub async fn claim(&self, request: &ClaimRequest) -> Result<Option<(RunSummary, Lease)>> {
        let due = {
            let mut last = self
                .gone_checked
                .lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner);
            let due = last.is_none_or(|at| at.elapsed() >= GONE_EVERY);
            if due {
                *last = Some(std::time::Instant::now());
            }
            due
        };
        if due {
            self.free_gone_holders().await?;
        }
        Ok(self.store().claim(request).await?)
    }

    /// Releases the live leases whose holders are provably gone, taking each over first
    /// (a compare-and-swap: a holder that is not the dead one keeps its lease).
    async fn free_gone_holders(&self) -> Result<()> {
        let Some(suffix) = judged_suffix(&self.holder) else {
            return Ok(());
        };
        let store = self.store();
        let held = ClaimQuery {
            limit: GONE_SCAN,
            leases: ClaimLeases::LiveHeldBySuffix(suffix.to_owned()),
        };
        for run in store.claimable_runs(&held).await? {
            let Some(dead) = run.lease.filter(|l| holder::is_gone(&l.holder)) else {
                continue;
            };
            let taken = store
                .take_over_lease(&run.id, &dead.holder, &self.holder, self.settings.lease_ttl)
                .await;
            match taken {
                Ok(lease) => {
                    tracing::info!(
                        run_id = %run.id,
                        holder = %dead.holder,
                        "the run's lease holder is gone; the run is free to claim"
                    );
                    store.release_lease(&lease).await?;
                }
                // Someone else took it, or it ended: nothing to free.
                Err(
                    toren_store::Error::Leased { .. }
                    | toren_store::Error::LeaseLost { .. }
                    | toren_store::Error::RunEnded { .. },
                ) => {}
                Err(e) => return Err(e.into()),
            }
        }
        Ok(())
    }

    /// How often a follower checks the store when nothing in this process said a run
    /// moved (and how often a session's follower looks for its next turn).
    pub fn follow_poll(&self) -> Duration {
        self.settings.follow_poll
    }

    /// Records as failed each run of `runs` that claims to be resumable but whose log does
    /// not fold; whether any was.
    pub(crate) async fn fail_unreplayable(&self, runs: &[RunSummary]) -> Result<bool> {
        let mut repaired = false;
        for run in runs.iter().filter(|r| Self::is_resumable(r)) {
            let failed = toren_worker::fail_if_unreplayable(
                self.store().as_ref(),
                &run.id,
                &self.holder,
                self.settings.lease_ttl,
            )
            .await?;
            repaired |= failed.is_some();
        }
        Ok(repaired)
    }
}

/// The part of this process's holder name that [`holder::is_gone`] needs to match before
/// it can judge another holder: from `/boot=` on (boot id, PID and time namespaces). Only
/// holders named with the same suffix can be proved gone. `None` for a name without it.
fn judged_suffix(this_process: &str) -> Option<&str> {
    this_process
        .find("/boot=")
        .map(|start| &this_process[start..])
}

/// How many runs a page of [`RunService::resolve_run`]'s scan reads.
const RESOLVE_PAGE: u32 = 500;

impl RunService {
    /// The run a person named: a whole run id, `last` (the newest run), or a prefix of
    /// exactly one run's id (with or without its `run_`). [`Error::NoRunMatches`] when no
    /// run matches, [`Error::AmbiguousRun`] (naming some) when more than one does.
    pub async fn resolve_run(&self, given: &str) -> Result<RunId> {
        if given == "last" {
            let page = self.store().query_runs(&RunQuery::newest(1)).await?;
            return page
                .runs
                .into_iter()
                .next()
                .map(|run| run.id)
                .ok_or_else(|| Error::NoRunMatches {
                    given: given.to_owned(),
                });
        }
        if let Ok(id) = given.parse::<RunId>() {
            match self.store().run(&id).await {
                Ok(_) => return Ok(id),
                Err(toren_store::Error::RunNotFound(_)) => {}
                Err(e) => return Err(e.into()),
            }
        }
        let prefix = if given.starts_with("run_") {
            given.to_owned()
        } else {
            format!("run_{given}")
        };
        if given.is_empty()
            || !prefix
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '-'))
        {
            return Err(Error::NoRunMatches {
                given: given.to_owned(),
            });
        }
        let mut matches = Vec::new();
        let mut query = RunQuery::newest(RESOLVE_PAGE);
        loop {
            let page = self.store().query_runs(&query).await?;
            matches.extend(
                page.runs
                    .into_iter()
                    .map(|run| run.id)
                    .filter(|id| id.as_str().starts_with(&prefix)),
            );
            match page.next {
                Some(next) if matches.len() < 2 => query.after = Some(next),
                _ => break,
            }
        }
        match matches.len() {
            1 => Ok(matches.remove(0)),
            0 => Err(Error::NoRunMatches {
                given: given.to_owned(),
            }),
            _ => Err(Error::AmbiguousRun {
                given: given.to_owned(),
                some: matches.iter().map(ToString::to_string).collect(),
            }),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_judged_suffix_is_the_boot_and_namespaces() {
        assert_eq!(
            judged_suffix("box/42/1234/boot=b-1/pidns=4026531836/timens=4026531834"),
            Some("/boot=b-1/pidns=4026531836/timens=4026531834")
        );
        assert_eq!(judged_suffix("box:42"), None);
        let me = holder::this_process();
        let suffix = judged_suffix(&me).unwrap();
        assert!(me.ends_with(suffix) && suffix.starts_with("/boot="), "{me}");
    }
}
