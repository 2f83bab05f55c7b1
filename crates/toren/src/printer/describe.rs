//! One-line human summaries of events, for `toren events` and the live progress: every
//! field that came from a model, a sandbox or a provider is rendered with `toren-display`
//! (shown, never obeyed).

use toren_display::visible;
use toren_protocol::{Event, EventKind};

use super::{command_line, one_line};

/// A one-line human summary of an event (used by `toren events` and the live progress),
/// with everything that came from the model or the sandbox shown, never obeyed.
pub(crate) fn describe(event: &Event) -> String {
    let line = match &event.kind {
        EventKind::RunCreated(c)
            if let Some(r) = c.start.as_ref().and_then(|s| s.rewound.as_ref()) =>
        {
            format!(
                "agent {} ({}): rewind of the session to {} (workspace: {}){}",
                c.agent.name,
                c.agent.model,
                match r.turn {
                    Some(turn) if r.to == 0 => format!("before turn {turn}"),
                    Some(turn) => format!("step {turn}.{}", r.to),
                    None => format!("step {}", r.to),
                },
                r.checkpoint
                    .as_deref()
                    .map_or_else(|| "unchanged".to_owned(), |id| format!("checkpoint {id}")),
                r.by.as_deref()
                    .map(|by| format!(", by {}", visible(by)))
                    .unwrap_or_default()
            )
        }
        EventKind::RunCreated(c)
            if let Some(f) = c.start.as_ref().and_then(|s| s.forked.as_ref()) =>
        {
            format!(
                "agent {} ({}): goes on from step {} of run {}, which had ended (workspace: {}){}",
                c.agent.name,
                c.agent.model,
                f.to,
                f.from,
                f.checkpoint
                    .as_deref()
                    .map_or_else(|| "none".to_owned(), |id| format!("checkpoint {id}")),
                f.by.as_deref()
                    .map(|by| format!(", by {}", visible(by)))
                    .unwrap_or_default()
            )
        }
        EventKind::RunCreated(c) => format!(
            "agent {} ({}), sandbox {}{}, input: {}",
            c.agent.name,
            c.agent.model,
            c.policy.as_ref().map_or_else(
                || "none".to_owned(),
                |p| format!(
                    "{} network={} approval={} env=[{}]",
                    p.backend,
                    p.network_label(),
                    p.approval,
                    p.env.join(",")
                )
            ),
            c.start
                .as_ref()
                .and_then(|s| s.checkpoint.as_deref())
                .map(|id| format!(", checkpoint {id}"))
                .or_else(|| c
                    .start
                    .as_ref()
                    .and_then(|s| s.seeded.as_ref())
                    .map(|seed| {
                        format!(
                            ", workspace from {} ({}, {} bytes; checkpoint {})",
                            visible(&seed.from),
                            toren_display::count(seed.files, "file", "files"),
                            seed.bytes,
                            seed.checkpoint
                        )
                    }))
                .unwrap_or_default(),
            one_line(&c.input, 120)
        ),
        EventKind::ModelResponded(m) => {
            let calls: Vec<String> = m
                .message
                .tool_calls
                .iter()
                .map(|c| format!("{} {}", c.name, c.id))
                .collect();
            format!(
                "{} tokens in/{} out, {} [{}]: {}",
                m.usage.input_tokens,
                m.usage.output_tokens,
                toren_display::count(calls.len(), "tool call", "tool calls"),
                calls.join(", "),
                one_line(&m.message.text, 100)
            )
        }
        EventKind::ApprovalRequested(a) => {
            format!(
                "{} {}: $ {}",
                a.tool,
                a.call_id,
                command_line(&a.command, 120)
            )
        }
        EventKind::ApprovalDecided(d) => format!(
            "{} {} by {} via {}{}",
            if d.approved { "approved" } else { "denied" },
            d.call_id,
            d.by,
            d.via,
            d.reason
                .as_ref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default()
        ),
        EventKind::ToolStarted(t) => format!("{} {} (attempt {})", t.tool, t.call_id, t.attempt),
        EventKind::ToolCompleted(t) => format!(
            "{}{}{}{}: {}",
            t.call_id,
            if t.is_error { " error" } else { "" },
            t.exit_code
                .map(|c| format!(" exit {c}"))
                .unwrap_or_default(),
            if t.truncated { " (truncated)" } else { "" },
            one_line(&t.output, 100)
        ),
        EventKind::SandboxProvisioned(s) => match &s.origin {
            Some(origin) => format!(
                "{} {} workspace {}: {}",
                s.backend,
                s.instance,
                s.workspace,
                origin.describe(&s.backend, &s.instance)
            ),
            None => format!("{} {} workspace {}", s.backend, s.instance, s.workspace),
        },
        EventKind::RunCompleted(c) => one_line(&c.output, 120),
        EventKind::RunFailed(f) => f.error.clone(),
        EventKind::RunCancelled(c) => c.reason.clone(),
        EventKind::ContextCompacted(c) => compacted(c),
        EventKind::BudgetReached(r) => format!(
            "{} reached: spent {} tokens{}, {} s active",
            r.reached
                .iter()
                .map(ToString::to_string)
                .collect::<Vec<_>>()
                .join(" and "),
            r.spent.tokens,
            r.spent.usd.map(|u| format!(", {u}")).unwrap_or_default(),
            r.spent.wall_secs
        ),
        EventKind::HostApprovalRequested(h) => format!(
            "{}: {} (approve: toren approve {} {})",
            h.id,
            one_line(&h.summary(), 160),
            event.run_id,
            h.id
        ),
        EventKind::EgressConnections(c) => c
            .connections
            .iter()
            .map(|c| one_line(&c.summary(), 160))
            .collect::<Vec<_>>()
            .join("; "),
        EventKind::BudgetRaised(r) => {
            let mut added = Vec::new();
            if r.tokens > 0 {
                added.push(format!("{} tokens", r.tokens));
            }
            if r.usd.0 > 0 {
                added.push(r.usd.to_string());
            }
            if r.wall_secs > 0 {
                added.push(format!("{} s", r.wall_secs));
            }
            format!("+{} by {} via {}", added.join(", +"), r.by, r.via)
        }
        EventKind::Rewound(r) => format!(
            "back to step {}{}{}",
            r.to,
            r.checkpoint
                .as_ref()
                .map(|c| format!(", workspace restored to checkpoint {c}"))
                .unwrap_or_else(|| ", workspace unchanged since then".to_owned()),
            r.by.as_ref()
                .map(|b| format!(" (by {b})"))
                .unwrap_or_default()
        ),
        EventKind::MessageDelivered(d) => format!(
            "{} {} via {}: {} ({} bytes, {}{}) -> {}",
            d.call_id,
            if d.repeated {
                "already delivered"
            } else {
                "delivered"
            },
            d.channel,
            d.path,
            d.bytes,
            d.kind,
            d.caption
                .as_ref()
                .map(|c| format!(", caption: {}", one_line(c, 60)))
                .unwrap_or_default(),
            d.receipt
        ),
    };
    // One line whatever the fields hold: a newline in any of them is shown, not obeyed.
    visible(&line).into_owned()
}

/// What a `context_compacted` did, and why when a provider refused a request.
fn compacted(c: &toren_protocol::ContextCompacted) -> String {
    let left_out: u64 = c
        .dropped
        .iter()
        .map(|r| r.end.saturating_sub(r.start))
        .sum();
    let mut line = format!(
        "{} stubbed, {} left out to fit the context window of {} tokens (estimate {} -> {})",
        toren_display::count(c.stubbed.len(), "tool output", "tool outputs"),
        toren_display::count(left_out, "message", "messages"),
        c.context_tokens,
        c.estimated_before,
        c.estimated_after
    );
    if let Some(refused) = &c.refused {
        line.push_str("; the provider refused the request: ");
        line.push_str(&one_line(&refused.message, 160));
    }
    line
}
