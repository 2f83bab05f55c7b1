//! The approval prompt on the terminal: shows the command (rendered by
//! [`super::command_block`]) and takes only an answer typed after the question appeared.
//!
//! Keys typed while no question is shown — while a command runs, or before the prompt was
//! drawn — never answer one: nothing reads the terminal between questions, so they wait
//! in the kernel's input queue, and each question discards that queue (`tcflush`) after
//! the command is on screen and before it asks. One thread reads the terminal, only while
//! a question waits for its answer; a question dropped unanswered (decided from another
//! terminal) wakes it through a pipe, so it never takes keys meant for a later question.
//! Asked only when a person can see and answer it: stdin and stderr are both terminals.

use std::io::{IsTerminal, PipeReader, PipeWriter, Write};
use std::os::fd::{AsFd, OwnedFd};
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use async_trait::async_trait;
use nix::errno::Errno;
use nix::poll::{PollFd, PollFlags, PollTimeout, poll};
use nix::sys::termios::{FlushArg, tcflush};
use tokio::sync::oneshot;
use toren_display::visible;
use toren_protocol::{ApprovalRequested, RunId};
use toren_worker::{Approver, Decision};

use super::{command_block, say};

/// Asks on the terminal: shows the command and reads the answer typed after the question.
pub(crate) struct TerminalApprover {
    /// The terminal (a duplicate of stdin).
    input: Arc<OwnedFd>,
    /// Questions for the reading thread, one at a time.
    questions: tokio::sync::Mutex<std::sync::mpsc::Sender<Question>>,
    /// Wakes the reading thread when a question is dropped unanswered.
    wake: PipeWriter,
    by: String,
}

/// A question waiting for the line typed after it appeared.
struct Question {
    answer: oneshot::Sender<Option<String>>,
    dropped: Arc<AtomicBool>,
}

impl TerminalApprover {
    /// An approver if a person can see the prompt and answer it (stdin and stderr are
    /// terminals); `None` otherwise, and the run waits for `toren approve|deny`. Its
    /// decisions are recorded as made `by` this user (resolved in the settings).
    pub(crate) fn for_terminal(by: String) -> Option<Self> {
        if !(std::io::stdin().is_terminal() && std::io::stderr().is_terminal()) {
            return None;
        }
        let input = Arc::new(std::io::stdin().as_fd().try_clone_to_owned().ok()?);
        let (wake_reader, wake) = std::io::pipe().ok()?;
        let (questions, asked) = std::sync::mpsc::channel::<Question>();
        let terminal = Arc::clone(&input);
        std::thread::Builder::new()
            .name("stdin-reader".into())
            .spawn(move || {
                for question in asked {
                    let line = read_line(&terminal, &wake_reader, &question.dropped);
                    let _ = question.answer.send(line);
                }
            })
            .ok()?;
        Some(Self {
            input,
            questions: tokio::sync::Mutex::new(questions),
            wake,
            by,
        })
    }

    /// Discards whatever was typed so far, asks `question`, and returns the line typed
    /// after it (`None` at the end of input).
    async fn ask_line(&self, question: &str) -> Option<String> {
        let questions = self.questions.lock().await;
        let _ = tcflush(self.input.as_fd(), FlushArg::TCIFLUSH);
        eprint!("{question}");
        let _ = std::io::stderr().flush();
        let (answer, answered) = oneshot::channel();
        let dropped = Arc::new(AtomicBool::new(false));
        questions
            .send(Question {
                answer,
                dropped: Arc::clone(&dropped),
            })
            .ok()?;
        let _wake_if_dropped = WakeOnDrop {
            dropped,
            wake: &self.wake,
        };
        answered.await.ok().flatten()
    }

    fn decision(&self, approved: bool, reason: Option<String>) -> Decision {
        Decision {
            approved,
            reason,
            by: self.by.clone(),
            via: "terminal".into(),
        }
    }
}

/// Tells the reading thread that the question it reads for is gone.
struct WakeOnDrop<'a> {
    dropped: Arc<AtomicBool>,
    wake: &'a PipeWriter,
}

impl Drop for WakeOnDrop<'_> {
    fn drop(&mut self) {
        self.dropped.store(true, Ordering::SeqCst);
        let _ = nix::unistd::write(self.wake.as_fd(), &[1]);
    }
}

/// Reads one line from the terminal, giving up when the question is dropped. `None` at
/// the end of input, on an error, or when given up.
fn read_line(input: &OwnedFd, wake: &PipeReader, dropped: &AtomicBool) -> Option<String> {
    let mut line = Vec::new();
    loop {
        let mut fds = [
            PollFd::new(input.as_fd(), PollFlags::POLLIN),
            PollFd::new(wake.as_fd(), PollFlags::POLLIN),
        ];
        match poll(&mut fds, PollTimeout::NONE) {
            Ok(_) | Err(Errno::EINTR) => {}
            Err(_) => return None,
        }
        let woken = fds[1].any().unwrap_or(false);
        let readable = fds[0].any().unwrap_or(false);
        if woken {
            // Wakes from earlier questions may be left over: only this one's flag counts.
            let mut drained = [0u8; 64];
            let _ = nix::unistd::read(wake.as_fd(), &mut drained);
        }
        if dropped.load(Ordering::SeqCst) {
            return None;
        }
        if !readable {
            continue;
        }
        let mut buf = [0u8; 1024];
        match nix::unistd::read(input.as_fd(), &mut buf) {
            Ok(0) => {
                return (!line.is_empty()).then(|| String::from_utf8_lossy(&line).into_owned());
            }
            Ok(n) => {
                line.extend_from_slice(&buf[..n]);
                if let Some(end) = line.iter().position(|b| *b == b'\n') {
                    // Anything after the newline was typed after the answer: it answers
                    // nothing either.
                    line.truncate(end);
                    return Some(String::from_utf8_lossy(&line).into_owned());
                }
            }
            Err(Errno::EINTR | Errno::EAGAIN) => {}
            Err(_) => return None,
        }
    }
}

#[async_trait]
impl Approver for TerminalApprover {
    async fn ask_host(
        &self,
        run: &RunId,
        request: &toren_protocol::HostApprovalRequested,
    ) -> Option<Decision> {
        let id = visible(&request.id);
        say!(
            "\na command asks for {} (held until you answer; or from another terminal: toren approve|deny {run} {id})",
            visible(&request.summary())
        );
        loop {
            let answer = self
                .ask_line("allow this host for the rest of the run? [y]es / [n]o: ")
                .await?;
            match answer.trim().to_lowercase().as_str() {
                "y" | "yes" => return Some(self.decision(true, None)),
                "n" | "no" => return Some(self.decision(false, None)),
                _ => say!("please answer y or n"),
            }
        }
    }

    async fn ask(&self, run: &RunId, request: &ApprovalRequested) -> Option<Decision> {
        let call = visible(&request.call_id);
        let what = if request.attempt > 1 {
            "bash wants to run again a command that was interrupted mid-execution; it may already have had some of its effects"
        } else {
            "bash wants to run"
        };
        say!(
            "\n{what} (call {call}):\n{}  (or answer from another terminal: toren approve|deny {run} {call})",
            command_block(&request.command)
        );
        loop {
            let answer = self.ask_line("approve? [y]es / [n]o: ").await?;
            match answer.trim().to_lowercase().as_str() {
                "y" | "yes" => return Some(self.decision(true, None)),
                "n" | "no" => {
                    let reason = self
                        .ask_line("reason for the model (optional): ")
                        .await
                        .map(|r| r.trim().to_owned())
                        .filter(|r| !r.is_empty());
                    return Some(self.decision(false, reason));
                }
                _ => say!("please answer y or n"),
            }
        }
    }
}
