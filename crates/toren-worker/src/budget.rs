//! A run paused at its budget (`budget_reached`): let go of at once by a worker that parks
//! waiting runs (a pool: the raise, recorded in the log, makes the run claimable again),
//! else watched in the log until someone raises it from anywhere (`toren budget`, the API,
//! the web page) or the run ends. Nothing is sent to the model meanwhile.

use toren_agent::RunState;
use toren_protocol::BudgetReached;

use crate::{Error, Outcome, Worker};

impl Worker {
    pub(crate) async fn await_budget(
        &self,
        state: &mut RunState,
        reached: &BudgetReached,
    ) -> Result<Option<Outcome>, Error> {
        let before = state.last_seq;
        self.catch_up(state).await?;
        if state.last_seq != before {
            return Ok(None);
        }
        self.config.observer.awaiting_budget(&state.run_id, reached);
        if self.parks_approvals() {
            return Ok(Some(Outcome::AwaitingBudget));
        }
        loop {
            tokio::time::sleep(self.config.approval_poll).await;
            self.catch_up(state).await?;
            if state.last_seq != before {
                return Ok(None);
            }
        }
    }
}
