//! "Raise the budget" from Telegram: a press raises each limit the turn's run reached by
//! the agent's budget for that limit once more (the pinned one, so each press adds the
//! same), recorded with the Telegram user as who raised it; the callback is answered at
//! once. The turn's view turns the offer into what was done when the raise is journaled,
//! whichever front door made it. A press after the pause is over is told so.

use toren_display::visible;
use toren_protocol::{BudgetLimit, BudgetLimits, BudgetReached};
use toren_runtime::{Actor, BudgetRaise};
use toren_store::ChatButton;

use super::Bot;
use crate::render;
use crate::turn::BUDGET_BUTTON;

impl Bot {
    pub(super) async fn raise(&self, callback: &str, button: &ChatButton, actor: &Actor) {
        let answer = self.raised(button, actor).await;
        let _ = self.api.answer_callback(callback, &answer).await;
    }

    /// Raises the run's budget; what the press is answered.
    async fn raised(&self, button: &ChatButton, actor: &Actor) -> String {
        if button.call_id != BUDGET_BUTTON {
            return "Unknown button.".to_owned();
        }
        let view = match self.service.get(&button.run_id).await {
            Ok(view) => view,
            Err(e) => {
                tracing::warn!(run = %button.run_id, "cannot read the run to raise its budget: {e}");
                return "Cannot look the run up now; try again.".to_owned();
            }
        };
        let Some(state) = view.state else {
            return "The run cannot be read; raise it with `toren budget`.".to_owned();
        };
        let Some(reached) = state.budget_reached() else {
            return "The turn is no longer paused at its budget.".to_owned();
        };
        let pinned = state.agent.budget.map(|b| b.limits).unwrap_or_default();
        let raise = raise_for(reached, pinned);
        if raise == BudgetRaise::default() {
            return format!(
                "The agent's budget gives nothing to raise by; use `toren budget {}`.",
                button.run_id
            );
        }
        match self
            .service
            .raise_budget(&button.run_id, raise, actor)
            .await
        {
            Ok(_) => format!(
                "Raised by {}.",
                render::amounts(raise.tokens, raise.usd, raise.wall_secs)
            ),
            Err(toren_runtime::Error::Store(toren_store::Error::NotAwaitingBudget { .. })) => {
                "Already raised: the turn is no longer paused at its budget.".to_owned()
            }
            Err(e) => visible(&format!("Not raised: {e}")).into_owned(),
        }
    }
}

/// Each limit `reached` names, raised by the agent's budget for it (`pinned`), or by the
/// limit in force when the agent's own is unknown.
fn raise_for(reached: &BudgetReached, pinned: BudgetLimits) -> BudgetRaise {
    let mut raise = BudgetRaise::default();
    for limit in &reached.reached {
        match limit {
            BudgetLimit::Tokens => {
                raise.tokens = pinned.tokens.or(reached.limits.tokens).unwrap_or(0);
            }
            BudgetLimit::Usd => {
                raise.usd = pinned.usd.or(reached.limits.usd).unwrap_or_default();
            }
            BudgetLimit::Wall => {
                raise.wall_secs = pinned.wall_secs.or(reached.limits.wall_secs).unwrap_or(0);
            }
        }
    }
    raise
}
