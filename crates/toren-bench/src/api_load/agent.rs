//! The scripted agent under load and what each of its runs must log. With the `local`
//! backend a run makes one bash call without asking (`approval: never`) and then answers;
//! with `none` the agent has no sandbox, hence no tools, and only answers. The scripted
//! model answers at once, so what is measured is Toren: the API, the queue, the journal
//! and the sandbox.

use crate::cli::SandboxKind;

use super::check::{Expected, ExpectedCall};

/// The agent's name in the agents directory.
pub(crate) const NAME: &str = "load";
/// The bash call each run makes, and what it prints (the tool adds its status line after).
const COMMAND: &str = "echo load-ok";
const PRINTS: &str = "load-ok\n";
/// The run's final answer.
const ANSWER: &str = "load done";

#[derive(Clone, Copy, Debug)]
pub(crate) struct Agent {
    sandbox: SandboxKind,
}

impl Agent {
    pub(crate) fn new(sandbox: SandboxKind) -> Self {
        Self { sandbox }
    }

    /// The files of the agents directory: the agent and its script.
    pub(crate) fn files(&self) -> Vec<(String, String)> {
        let (script, sandbox) = match self.sandbox {
            SandboxKind::Local => (
                format!(
                    "turns:\n  - tool_calls:\n      - bash: {{command: \"{COMMAND}\"}}\n  - text: \"{ANSWER}\"\n"
                ),
                "sandbox:\n  approval: never\n",
            ),
            SandboxKind::None => (format!("turns:\n  - text: \"{ANSWER}\"\n"), ""),
        };
        vec![
            (format!("{NAME}.script.yaml"), script),
            (
                format!("{NAME}.yaml"),
                format!("name: {NAME}\nmodel: scripted/{NAME}.script.yaml\n{sandbox}"),
            ),
        ]
    }

    /// The input of the `index`th run: distinct, so a log shown for the wrong run is caught.
    pub(crate) fn input(index: usize) -> String {
        format!("load run {index}")
    }

    /// What the log of the run given `input` must hold.
    pub(crate) fn expected<'a>(&self, input: &'a str) -> Expected<'a> {
        Expected {
            input,
            call: match self.sandbox {
                SandboxKind::Local => Some(ExpectedCall {
                    tool: "bash",
                    output: PRINTS,
                }),
                SandboxKind::None => None,
            },
            answer: ANSWER,
        }
    }
}
