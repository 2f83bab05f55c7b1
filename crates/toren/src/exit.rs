//! Exit statuses and how failures are reported: one clear message on stderr.

use std::process::ExitCode;

/// The run failed, or the command could not do what was asked.
pub(crate) const FAILED: u8 = 1;
/// Bad configuration or usage: nothing was started.
pub(crate) const USAGE: u8 = 2;
/// Interrupted by Ctrl-C or SIGTERM.
pub(crate) const INTERRUPTED: u8 = 130;

/// A command's failure: an exit status and the message for the person.
#[derive(Debug)]
pub(crate) struct Failure {
    pub(crate) code: u8,
    pub(crate) error: anyhow::Error,
}

impl Failure {
    pub(crate) fn usage(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: USAGE,
            error: error.into(),
        }
    }

    pub(crate) fn failed(error: impl Into<anyhow::Error>) -> Self {
        Self {
            code: FAILED,
            error: error.into(),
        }
    }

    pub(crate) fn report(self) -> ExitCode {
        // An agent-file diagnostic already reads `file:line:col: error: …`.
        let diagnostic = self
            .error
            .downcast_ref::<toren_config::Error>()
            .is_some_and(|e| e.diagnostic().is_some());
        // Error chains quote what models, providers and sandboxes said: shown, never obeyed.
        let message = chain_message(&self.error);
        let message = toren_display::visible_lines(&message);
        if diagnostic {
            eprintln!("{message}");
        } else {
            eprintln!("error: {message}");
        }
        ExitCode::from(self.code)
    }
}

/// The error and its causes joined by `: `, skipping a cause whose text the message
/// already holds (many errors embed their source in their own message).
fn chain_message(error: &anyhow::Error) -> String {
    let mut message = String::new();
    for cause in error.chain() {
        let text = cause.to_string();
        if message.contains(&text) {
            continue;
        }
        if !message.is_empty() {
            message.push_str(": ");
        }
        message.push_str(&text);
    }
    message
}
