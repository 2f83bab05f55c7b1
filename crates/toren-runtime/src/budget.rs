//! Raising the budget of a run paused at it: one atomic store operation that needs no
//! lease ([`toren_store::EventLog::raise_budget`]), like deciding an approval, so any front
//! door of any process raises any run; the run is claimable again at once and resumes from
//! where it stopped (the model call it was about to make; nothing is repeated).

use toren_agent::RunState;
use toren_protocol::{BudgetLimit, BudgetRaised, Event, RunId, Usd};

use toren_worker::Observer as _;

use crate::{Actor, Error, Result, RunService};

/// How much to add to a run's limits; a zero adds nothing.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct BudgetRaise {
    pub tokens: u64,
    pub usd: Usd,
    pub wall_secs: u64,
}

impl RunService {
    /// Raises the budget of `run`, which must be paused at it (`awaiting_budget`). Each
    /// amount is added to a limit the run has: raising one it does not have is refused
    /// ([`Error::NoSuchLimit`]), as is a raise of nothing. A second raise of one pause is
    /// refused by the store (`NotAwaitingBudget`); a raise too small to pass the limit
    /// that was reached lets the run pause again before its next model call.
    pub async fn raise_budget(
        &self,
        run: &RunId,
        raise: BudgetRaise,
        actor: &Actor,
    ) -> Result<Event> {
        if raise == BudgetRaise::default() {
            return Err(Error::NothingToRaise { run: run.clone() });
        }
        let events = self.store().read(run, 0).await?;
        if events.is_empty() {
            return Err(toren_store::Error::RunNotFound(run.clone()).into());
        }
        // The pinned budget does not change, so this check does not race the raise.
        if let Ok(state) = RunState::from_events(&events) {
            let limits = state.budget_limits();
            let missing = [
                (
                    raise.tokens > 0 && limits.tokens.is_none(),
                    BudgetLimit::Tokens,
                ),
                (
                    raise.usd > Usd::ZERO && limits.usd.is_none(),
                    BudgetLimit::Usd,
                ),
                (
                    raise.wall_secs > 0 && limits.wall_secs.is_none(),
                    BudgetLimit::Wall,
                ),
            ];
            if let Some((_, limit)) = missing.into_iter().find(|(missing, _)| *missing) {
                return Err(Error::NoSuchLimit {
                    run: run.clone(),
                    limit,
                });
            }
        }
        let raised = BudgetRaised {
            tokens: raise.tokens,
            usd: raise.usd,
            wall_secs: raise.wall_secs,
            by: actor.by.clone(),
            via: actor.via.clone(),
        };
        let event = self.store().raise_budget(run, raised).await?;
        // Followers see it at once, and a pool of workers in this process claims the run.
        self.notifier().event(&event);
        Ok(event)
    }
}
