//! `toren budget RUN [--add-tokens N] [--add-usd D] [--add-wall 30m]`: raise the budget of
//! a run paused at it, from any terminal, through the run service. The run is claimable
//! again at once; the process that drives it (a waiting `toren run`, a pool) resumes it
//! from the model call it was about to make. When that process is gone, the command says
//! so and how to continue the run (`toren resume`), rather than promise it goes on.

use anyhow::anyhow;
use toren_protocol::Usd;
use toren_runtime::{Actor, BudgetRaise, RunService};
use toren_store::RunSummary;

use crate::cli::BudgetArgs;
use crate::commands::resolve_run;
use crate::exit::Failure;
use crate::wiring;

/// `--add-usd`: a non-negative amount of dollars.
pub(crate) fn parse_usd(text: &str) -> Result<Usd, String> {
    text.trim()
        .trim_start_matches('$')
        .parse::<f64>()
        .ok()
        .and_then(Usd::from_dollars)
        .ok_or_else(|| format!("`{text}` is not an amount of US dollars, e.g. `2` or `0.50`"))
}

/// `--add-wall`: a duration with its unit, in whole seconds (rounded up).
pub(crate) fn parse_wall(text: &str) -> Result<u64, String> {
    let duration = text.trim().parse::<jiff::SignedDuration>().map_err(|_| {
        format!("`{text}` is not a duration; write it with its unit, e.g. `30m` or `1h`")
    })?;
    if duration.is_negative() {
        return Err(format!("`{text}` is negative"));
    }
    let secs = duration.as_secs() + i64::from(duration.subsec_nanos() > 0);
    Ok(u64::try_from(secs).unwrap_or(u64::MAX))
}

pub(crate) async fn budget(args: &BudgetArgs) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    let service = wiring::service_for(&settings).await?;
    let run_id = resolve_run(&service, &args.run).await?;
    let raise = BudgetRaise {
        tokens: args.add_tokens.unwrap_or(0),
        usd: args.add_usd.unwrap_or(Usd::ZERO),
        wall_secs: args.add_wall.unwrap_or(0),
    };
    let actor = Actor {
        by: settings.user.clone(),
        via: "cli".to_owned(),
    };
    service
        .raise_budget(&run_id, raise, &actor)
        .await
        .map_err(|e| Failure::failed(anyhow!(e)))?;
    let summary = service.summary(&run_id).await.map_err(Failure::failed)?;
    eprintln!(
        "raised the budget of run {run_id}; {}",
        after_raise(&service, &summary).await
    );
    Ok(0)
}

/// What happens to a run whose budget was just raised: the process that waited goes on, or
/// (nobody drives it: that process is gone) it waits for a worker or `toren resume`.
async fn after_raise(service: &RunService, run: &RunSummary) -> String {
    let id = &run.id;
    if !RunService::is_resumable(run) {
        return "the process that drives it goes on from where it paused".to_owned();
    }
    // Without a worker registry there are no workers to wait for.
    let workers = service.live_workers().await.unwrap_or_default();
    if workers.is_empty() {
        format!("no process drives it: continue it with `toren resume {id}`")
    } else {
        format!(
            "no process drives it now: a worker claims it when one is free (`toren workers \
             list`), or continue it here with `toren resume {id}`"
        )
    }
}

/// `1,234 tokens, $0.0123, 1m 3s active`: what a run has spent (the dollars only when the
/// model's prices are known).
pub(crate) fn spending_line(state: &toren_agent::RunState) -> String {
    let spent = state.spending();
    let usd = spent.usd.map(|u| format!(", {u}")).unwrap_or_default();
    format!(
        "{} tokens{usd}, {} active",
        toren_display::thousands(spent.tokens),
        wall(spent.wall_secs)
    )
}

/// `tokens 1,100 of 1,000 (reached), wall 3s of 2h`: each limit in force and how much of
/// it is spent; `None` for a run without limits.
pub(crate) fn budget_line(state: &toren_agent::RunState) -> Option<String> {
    let limits = state.budget_limits();
    if !limits.is_limited() {
        return None;
    }
    let spent = state.spending();
    let reached = state.limits_reached(&spent);
    let mark = |limit| {
        if reached.contains(&limit) {
            " (reached)"
        } else {
            ""
        }
    };
    let mut parts = Vec::new();
    if let Some(tokens) = limits.tokens {
        parts.push(format!(
            "tokens {} of {}{}",
            toren_display::thousands(spent.tokens),
            toren_display::thousands(tokens),
            mark(toren_protocol::BudgetLimit::Tokens)
        ));
    }
    if let Some(usd) = limits.usd {
        let spent = spent
            .usd
            .map_or_else(|| "unknown".to_owned(), |u| u.to_string());
        parts.push(format!(
            "usd {spent} of {usd}{}",
            mark(toren_protocol::BudgetLimit::Usd)
        ));
    }
    if let Some(secs) = limits.wall_secs {
        parts.push(format!(
            "wall {} of {}{}",
            wall(spent.wall_secs),
            wall(secs),
            mark(toren_protocol::BudgetLimit::Wall)
        ));
    }
    Some(parts.join(", "))
}

/// How to raise the budget of `run`, paused at `reached`: one `--add-…` per limit reached.
pub(crate) fn raise_hint(
    run: &toren_protocol::RunId,
    reached: &toren_protocol::BudgetReached,
) -> String {
    let flags: Vec<&str> = reached
        .reached
        .iter()
        .map(|limit| match limit {
            toren_protocol::BudgetLimit::Tokens => "--add-tokens N",
            toren_protocol::BudgetLimit::Usd => "--add-usd DOLLARS",
            toren_protocol::BudgetLimit::Wall => "--add-wall 30m",
        })
        .collect();
    format!("toren budget {run} {}", flags.join(" "))
}

/// The limits reached, as words: `tokens and usd`.
pub(crate) fn reached_words(reached: &toren_protocol::BudgetReached) -> String {
    reached
        .reached
        .iter()
        .map(ToString::to_string)
        .collect::<Vec<_>>()
        .join(" and ")
}

/// `1h 2m 3s`.
fn wall(secs: u64) -> String {
    let d = jiff::SignedDuration::from_secs(i64::try_from(secs).unwrap_or(i64::MAX));
    format!("{d:#}")
}
