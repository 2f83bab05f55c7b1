//! Everything `toren` says to people, on stderr: run progress, streamed model text,
//! approval prompts, one-line summaries of events, and the log lines of `TOREN_LOG`. Data
//! for scripts goes to stdout in the commands themselves.
//!
//! Every message goes out through [`say!`] (or [`log::LogWriter`]), which renders it with
//! `toren-display`: whatever a model, a sandbox or a provider put into it — a command, a
//! path, a tool's output, the model's text, an error — is shown, never obeyed (no escape
//! sequence, control, bidirectional or invisible character reaches the terminal raw).
//! Fields that must stay on one line are rendered with [`visible`] first, which marks
//! newlines too. The approval prompt lives in [`prompt`].

mod describe;
mod log;
mod prompt;

use std::borrow::Cow;
use std::collections::HashMap;
use std::io::{IsTerminal, Write};
use std::sync::Mutex;
use std::sync::atomic::{AtomicBool, Ordering};

use toren_agent::{Action, RunState};
use toren_display::{findings, hidden_count, visible, visible_lines};
use toren_protocol::{
    AgentSpec, ApprovalRequested, BASH, BashArgs, Event, EventKind, RunId, RunStatus, decode_args,
};
use toren_worker::Observer;

pub(crate) use describe::describe;
pub(crate) use log::LogWriter;
pub(crate) use prompt::TerminalApprover;

/// `eprintln!` for people: the whole message rendered so that nothing in it can drive
/// the terminal (newlines and tabs pass, every other control is shown as a marker).
macro_rules! say {
    ($($arg:tt)*) => {
        eprintln!("{}", toren_display::visible_lines(&format!($($arg)*)))
    };
}
pub(crate) use say;

pub(crate) fn announce_run(run_id: &RunId, agent: &AgentSpec, sandbox: &str) {
    say!(
        "run {run_id} (agent {}, model {}, sandbox {})",
        visible(&agent.name),
        visible(&agent.model),
        visible(sandbox)
    );
}

pub(crate) fn interrupted(run_id: &RunId) {
    say!(
        "\ninterrupted: run {run_id} stopped where it was and can be resumed:\n  toren resume {run_id}"
    );
}

pub(crate) fn forced_exit() {
    say!("\nstopped at once; the run can still be resumed with `toren resume`");
}

pub(crate) fn already_ended(state: &RunState) {
    say!(
        "run {} has already ended ({}); there is nothing to resume",
        state.run_id,
        state.status
    );
    match (&state.error, state.status) {
        (Some(why), RunStatus::Cancelled) => say!("it was {why}"),
        (Some(error), _) => say!("it failed: {error}"),
        (None, _) => {}
    }
}

/// Tells what a resumed run replays from its log and what it will do again.
pub(crate) fn resuming(state: &RunState, events: &[Event]) {
    let completed = events
        .iter()
        .filter(|e| matches!(e.kind, EventKind::ToolCompleted(_)))
        .count();
    say!(
        "resuming run {} (agent {}, model {}; spec and policy as pinned at creation)",
        state.run_id,
        visible(&state.agent.name),
        visible(&state.agent.model)
    );
    say!(
        "  replayed from the log: {}, {}, {}; none is repeated",
        toren_display::count(events.len(), "event", "events"),
        toren_display::count(state.turns, "model answer", "model answers"),
        toren_display::count(completed, "completed tool call", "completed tool calls")
    );
    match state.next_action() {
        Action::RunTool { call, attempt, .. } if attempt > 1 => say!(
            "  re-running {} call {} (started but never completed; attempt {attempt}): its side effects may happen twice",
            visible(&call.name),
            visible(&call.id)
        ),
        Action::AwaitApproval { call, .. } => {
            say!("  call {} still waits for approval", visible(&call.id));
        }
        Action::RecordDenial { call, .. } => {
            say!("  call {} was denied; telling the model", visible(&call.id));
        }
        Action::Refuse { call, .. } => {
            say!(
                "  {} call {} will not run (it cannot, or it never completed in {} attempts); telling the model",
                visible(&call.name),
                visible(&call.id),
                toren_agent::MAX_TOOL_ATTEMPTS
            );
        }
        Action::RunTool { call, .. } => {
            say!("  next: {} call {}", visible(&call.name), visible(&call.id))
        }
        Action::RequestApproval { call, request } if request.attempt > 1 => {
            say!(
                "  next: {} call {} was interrupted mid-execution; it asks for approval before it runs again",
                visible(&call.name),
                visible(&call.id)
            );
        }
        Action::RequestApproval { call, .. } => {
            say!(
                "  next: approval of {} call {}",
                visible(&call.name),
                visible(&call.id)
            );
        }
        Action::CallModel { .. } => say!("  next: a model call"),
        Action::ReachBudget { event } => say!(
            "  its budget is reached ({}): it pauses before the next model call",
            crate::commands::budget::reached_words(&event)
        ),
        Action::AwaitBudget { reached } => say!(
            "  it is paused at its budget ({}) until it is raised: {}",
            crate::commands::budget::reached_words(&reached),
            crate::commands::budget::raise_hint(&state.run_id, &reached)
        ),
        Action::Compact { .. } => {
            say!(
                "  next: old parts of the conversation are compacted to fit the context window, then a model call"
            );
        }
        Action::Complete { .. } | Action::Fail { .. } | Action::Finished { .. } => {}
    }
}

/// Streamed model text of a followed run, rendered (nothing in it is obeyed).
pub(crate) fn stream(text: &str) {
    eprint!("{}", visible_lines(text));
    let _ = std::io::stderr().flush();
}

/// Ends a line of streamed text before the next event is shown.
pub(crate) fn end_stream() {
    eprintln!();
}

pub(crate) fn cancelled(run_id: &RunId, why: &str) {
    say!("run {run_id} was {why}; it cannot be resumed");
}

pub(crate) fn failed(run_id: &RunId, error: &str) {
    say!("run {run_id} failed: {error}");
}

/// The run's final answer as `toren run` prints it on stdout: on a terminal, rendered like
/// everything else a person reads; into a pipe or a file, exactly the model's answer (it
/// is the command's data; `--json` output is escaped instead).
pub(crate) fn answer(output: &str) -> Cow<'_, str> {
    if std::io::stdout().is_terminal() {
        visible_lines(output)
    } else {
        Cow::Borrowed(output)
    }
}

/// `text` on one line: runs of spaces, tabs and newlines become one space, at most `max`
/// characters are kept, and every other control or invisible character is shown.
pub(crate) fn one_line(text: &str, max: usize) -> String {
    let words: Vec<&str> = text
        .split([' ', '\t', '\n'])
        .filter(|w| !w.is_empty())
        .collect();
    let flat = words.join(" ");
    let shown = if flat.chars().count() > max {
        format!("{}…", flat.chars().take(max).collect::<String>())
    } else {
        flat
    };
    visible(&shown).into_owned()
}

/// A command on one line, as progress lines and event summaries show it: nothing
/// collapsed, newlines and tabs marked like every other control (`⟨LF⟩`), at most `max`
/// characters of it, and a warning if it holds hidden or control characters.
pub(crate) fn command_line(command: &str, max: usize) -> String {
    let mut shown = if command.chars().count() > max {
        format!("{}…", command.chars().take(max).collect::<String>())
    } else {
        command.to_owned()
    };
    shown = visible(&shown).into_owned();
    if let n @ 1.. = hidden_count(command) {
        let n = toren_display::count(
            n,
            "hidden or control character",
            "hidden or control characters",
        );
        shown.push_str(&format!("  [⚠ {n}]"));
    }
    shown
}

/// A command as a person must read it before deciding: each of its lines on a line of its
/// own under `$`/`>`, every hidden character shown as a marker, and a warning naming them.
pub(crate) fn command_block(command: &str) -> String {
    let mut block = String::new();
    let lines: Vec<&str> = command.split('\n').collect();
    for (i, line) in lines.iter().enumerate() {
        block.push_str(if i == 0 { "    $ " } else { "    > " });
        block.push_str(&visible_lines(line));
        block.push('\n');
    }
    if lines.len() > 1 {
        block.push_str(&format!(
            "    (the command has {} lines, each shown after $ or >)\n",
            lines.len()
        ));
    }
    let hidden = hidden_count(command);
    if hidden > 0 {
        block.push_str(&format!(
            "  ⚠ this command contains {hidden} hidden or control character{} ({}), shown as ⟨…⟩: read it with care\n",
            if hidden == 1 { "" } else { "s" },
            findings(command).join(" ")
        ));
    }
    block
}

/// The `path` of a file tool's arguments, for progress lines.
#[derive(serde::Deserialize)]
struct PathArg {
    path: String,
}

/// Shows a run's progress on stderr as it is driven.
pub(crate) struct StderrObserver {
    /// Whether streamed text left the cursor mid-line.
    mid_line: AtomicBool,
    /// Tool calls by id, to show what a started call does.
    calls: Mutex<HashMap<String, String>>,
    /// In a chat the model's text is the conversation: it goes to stdout.
    text_to_stdout: bool,
    /// The text streamed for the model response under way, and for the last one answered:
    /// the final answer is often both, and a terminal needs it once.
    streaming: Mutex<String>,
    last_streamed: Mutex<String>,
    /// Whether the run's first line already named its sandbox backend
    /// ([`StderrObserver::backend_named`]), so that the sandbox's line names only the
    /// workspace.
    backend_named: AtomicBool,
}

impl StderrObserver {
    pub(crate) fn new() -> Self {
        Self {
            mid_line: AtomicBool::new(false),
            calls: Mutex::new(HashMap::new()),
            text_to_stdout: false,
            streaming: Mutex::new(String::new()),
            last_streamed: Mutex::new(String::new()),
            backend_named: AtomicBool::new(false),
        }
    }

    /// Says that the line announcing the run named its sandbox backend.
    pub(crate) fn backend_named(&self) {
        self.backend_named.store(true, Ordering::Relaxed);
    }

    /// Whether `answer` is already on the person's screen: stdout and stderr are both a
    /// terminal and the last model response streamed exactly it to stderr. Printing it on
    /// stdout again would show it twice; into a pipe or a file it is always printed (it is
    /// the command's data).
    pub(crate) fn showed_answer(&self, answer: &str) -> bool {
        if self.text_to_stdout
            || answer.trim().is_empty()
            || !std::io::stdout().is_terminal()
            || !std::io::stderr().is_terminal()
        {
            return false;
        }
        self.last_streamed
            .lock()
            .is_ok_and(|streamed| streamed.trim_end() == answer.trim_end())
    }

    /// For `toren chat`: the model's text on stdout, progress on stderr.
    pub(crate) fn for_chat() -> Self {
        Self {
            text_to_stdout: true,
            ..Self::new()
        }
    }

    /// Ends a line of streamed text, if one is open.
    pub(crate) fn finish_line(&self) {
        if self.mid_line.swap(false, Ordering::Relaxed) {
            if self.text_to_stdout {
                println!();
            } else {
                eprintln!();
            }
        }
    }
}

impl Observer for StderrObserver {
    fn text(&self, _run: &RunId, delta: &str) {
        // Rendered character by character, so a sequence split across deltas is caught too.
        if self.text_to_stdout {
            print!("{}", visible_lines(delta));
            crate::out::flush_stdout();
        } else {
            eprint!("{}", visible_lines(delta));
            let _ = std::io::stderr().flush();
        }
        self.mid_line
            .store(!delta.ends_with('\n'), Ordering::Relaxed);
        if let Ok(mut streaming) = self.streaming.lock() {
            streaming.push_str(delta);
        }
    }

    fn event(&self, event: &Event) {
        self.finish_line();
        match &event.kind {
            EventKind::ModelResponded(m) => {
                if let (Ok(mut streaming), Ok(mut last)) =
                    (self.streaming.lock(), self.last_streamed.lock())
                {
                    *last = std::mem::take(&mut *streaming);
                }
                if let Ok(mut calls) = self.calls.lock() {
                    for c in &m.message.tool_calls {
                        // Decoded as the tools decode them (toren-protocol's decoder).
                        let shown = match BashArgs::decode(&c.arguments) {
                            Ok(args) if c.name == BASH => {
                                format!("$ {}", command_line(&args.command, 160))
                            }
                            _ => one_line(
                                &decode_args::<PathArg>(&c.name, "", &c.arguments)
                                    .map(|a| a.path)
                                    .unwrap_or_default(),
                                160,
                            ),
                        };
                        calls.insert(c.id.clone(), format!("{} {shown}", visible(&c.name)));
                    }
                }
            }
            EventKind::ToolStarted(t) => {
                let what = self
                    .calls
                    .lock()
                    .ok()
                    .and_then(|c| c.get(&t.call_id).cloned())
                    .unwrap_or_else(|| visible(&t.tool).into_owned());
                let again = if t.attempt > 1 {
                    " (re-run after interruption)"
                } else {
                    ""
                };
                say!("» {what}{again}");
            }
            EventKind::ToolCompleted(t) => {
                let mark = if t.is_error { "✗" } else { "✓" };
                // Long output folded to one line, with how many it had (the exit code is
                // in the output's status line).
                let lines = t.output.lines().count();
                let folded = if lines > 2 {
                    format!("  [{lines} lines]")
                } else {
                    String::new()
                };
                say!("  {mark} {}{folded}", one_line(&t.output, 160));
            }
            EventKind::SandboxProvisioned(s) => match &s.origin {
                // A resuming worker's reconnection, or a lost workspace: said as it is.
                Some(origin) => say!(
                    "sandbox: {}",
                    visible(&origin.describe(&s.backend, &s.instance))
                ),
                // The backend is on the run's first line already when `toren run` started it.
                None if self.backend_named.load(Ordering::Relaxed) => {
                    say!("workspace {}", visible(&s.workspace));
                }
                None => say!(
                    "sandbox: {} workspace {}",
                    visible(&s.backend),
                    visible(&s.workspace)
                ),
            },
            EventKind::ApprovalDecided(d) if d.via != "terminal" => {
                say!(
                    "  {} by {} via {}",
                    if d.approved { "approved" } else { "denied" },
                    visible(&d.by),
                    visible(&d.via)
                );
            }
            _ => {}
        }
    }

    fn awaiting_approval(&self, run: &RunId, request: &ApprovalRequested) {
        self.finish_line();
        let call = visible(&request.call_id);
        let what = if request.attempt > 1 {
            "a bash command interrupted mid-execution (it may already have had some of its effects) to run again"
        } else {
            "a bash command"
        };
        say!(
            "run {run} is waiting for approval of {what} (call {call}):\n{}  approve: toren approve {run} {call}\n  deny:    toren deny {run} {call} --reason \"...\"",
            command_block(&request.command)
        );
    }

    fn awaiting_host_approval(&self, run: &RunId, request: &toren_protocol::HostApprovalRequested) {
        self.finish_line();
        let id = visible(&request.id);
        say!(
            "run {run} is holding a connection until a person decides on {}\n  allow the host for this run: toren approve {run} {id}\n  deny it:                     toren deny {run} {id}",
            visible(&request.summary())
        );
    }

    fn awaiting_budget(&self, run: &RunId, reached: &toren_protocol::BudgetReached) {
        self.finish_line();
        say!(
            "run {run} paused: its budget is reached ({}); raise it to go on:\n  {}",
            crate::commands::budget::reached_words(reached),
            crate::commands::budget::raise_hint(run, reached)
        );
    }
}

#[cfg(test)]
mod tests {
    use pretty_assertions::assert_eq;

    use super::*;

    #[test]
    fn a_command_block_shows_every_line_and_flags_hidden_characters() {
        assert_eq!(
            command_block("cd /tmp\nrm -rf x\u{202e} #\r"),
            "    $ cd /tmp\n    > rm -rf x⟨U+202E⟩ #⟨CR⟩\n    (the command has 2 lines, each shown after $ or >)\n  ⚠ this command contains 2 hidden or control characters (⟨U+202E⟩ ⟨CR⟩), shown as ⟨…⟩: read it with care\n"
        );
        assert_eq!(command_block("ls -la"), "    $ ls -la\n");
    }

    #[test]
    fn one_line_forms_mark_newlines_and_controls() {
        assert_eq!(
            command_line("echo a\necho b\u{1b}[2K", 160),
            "echo a⟨LF⟩echo b⟨ESC⟩[2K  [⚠ 1 hidden or control character]"
        );
        assert_eq!(one_line("a \n\t b\r\u{85}", 160), "a b⟨CR⟩⟨U+0085⟩");
    }
}
