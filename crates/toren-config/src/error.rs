//! The crate's one error type: what can go wrong reading agent files and settings.
//!
//! Each variant's `Display` is the complete message a person reads, including what to do;
//! an invalid agent file displays as its [`Diagnostic`]s (`file:line:col: error: ...` plus
//! the source snippet), every problem found in the file, in the order of the file.

use std::fmt::Write as _;
use std::io;
use std::path::{Path, PathBuf};

use crate::diagnostic::Diagnostic;

pub type Result<T, E = Error> = std::result::Result<T, E>;

#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The agent file was read but is not a valid agent: every problem found, in the order
    /// of their positions in the file (never empty).
    #[error("{}", show_all(.0))]
    InvalidAgent(Vec<Diagnostic>),

    #[error("{}: error: cannot read the agent file: {cause}", path.display())]
    ReadAgent { path: PathBuf, cause: io::Error },

    #[error("{}", not_found(reference, searched, agents_dir, available.as_deref()))]
    AgentNotFound {
        reference: String,
        /// The paths tried, in order.
        searched: Vec<PathBuf>,
        agents_dir: PathBuf,
        /// The agent names in `agents_dir`; `None` when it could not be listed.
        available: Option<Vec<String>>,
    },

    #[error(
        "`{reference}` is neither a path to an agent file nor a valid agent name ({problem}); \
         pass a path (containing `/` or ending in `.yaml`) or an agent's name"
    )]
    InvalidAgentName { reference: String, problem: String },

    #[error(
        "agent `{name}` is defined more than once: {}; remove or rename all but one",
        list_paths(paths)
    )]
    AmbiguousAgent { name: String, paths: Vec<PathBuf> },

    #[error("cannot list the agents in {}: {cause}", dir.display())]
    ListAgents { dir: PathBuf, cause: io::Error },

    #[error(
        "cannot tell where Toren keeps its data: neither TOREN_HOME nor HOME is set; \
         set TOREN_HOME to a directory, e.g. TOREN_HOME=/var/lib/toren"
    )]
    NoHome,

    #[error("{var}={value} is not valid: expected {expected}")]
    InvalidSetting {
        var: &'static str,
        value: String,
        expected: String,
    },

    #[error(
        "TOREN_SANDBOX={value}: {why}; set TOREN_SANDBOX=docker (a container per run), \
         TOREN_SANDBOX=local (bubblewrap) or TOREN_SANDBOX=none (no sandbox)"
    )]
    SandboxUnavailable { value: String, why: String },
}

impl Error {
    /// The first file:line:col diagnostic, when the error is about an agent file's content.
    pub fn diagnostic(&self) -> Option<&Diagnostic> {
        self.diagnostics().first()
    }

    /// Every file:line:col diagnostic of an invalid agent file, in file order; empty when
    /// the error is not about a file's content.
    pub fn diagnostics(&self) -> &[Diagnostic] {
        match self {
            Self::InvalidAgent(diagnostics) => diagnostics,
            Self::ReadAgent { .. }
            | Self::AgentNotFound { .. }
            | Self::InvalidAgentName { .. }
            | Self::AmbiguousAgent { .. }
            | Self::ListAgents { .. }
            | Self::NoHome
            | Self::InvalidSetting { .. }
            | Self::SandboxUnavailable { .. } => &[],
        }
    }

    /// Whether the error comes from the process environment (settings) rather than from an
    /// agent file or its lookup.
    pub fn is_setting(&self) -> bool {
        match self {
            Self::NoHome | Self::InvalidSetting { .. } | Self::SandboxUnavailable { .. } => true,
            Self::InvalidAgent(_)
            | Self::ReadAgent { .. }
            | Self::AgentNotFound { .. }
            | Self::InvalidAgentName { .. }
            | Self::AmbiguousAgent { .. }
            | Self::ListAgents { .. } => false,
        }
    }
}

/// Each diagnostic in turn, a blank line between two (each may span several lines).
fn show_all(diagnostics: &[Diagnostic]) -> String {
    let shown: Vec<String> = diagnostics.iter().map(Diagnostic::to_string).collect();
    shown.join("\n\n")
}

fn list_paths(paths: &[PathBuf]) -> String {
    let shown: Vec<String> = paths.iter().map(|p| p.display().to_string()).collect();
    shown.join(", ")
}

fn not_found(
    reference: &str,
    searched: &[PathBuf],
    agents_dir: &Path,
    available: Option<&[String]>,
) -> String {
    let mut message = format!(
        "no agent `{reference}`: looked for {}",
        list_paths(searched)
    );
    let dir = agents_dir.display();
    // Writing to a String cannot fail.
    let _ = match available {
        None => write!(
            message,
            "\nthe agents directory {dir} does not exist or cannot be read; \
             set TOREN_AGENTS or pass the path of an agent file"
        ),
        Some([]) => write!(message, "\nthere are no agents in {dir}"),
        Some(names) => write!(message, "\nagents in {dir}: {}", names.join(", ")),
    };
    message
}
