//! What comes next in a run, decided from its folded state alone: the model call and the
//! tools it is offered, which calls need a human and what the human is shown, the results
//! recorded without running anything (a denial, no tools, arguments that do not decode, a
//! call given up), the note on a re-run, and when a sandbox instance must be recorded. The
//! worker carries these out and decides nothing.

use toren_protocol::{
    ApprovalPolicy, ApprovalRequested, AssistantMessage, BashArgs, Message, OnInterrupt,
    ResolvedPolicy, RunCompleted, RunFailed, SandboxProvisioned, ToolCall, ToolStarted,
};

use crate::state::CallProgress;
use crate::{APPROVAL_TOOLS, Action, INTERRUPTED_NOTE, MAX_TOOL_ATTEMPTS, RunState};

impl RunState {
    /// What must happen next.
    pub fn next_action(&self) -> Action {
        if self.status.is_terminal() {
            return Action::Finished {
                status: self.status,
            };
        }
        if let Some(rewound) = &self.session_rewind {
            // Its restore is done before any action (`restore_due`); then it is over.
            return Action::Complete {
                event: RunCompleted {
                    output: crate::rewind::session_rewind_note(rewound),
                },
            };
        }
        if let Some(call) = self
            .pending
            .iter()
            .find(|c| self.result_of(&c.id).is_none())
        {
            return self.next_for_call(call);
        }
        match self.messages.last() {
            Some(Message::Assistant(AssistantMessage { text, tool_calls }))
                if tool_calls.is_empty() =>
            {
                Action::Complete {
                    event: RunCompleted {
                        output: text.clone(),
                    },
                }
            }
            _ if self.turns >= self.agent.max_turns => Action::Fail {
                event: RunFailed {
                    error: format!(
                        "the agent reached max_turns ({}) without a final answer; raise \
                         `max_turns` in the agent file if the task needs more steps",
                        self.agent.max_turns
                    ),
                },
            },
            // A budget reached stops the run before the call, never during one (`budget`).
            _ if let Some(action) = self.budget_step() => action,
            // The conversation as it fits the context window (`compact`).
            _ => self.model_call(),
        }
    }

    /// Whether a new call needs a human decision under the pinned policy
    /// (`approval: always` and a tool that runs commands).
    pub fn needs_approval(&self, call: &ToolCall) -> bool {
        self.policy
            .as_ref()
            .is_some_and(|p| p.approval == ApprovalPolicy::Always)
            && runs_commands(call)
    }

    /// Whether the run goes on and `call_id`, a call of the current turn, has no result yet:
    /// a result for it must be recorded.
    pub fn awaits_result(&self, call_id: &str) -> bool {
        !self.status.is_terminal()
            && self.pending.iter().any(|c| c.id == call_id)
            && self.result_of(call_id).is_none()
    }

    /// The `sandbox_provisioned` to record when the run's sandbox is `instance` of
    /// `backend` over `workspace`: the first one, and each new instance (a container made
    /// at the first command, or remade when it vanished). `None` when it is the recorded one.
    pub fn provisioned(
        &self,
        backend: &str,
        instance: String,
        workspace: String,
    ) -> Option<SandboxProvisioned> {
        if self
            .sandbox
            .as_ref()
            .is_some_and(|s| s.instance == instance && s.backend == backend)
        {
            return None;
        }
        Some(SandboxProvisioned {
            backend: backend.to_owned(),
            instance,
            workspace,
            envd_version: None,
            origin: None,
        })
    }

    fn next_for_call(&self, call: &ToolCall) -> Action {
        let progress = self.progress.get(&call.id).cloned().unwrap_or_default();
        let Some(policy) = &self.policy else {
            // No sandbox, no tools: the model must be told, not obeyed.
            return refuse(
                call,
                format!(
                    "Tool `{}` is not available: this agent has no tools.",
                    call.name
                ),
            );
        };
        if progress.attempts >= MAX_TOOL_ATTEMPTS {
            return refuse(
                call,
                format!(
                    "This call was started {} times and never completed: the process running \
                     it stopped each time before it could finish (a crash, a kill, or the host \
                     running out of memory). It was not run again. Try a different approach, \
                     for example smaller steps.",
                    progress.attempts
                ),
            );
        }
        let attempt = progress.attempts + 1;
        if let Some(action) = self.approval_step(call, policy, &progress, attempt) {
            return action;
        }
        Action::RunTool {
            call: call.clone(),
            attempt,
            started: ToolStarted {
                call_id: call.id.clone(),
                tool: call.name.clone(),
                attempt,
                checkpoint: None,
            },
            note: (attempt > 1).then_some(INTERRUPTED_NOTE),
        }
    }

    /// The approval step before `attempt` of `call` runs, if a human must decide: a new
    /// call under `approval: always`, or a call interrupted mid-command under
    /// `on_interrupt: ask`. `None`: it may run.
    fn approval_step(
        &self,
        call: &ToolCall,
        policy: &ResolvedPolicy,
        progress: &CallProgress,
        attempt: u32,
    ) -> Option<Action> {
        let asks = runs_commands(call)
            && if attempt == 1 {
                policy.approval == ApprovalPolicy::Always
            } else {
                policy.on_interrupt == OnInterrupt::Ask
            };
        if !asks {
            return None;
        }
        // What the human approves is decoded by the same code as the tool will use
        // (I-11); a call that does not decode would run nothing, so it is answered with
        // the error without asking anyone.
        let command = match BashArgs::decode(&call.arguments) {
            Ok(args) => args.command,
            Err(error) => return Some(refuse(call, error)),
        };
        let request = ApprovalRequested {
            call_id: call.id.clone(),
            tool: call.name.clone(),
            command,
            attempt,
        };
        let Some(approval) = progress.approval_for(attempt) else {
            return Some(Action::RequestApproval {
                call: call.clone(),
                request,
            });
        };
        match &approval.decision {
            None => Some(Action::AwaitApproval {
                call: call.clone(),
                request: ApprovalRequested {
                    command: approval.command.clone(),
                    ..request
                },
            }),
            Some((false, reason)) => Some(Action::RecordDenial {
                call: call.clone(),
                result: Action::completed(
                    &call.id,
                    None,
                    denial(reason.as_deref(), attempt > 1),
                    true,
                    None,
                    false,
                ),
            }),
            Some((true, _)) => None,
        }
    }
}

/// Whether the call runs commands, and so may need a human's approval (`bash`; file tools
/// never ask, I-9).
fn runs_commands(call: &ToolCall) -> bool {
    APPROVAL_TOOLS.contains(&call.name.as_str())
}

fn refuse(call: &ToolCall, output: String) -> Action {
    Action::Refuse {
        call: call.clone(),
        result: Action::completed(&call.id, None, output, true, None, false),
    }
}

/// What the model is told of a denial. The person's reason is a sentence of its own: it
/// gets a full stop when it ends without one; a blank reason is no reason.
fn denial(reason: Option<&str>, interrupted: bool) -> String {
    let what = if interrupted {
        "This command was interrupted mid-execution by a restart, so it may already have had \
         some of its effects; the human chose not to run it again."
    } else {
        "The human denied this command; it did not run."
    };
    match reason.map(str::trim).filter(|reason| !reason.is_empty()) {
        Some(reason) => format!(
            "{what} Their reason: {}\nAdjust your approach.",
            sentence(reason)
        ),
        None => format!("{what} Adjust your approach or ask what they want."),
    }
}

/// `text` ending as a sentence does: as is when its last character (before closing quotes
/// and brackets) is `.`, `!`, `?` or `…`, else with a full stop.
fn sentence(text: &str) -> String {
    let last = text
        .trim_end_matches(['"', '\'', ')', ']', '\u{201d}', '\u{2019}'])
        .chars()
        .last();
    if matches!(last, Some('.' | '!' | '?' | '\u{2026}')) {
        text.to_owned()
    } else {
        format!("{text}.")
    }
}

#[cfg(test)]
#[path = "decide_tests.rs"]
mod tests;
