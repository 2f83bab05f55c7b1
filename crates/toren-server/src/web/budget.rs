//! The run page's budget parts: what the run has spent against its limits (rendered at
//! load, updated by `app.js` from `budget_reached`), and the form that raises the budget
//! of a run paused at it (`POST /ui/api/runs/{id}/budget`, shown while it is paused).

use std::fmt::Write as _;

use toren_protocol::RunStatus;

use super::html::esc;

/// The spending panel and the raise form for the run `view` shows.
pub(crate) fn panel(view: &toren_runtime::RunView) -> String {
    let mut body = String::new();
    let Some(state) = view.state.as_ref() else {
        return body;
    };
    let spent = state.spending();
    let limits = state.budget_limits();
    let mut line = format!("{} tokens", spent.tokens);
    if let Some(usd) = spent.usd {
        let _ = write!(line, " · {usd}");
    }
    let _ = write!(line, " · {} s active", spent.wall_secs);
    let mut of = Vec::new();
    if let Some(tokens) = limits.tokens {
        of.push(format!("{tokens} tokens"));
    }
    if let Some(usd) = limits.usd {
        of.push(usd.to_string());
    }
    if let Some(secs) = limits.wall_secs {
        of.push(format!("{secs} s"));
    }
    let budget = if of.is_empty() {
        "no budget".to_owned()
    } else {
        format!("budget {}", of.join(" · "))
    };
    let _ = write!(
        body,
        "<section class=\"panel\"><h2>Spending</h2><p id=\"spending\">{}</p><p id=\"budget-limits\" class=\"muted\">{}</p></section>",
        esc(&line),
        esc(&budget)
    );
    let paused = view.summary.status == RunStatus::AwaitingBudget;
    let reached = state
        .budget_reached()
        .map(|r| {
            r.reached
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" and ")
        })
        .unwrap_or_default();
    let input = |id: &str, label: &str, shown: bool, placeholder: &str| {
        if shown {
            format!(
                "<label>{label} <input id=\"{id}\" inputmode=\"decimal\" placeholder=\"{placeholder}\"></label> "
            )
        } else {
            String::new()
        }
    };
    let _ = write!(
        body,
        "<section id=\"budget\" class=\"approval\"{}><h2>Paused: budget reached</h2><p id=\"budget-reached\">{}</p><p>{}{}{}<button type=\"button\" id=\"raise-budget\">Raise budget</button></p><p id=\"budget-error\" class=\"error\"></p></section>",
        if paused { "" } else { " hidden" },
        esc(&if reached.is_empty() {
            String::new()
        } else {
            format!("Reached: {reached}. Raise it to let the run go on from where it stopped.")
        }),
        input(
            "add-tokens",
            "Add tokens",
            limits.tokens.is_some(),
            "100000"
        ),
        input("add-usd", "Add USD", limits.usd.is_some(), "2.00"),
        input(
            "add-wall",
            "Add wall time",
            limits.wall_secs.is_some(),
            "30m"
        ),
    );
    body
}
