//! The agent spec as pinned in a run, and the sandbox policy resolved for it.
//!
//! `toren-config` parses agent files into [`AgentSpec`]; the run records the spec and the
//! [`ResolvedPolicy`] in `run_created`, and from then on only the pinned copy governs the
//! run (invariant I-4).

use std::fmt;

use serde::{Deserialize, Serialize};

use crate::EgressPolicy;

/// A parsed, validated agent file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct AgentSpec {
    pub name: String,
    /// `provider/model-id`, e.g. `anthropic/claude-sonnet-5`.
    pub model: String,
    /// The system prompt written in the file; `None` means Toren's default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions: Option<String>,
    /// `None` means no sandbox and therefore no tools.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox: Option<SandboxSpec>,
    pub max_turns: u32,
    /// The model's context window in tokens, from the agent file's `context_tokens`;
    /// `None`: the size Toren knows for `model` ([`crate::context_window`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub context_tokens: Option<u32>,
    /// The agent file's `budget` and `pricing`; `None`: no limits, prices from the table.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub budget: Option<crate::Budget>,
    /// The file the spec was read from, absolute; relative paths in the spec (the
    /// `scripted/` model) resolve against its directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
}

impl AgentSpec {
    pub const DEFAULT_MAX_TURNS: u32 = 50;

    /// The context window the conversation must fit, in tokens: `context_tokens`, else
    /// the known size of `model`.
    pub fn context_window(&self) -> u32 {
        self.context_tokens
            .unwrap_or_else(|| crate::context_window(&self.model))
    }

    /// What this agent's tokens cost: the agent file's `pricing`, else the table's for
    /// `model` ([`crate::known_pricing`]); `None`: unknown.
    pub fn pricing(&self) -> Option<crate::Pricing> {
        self.budget
            .and_then(|b| b.pricing)
            .or_else(|| crate::known_pricing(&self.model))
    }

    /// The provider part and the model part of `model`.
    pub fn model_parts(&self) -> (&str, &str) {
        self.model
            .split_once('/')
            .unwrap_or((self.model.as_str(), ""))
    }
}

/// What an agent file asks of its sandbox.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SandboxSpec {
    /// Interpreted by the backend (a docker image, an E2B template); `None` = the default.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    /// `true`: the sandbox has the network, unfiltered. `false`: it has none, except
    /// through Toren's egress proxy when `egress` is set.
    #[serde(default)]
    pub network: bool,
    /// The hosts reachable through the egress proxy (`network: [hosts…]` or
    /// `network: {allow, ask}` in the agent file); `None` for `network: true` / `false`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressPolicy>,
    #[serde(default)]
    pub approval: ApprovalPolicy,
    /// Names of the operator's variables the sandbox may see. Names only, never values.
    #[serde(default)]
    pub env: Vec<String>,
    /// Resources each command may use; specs pinned before limits existed get the defaults.
    #[serde(default)]
    pub limits: ResourceLimits,
    /// What to do with a bash call interrupted mid-command, on resume.
    #[serde(default, skip_serializing_if = "is_default")]
    pub on_interrupt: OnInterrupt,
    /// Workspace checkpoints (`sandbox.checkpoints`); specs pinned before it existed get
    /// the default (on, nothing excluded, 100 kept).
    #[serde(default, skip_serializing_if = "is_default")]
    pub checkpoints: CheckpointPolicy,
}

/// Workspace checkpoints: taken before each session turn and each call that can change the
/// workspace (bash, write_file, edit_file), kept outside the workspace, for `toren diff`
/// and `toren rewind`. The agent file's `sandbox.checkpoints`: absent or `true` is the
/// default, `false` turns them off, a mapping `{exclude, keep}` tunes them.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CheckpointPolicy {
    /// `false`: no checkpoints, so nothing to diff or rewind to.
    #[serde(default = "enabled")]
    pub enabled: bool,
    /// Gitignore-like patterns not recorded nor restored (`node_modules/`, `*.log`,
    /// `build/out`); by default nothing is excluded, so a rewind undoes everything.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exclude: Vec<String>,
    /// Checkpoints kept per workspace (older ones are pruned).
    #[serde(default = "default_keep")]
    pub keep: u32,
}

impl CheckpointPolicy {
    pub const DEFAULT_KEEP: u32 = 100;

    /// No checkpoints.
    pub fn off() -> Self {
        Self {
            enabled: false,
            ..Self::default()
        }
    }
}

impl Default for CheckpointPolicy {
    fn default() -> Self {
        Self {
            enabled: true,
            exclude: Vec::new(),
            keep: Self::DEFAULT_KEEP,
        }
    }
}

fn enabled() -> bool {
    true
}

fn default_keep() -> u32 {
    CheckpointPolicy::DEFAULT_KEEP
}

fn is_default<T: Default + PartialEq>(value: &T) -> bool {
    *value == T::default()
}

/// What one sandboxed command (with everything it starts) may use. Backends enforce what
/// they can and say how; see `SECURITY.md`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ResourceLimits {
    /// Bytes of memory.
    pub memory: u64,
    /// Processes and threads at once.
    pub pids: u32,
    /// Seconds of CPU time.
    pub cpu_secs: u64,
}

impl ResourceLimits {
    pub const DEFAULT_MEMORY: u64 = 2 * 1024 * 1024 * 1024;
    pub const DEFAULT_PIDS: u32 = 512;
    pub const DEFAULT_CPU_SECS: u64 = 600;
}

impl Default for ResourceLimits {
    fn default() -> Self {
        Self {
            memory: Self::DEFAULT_MEMORY,
            pids: Self::DEFAULT_PIDS,
            cpu_secs: Self::DEFAULT_CPU_SECS,
        }
    }
}

/// Whether a human approves each bash command.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum ApprovalPolicy {
    /// Every bash command waits for a human decision (the default).
    #[default]
    Always,
    /// Bash runs without asking.
    Never,
}

impl fmt::Display for ApprovalPolicy {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Always => "always",
            Self::Never => "never",
        })
    }
}

/// What happens on resume to a bash call that was started and never completed (the process
/// driving it died mid-command).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum OnInterrupt {
    /// Run it again (at-least-once; the default).
    #[default]
    Rerun,
    /// Ask a human first: the command may already have had effects.
    Ask,
}

impl fmt::Display for OnInterrupt {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Self::Rerun => "rerun",
            Self::Ask => "ask",
        })
    }
}

/// The sandbox policy a run was created under: the spec's demands plus the backend the
/// operator picked. Recorded in `run_created`; never re-resolved for that run.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ResolvedPolicy {
    /// The backend name, e.g. `local`.
    pub backend: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub image: Option<String>,
    pub network: bool,
    /// The pinned host policy of the egress proxy (always with `network: false`); `None`:
    /// no proxy, and in runs created before it existed, whose `network: bool` folds as is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub egress: Option<EgressPolicy>,
    pub approval: ApprovalPolicy,
    /// Granted variable names (values are read from the environment at execution time and
    /// never recorded).
    pub env: Vec<String>,
    /// Pinned like the rest; runs created before limits existed get the defaults.
    #[serde(default)]
    pub limits: ResourceLimits,
    /// The workspace's host path, chosen and created with the run: a resumed run uses
    /// exactly this directory or refuses to start, whatever the sandbox root is today.
    /// `None` in runs created before it was pinned.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub workspace: Option<String>,
    /// Pinned like the rest; runs created before it existed re-run interrupted calls.
    #[serde(default, skip_serializing_if = "is_default")]
    pub on_interrupt: OnInterrupt,
    /// The name under which the backend keeps this run's sandbox instance (a container):
    /// the session's id for a session's turns, so one container serves the whole session.
    /// `None`: the run's own id.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sandbox_key: Option<String>,
    /// The workspace volume the run's workspace lives on (`TOREN_WORKSPACE_VOLUME` of the
    /// process that created it, by default its machine): only a worker serving this volume
    /// may drive the run. `None` for a backend that keeps the workspace elsewhere (a remote
    /// sandbox), which any worker may drive, and in runs created before volumes existed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub volume: Option<String>,
    /// Pinned like the rest; runs created before it existed get the default (on).
    #[serde(default, skip_serializing_if = "is_default")]
    pub checkpoints: CheckpointPolicy,
}
