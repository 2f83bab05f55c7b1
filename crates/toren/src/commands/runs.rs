//! `toren runs list` and `toren runs show RUN`. Every field that came from a model, a
//! sandbox or a provider is rendered with `toren-display` (shown, never obeyed); `--json`
//! output has such characters `\u`-escaped, the same data.

use serde_json::json;
use toren_config::{QueueChoice, Settings};
use toren_display::{escape_json, visible, visible_lines};
use toren_protocol::Usage;
use toren_runtime::RunService;
use toren_store::RunSummary;

use crate::commands::resolve_run;
use crate::exit::Failure;
use crate::printer::{command_block, one_line};
use crate::wiring;

mod network;

/// Whether nobody drives the run and `toren resume` would continue it.
fn resumable(run: &RunSummary) -> bool {
    RunService::is_resumable(run)
}

/// Whether this installation runs workers: one is alive, volumes are named
/// (`TOREN_WORKSPACE_VOLUME`), or runs queue in Postgres for a fleet.
async fn workers_in_use(service: &RunService, settings: &Settings) -> bool {
    settings.workspace_volume.is_some()
        || settings.queue == QueueChoice::Postgres
        || service
            .live_workers()
            .await
            .is_ok_and(|workers| !workers.is_empty())
}

fn summary_json(run: &RunSummary) -> serde_json::Value {
    json!({
        "resumable": resumable(run),
        "held_by": run.lease.as_ref().map(|l| &l.holder),
        "id": run.id,
        "agent": run.agent,
        "status": run.status,
        "created_at": run.created_at.to_string(),
        "updated_at": run.updated_at.to_string(),
        "events": run.last_seq,
    })
}

pub(crate) async fn list(as_json: bool, limit: u32) -> Result<u8, Failure> {
    let service = wiring::service().await?;
    let runs = service.list(limit).await.map_err(Failure::failed)?;
    if as_json {
        let array: Vec<_> = runs.iter().map(summary_json).collect();
        println!(
            "{}",
            escape_json(&serde_json::Value::Array(array).to_string())
        );
        return Ok(0);
    }
    if runs.is_empty() {
        {
            eprintln!("no runs yet; start one with `toren run AGENT --input TEXT`");
        }
        return Ok(0);
    }
    println!(
        "{:<32}  {:<30}  {:<20}  {:>6}  AGENT",
        "RUN", "STATUS", "CREATED", "EVENTS"
    );
    for run in &runs {
        let status = if resumable(run) {
            format!("{} (resumable)", run.status)
        } else {
            run.status.to_string()
        };
        println!(
            "{:<32}  {:<30}  {:<20}  {:>6}  {}",
            run.id,
            status,
            run.created_at.strftime("%Y-%m-%d %H:%M:%S").to_string(),
            run.last_seq,
            visible(&run.agent)
        );
    }
    Ok(0)
}

pub(crate) async fn show(run: &str, as_json: bool) -> Result<u8, Failure> {
    let settings = wiring::settings()?;
    let service = wiring::service_for(&settings).await?;
    let run_id = resolve_run(&service, run).await?;
    let view = service.get(&run_id).await.map_err(Failure::failed)?;
    let unserved = service
        .unserved_volume(&view)
        .await
        .map_err(Failure::failed)?;
    let passed_over = service.passed_over(&view).await.map_err(Failure::failed)?;
    let summary = view.summary;
    let Some(state) = view.state else {
        // Recorded as failed by the service; the summary and the reason are all there is.
        let reason = view.error.unwrap_or_default();
        return show_unreplayable(&summary, &reason, as_json);
    };
    let pending = view.pending.map(|request| {
        json!({"call_id": request.call_id, "tool": request.tool, "command": request.command,
            "attempt": request.attempt, "interrupted": request.attempt > 1})
    });
    let mut object = summary_json(&summary);
    // The hosts asked about and the connections journaled.
    let events = service.events(&run_id, 0).await.map_err(Failure::failed)?;
    object["network"] = network::json_of(&state, &events);
    object["model"] = json!(state.agent.model);
    object["policy"] = json!(state.policy);
    object["turns"] = json!(state.turns);
    let workspace = state
        .sandbox
        .as_ref()
        .map(|s| s.workspace.clone())
        .or_else(|| state.policy.as_ref().and_then(|p| p.workspace.clone()));
    object["workspace"] = json!(workspace);
    object["pending_approval"] = json!(pending);
    object["volume"] = json!(state.policy.as_ref().and_then(|p| p.volume.clone()));
    object["waiting_for_volume"] = json!(unserved);
    object["passed_over"] = json!(
        passed_over
            .iter()
            .map(|p| json!({"worker": p.worker, "reason": p.reason}))
            .collect::<Vec<_>>()
    );
    object["output"] = json!(state.output);
    object["error"] = json!(state.error);
    object["usage"] = usage_json(state.usage());
    object["spending"] = json!(state.spending());
    object["budget"] = json!(state.budget_limits());
    object["budget_reached"] = json!(state.budget_reached());
    object["context"] = json!({
        "window_tokens": state.agent.context_window(),
        "compactions": state.compaction().compactions(),
        "stubbed_outputs": state.compaction().stubbed_outputs(),
        "dropped_messages": state.compaction().dropped_messages(),
    });
    if let Some((from, to)) = state.forked_from() {
        object["forked_from"] = json!({ "run": from, "step": to });
    }
    if as_json {
        println!("{}", escape_json(&object.to_string()));
        return Ok(0);
    }
    println!("run        {}", summary.id);
    if let Some((from, to)) = state.forked_from() {
        println!("forked     from step {to} of run {from}, which had ended");
    }
    println!(
        "agent      {} ({})",
        visible(&summary.agent),
        visible(&state.agent.model)
    );
    if resumable(&summary) {
        println!(
            "status     {} (nobody drives it: toren resume {run_id})",
            summary.status
        );
    } else {
        println!("status     {}", summary.status);
    }
    println!("created    {}", summary.created_at);
    println!("updated    {}", summary.updated_at);
    println!("turns      {}", state.turns);
    println!("usage      {}", usage_line(state.usage(), state.turns));
    println!("spent      {}", super::budget::spending_line(&state));
    if let Some(budget) = super::budget::budget_line(&state) {
        println!("budget     {budget}");
    }
    let compaction = state.compaction();
    if compaction.compactions() > 0 {
        println!(
            "context    {} to fit {} tokens: {} stubbed, {} left out",
            toren_display::count(compaction.compactions(), "compaction", "compactions"),
            toren_display::thousands(u64::from(state.agent.context_window())),
            toren_display::count(compaction.stubbed_outputs(), "tool output", "tool outputs"),
            toren_display::count(compaction.dropped_messages(), "message", "messages")
        );
    }
    println!("events     {}", summary.last_seq);
    match &state.policy {
        Some(p) => println!(
            "sandbox    {} network={} approval={} env=[{}]",
            visible(&p.backend),
            p.network_label(),
            p.approval,
            visible(&p.env.join(", "))
        ),
        None => println!("sandbox    none"),
    }
    if let Some(workspace) = &workspace {
        println!("workspace  {}", visible(workspace));
    }
    // The last instance's origin: reconnected by a resuming worker, or replacing a lost one.
    if let Some(sandbox) = &state.sandbox
        && let Some(origin) = &sandbox.origin
    {
        println!(
            "instance   {}",
            visible(&origin.describe(&sandbox.backend, &sandbox.instance))
        );
    }
    // A run is pinned to a workspace volume whether or not workers exist; the volume is
    // news only to someone who runs workers, so it is shown to them alone.
    let volumes_matter = workers_in_use(&service, &settings).await;
    if let Some(volume) = state.policy.as_ref().and_then(|p| p.volume.as_ref())
        && volumes_matter
    {
        println!("volume     {}", visible(volume));
    }
    if let Some(volume) = unserved.as_ref().filter(|_| volumes_matter) {
        println!(
            "waiting    for a worker of volume {}: no live worker serves it (see `toren \
             workers list`; a worker serves the volume TOREN_WORKSPACE_VOLUME names)",
            visible(volume)
        );
    }
    for p in &passed_over {
        println!(
            "waiting    passed over by worker {}, which cannot drive it: {}",
            visible(&p.worker),
            visible_lines(&p.reason)
        );
    }
    if let Some(p) = &pending {
        let call = one_line(p["call_id"].as_str().unwrap_or_default(), 80);
        println!("waiting    approval of call {call}:");
        print!(
            "{}",
            command_block(p["command"].as_str().unwrap_or_default())
        );
        println!(
            "           toren approve {run_id} {call} | toren deny {run_id} {call} --reason TEXT"
        );
    }
    if let Some(reached) = state.budget_reached() {
        println!(
            "waiting    a raise of its budget ({} reached): {}",
            super::budget::reached_words(reached),
            super::budget::raise_hint(&run_id, reached)
        );
    }
    for line in network::lines(&run_id, &state, &events) {
        println!("{line}");
    }
    if let Some(output) = &state.output {
        println!("output\n{}", visible_lines(output));
    }
    if let Some(error) = &state.error {
        println!("error      {}", visible_lines(error));
    }
    Ok(0)
}

/// Token usage as `--json` gives it: every count, zeros included.
pub(crate) fn usage_json(usage: Usage) -> serde_json::Value {
    json!({
        "input_tokens": usage.input_tokens,
        "output_tokens": usage.output_tokens,
        "cache_read_input_tokens": usage.cache_read_input_tokens,
        "cache_creation_input_tokens": usage.cache_creation_input_tokens,
    })
}

/// `12,345 input tokens (9,000 read from the cache), 678 output tokens in 12 model calls`.
pub(crate) fn usage_line(usage: Usage, calls: u32) -> String {
    let mut cache = Vec::new();
    if usage.cache_read_input_tokens > 0 {
        cache.push(format!(
            "{} read from the cache",
            toren_display::thousands(usage.cache_read_input_tokens)
        ));
    }
    if usage.cache_creation_input_tokens > 0 {
        cache.push(format!(
            "{} written to it",
            toren_display::thousands(usage.cache_creation_input_tokens)
        ));
    }
    let cache = if cache.is_empty() {
        String::new()
    } else {
        format!(" ({})", cache.join(", "))
    };
    format!(
        "{} input tokens{cache}, {} output tokens in {}",
        toren_display::thousands(usage.input_tokens),
        toren_display::thousands(usage.output_tokens),
        toren_display::count(calls, "model call", "model calls")
    )
}

/// `runs show` of a run whose log cannot be folded: its summary and why.
fn show_unreplayable(summary: &RunSummary, reason: &str, as_json: bool) -> Result<u8, Failure> {
    let shown = toren_display::visible(reason);
    if as_json {
        let mut object = summary_json(summary);
        object["error"] = json!(reason);
        println!("{}", toren_display::escape_json(&object.to_string()));
    } else {
        println!("run        {}", summary.id);
        println!("agent      {}", summary.agent);
        println!("status     {}", summary.status);
        println!("error      {shown}");
    }
    Ok(0)
}
