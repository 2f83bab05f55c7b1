//! Everything `toren` says to people, on stderr: run progress, streamed model text,
//! approval prompts, and one-line summaries of events. Data for scripts goes to stdout
//! in the commands themselves.
#![expect(
    clippy::print_stderr,
    reason = "this module is the human-facing output"
)]

use std::collections::HashMap;
use std::io::{BufRead, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use tokio::sync::mpsc;
use toren_agent::{Action, RunState};
use toren_protocol::{AgentSpec, Event, EventKind, RunId};
use toren_worker::{Approver, Decision, Observer};

pub(crate) fn announce_run(run_id: &RunId, agent: &AgentSpec, sandbox: &str) {
    eprintln!(
        "run {run_id} (agent {}, model {}, sandbox {sandbox})",
        agent.name, agent.model
    );
}

pub(crate) fn interrupted(run_id: &RunId) {
    eprintln!(
        "\ninterrupted: run {run_id} stopped where it was and can be resumed:\n  toren resume {run_id}"
    );
}

pub(crate) fn forced_exit() {
    eprintln!("\nstopped at once; the run can still be resumed with `toren resume`");
}

pub(crate) fn already_ended(state: &RunState) {
    eprintln!(
        "run {} has already {}; there is nothing to resume",
        state.run_id, state.status
    );
    if let Some(error) = &state.error {
        eprintln!("it failed: {error}");
    }
}

/// Tells what a resumed run replays from its log and what it will do again.
pub(crate) fn resuming(state: &RunState, events: &[Event]) {
    let completed = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ToolCompleted(_)))
        .count();
    eprintln!(
        "resuming run {} (agent {}, model {}; spec and policy as pinned at creation)",
        state.run_id, state.agent.name, state.agent.model
    );
    eprintln!(
        "  replayed from the log: {} event(s), {} model answer(s), {completed} completed tool call(s); none is repeated",
        events.len(),
        state.turns
    );
    match state.next_action() {
        Action::RunTool { call, attempt } if attempt > 1 => eprintln!(
            "  re-running {} call {} (started but never completed; attempt {attempt}): its side effects may happen twice",
            call.name, call.id
        ),
        Action::AwaitApproval { call, .. } => {
            eprintln!("  call {} still waits for approval", call.id);
        }
        Action::RecordDenial { call, .. } => {
            eprintln!("  call {} was denied; telling the model", call.id);
        }
        Action::Refuse { call, .. } => {
            eprintln!(
                "  {} call {} will not run (it cannot, or it never completed in {} attempts); telling the model",
                call.name,
                call.id,
                toren_agent::MAX_TOOL_ATTEMPTS
            );
        }
        Action::RunTool { call, .. } => eprintln!("  next: {} call {}", call.name, call.id),
        Action::RequestApproval { call, .. } => {
            eprintln!("  next: approval of {} call {}", call.name, call.id);
        }
        Action::CallModel => eprintln!("  next: a model call"),
        Action::Complete { .. } | Action::Fail { .. } | Action::Finished { .. } => {}
    }
}

pub(crate) fn failed(run_id: &RunId, error: &str) {
    eprintln!("run {run_id} failed: {error}");
}

/// A one-line human summary of an event (used by `toren events` and the live progress).
pub(crate) fn describe(event: &Event) -> String {
    match &event.kind {
        EventKind::RunCreated(c) => format!(
            "agent {} ({}), sandbox {}, input: {}",
            c.agent.name,
            c.agent.model,
            c.policy.as_ref().map_or_else(
                || "none".to_owned(),
                |p| format!(
                    "{} network={} approval={} env=[{}]",
                    p.backend,
                    p.network,
                    p.approval,
                    p.env.join(",")
                )
            ),
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
                "{} tokens in/{} out, {} tool call(s) [{}]: {}",
                m.usage.input_tokens,
                m.usage.output_tokens,
                calls.len(),
                calls.join(", "),
                one_line(&m.message.text, 100)
            )
        }
        EventKind::ApprovalRequested(a) => {
            format!("{} {}: $ {}", a.tool, a.call_id, one_line(&a.command, 120))
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
        EventKind::SandboxProvisioned(s) => {
            format!("{} {} workspace {}", s.backend, s.instance, s.workspace)
        }
        EventKind::RunCompleted(c) => one_line(&c.output, 120),
        EventKind::RunFailed(f) => f.error.clone(),
        EventKind::RunCancelled(c) => c.reason.clone(),
    }
}

fn one_line(text: &str, max: usize) -> String {
    let flat: String = text.split_whitespace().collect::<Vec<_>>().join(" ");
    if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    }
}

/// Shows a run's progress on stderr as it is driven.
pub(crate) struct StderrObserver {
    /// Whether streamed text left the cursor mid-line.
    mid_line: AtomicBool,
    /// Tool calls by id, to show what a started call does.
    calls: Mutex<HashMap<String, String>>,
}

impl StderrObserver {
    pub(crate) fn new() -> Self {
        Self {
            mid_line: AtomicBool::new(false),
            calls: Mutex::new(HashMap::new()),
        }
    }

    /// Ends a line of streamed text, if one is open.
    pub(crate) fn finish_line(&self) {
        if self.mid_line.swap(false, Ordering::Relaxed) {
            eprintln!();
        }
    }
}

impl Observer for StderrObserver {
    fn text(&self, delta: &str) {
        eprint!("{delta}");
        let _ = std::io::stderr().flush();
        self.mid_line
            .store(!delta.ends_with('\n'), Ordering::Relaxed);
    }

    fn event(&self, event: &Event) {
        self.finish_line();
        match &event.kind {
            EventKind::ModelResponded(m) => {
                if let Ok(mut calls) = self.calls.lock() {
                    for c in &m.message.tool_calls {
                        let shown = match c.arguments.get("command").and_then(|v| v.as_str()) {
                            Some(cmd) => format!("$ {}", one_line(cmd, 160)),
                            None => c
                                .arguments
                                .get("path")
                                .and_then(|v| v.as_str())
                                .unwrap_or("")
                                .to_owned(),
                        };
                        calls.insert(c.id.clone(), format!("{} {shown}", c.name));
                    }
                }
            }
            EventKind::ToolStarted(t) => {
                let what = self
                    .calls
                    .lock()
                    .ok()
                    .and_then(|c| c.get(&t.call_id).cloned())
                    .unwrap_or_else(|| t.tool.clone());
                let again = if t.attempt > 1 {
                    " (re-run after interruption)"
                } else {
                    ""
                };
                eprintln!("» {what}{again}");
            }
            EventKind::ToolCompleted(t) => {
                let mark = if t.is_error { "✗" } else { "✓" };
                eprintln!("  {mark} {}", one_line(&t.output, 160));
            }
            EventKind::SandboxProvisioned(s) => {
                eprintln!("sandbox: {} workspace {}", s.backend, s.workspace)
            }
            EventKind::ApprovalDecided(d) if d.via != "terminal" => {
                eprintln!(
                    "  {} by {} via {}",
                    if d.approved { "approved" } else { "denied" },
                    d.by,
                    d.via
                );
            }
            _ => {}
        }
    }

    fn awaiting_approval(&self, run: &RunId, call_id: &str, command: &str) {
        self.finish_line();
        eprintln!(
            "run {run} is waiting for approval of a bash command (call {call_id}):\n    $ {command}\n  approve: toren approve {run} {call_id}\n  deny:    toren deny {run} {call_id} --reason \"...\""
        );
    }
}

/// Asks on the terminal: shows the command and reads the answer from stdin.
pub(crate) struct TerminalApprover {
    lines: tokio::sync::Mutex<mpsc::UnboundedReceiver<String>>,
    by: String,
}

impl TerminalApprover {
    /// Starts the one thread that reads stdin for the whole process.
    pub(crate) fn new() -> Self {
        let (tx, rx) = mpsc::unbounded_channel();
        std::thread::Builder::new()
            .name("stdin-reader".into())
            .spawn(move || {
                for line in std::io::stdin().lock().lines() {
                    let Ok(line) = line else { break };
                    if tx.send(line).is_err() {
                        break;
                    }
                }
            })
            .ok();
        Self {
            lines: tokio::sync::Mutex::new(rx),
            by: std::env::var("USER").unwrap_or_else(|_| "unknown".to_owned()),
        }
    }
}

#[async_trait]
impl Approver for TerminalApprover {
    async fn ask(&self, run: &RunId, call_id: &str, command: &str) -> Option<Decision> {
        let mut lines = self.lines.lock().await;
        eprintln!("\nbash wants to run (call {call_id}):\n    $ {command}");
        eprintln!("  (or answer from another terminal: toren approve|deny {run} {call_id})");
        loop {
            eprint!("approve? [y]es / [n]o: ");
            let _ = std::io::stderr().flush();
            let answer = lines.recv().await?;
            match answer.trim().to_lowercase().as_str() {
                "y" | "yes" => {
                    return Some(Decision {
                        approved: true,
                        reason: None,
                        by: self.by.clone(),
                        via: "terminal".into(),
                    });
                }
                "n" | "no" => {
                    eprint!("reason for the model (optional): ");
                    let _ = std::io::stderr().flush();
                    let reason = lines
                        .recv()
                        .await
                        .map(|r| r.trim().to_owned())
                        .filter(|r| !r.is_empty());
                    return Some(Decision {
                        approved: false,
                        reason,
                        by: self.by.clone(),
                        via: "terminal".into(),
                    });
                }
                _ => eprintln!("please answer y or n"),
            }
        }
    }
}
