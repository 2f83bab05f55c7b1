//! `rewound`: a run goes back to an earlier step, its workspace and its conversation as
//! one unit. The events after the step stay in the log (it is append-only); the fold
//! continues from the state the run had at `to`.

use serde::{Deserialize, Serialize};

/// Since v1 (added later; older logs have none). The run continues from the state after
/// event `to`: the conversation the model sees, the calls of that turn and their progress
/// are what they were then. Appended under the lease before the workspace is restored, so
/// the intent is durable first; a driver that finds it last in the log restores the
/// workspace again (the restore is idempotent) before anything else.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Rewound {
    /// The step (`seq`) the run goes back to; it must be on the run's current line (not
    /// left behind by an earlier rewind) and between turns or right after a model answer.
    pub to: u64,
    /// The workspace checkpoint restored: the one taken before the first call after `to`
    /// that could change the workspace. `None`: no such call started after `to`, so the
    /// workspace is as it was then.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// Who asked and through which door (`alice via cli`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// Set when a session was rewound (in its rewind turn's [`TurnStart`]): the turn `to`
    /// is a step of, and `to` is that turn run's `seq` (0: before the turn began).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub turn: Option<u32>,
}

/// How a session's turn began, pinned in its `run_created`.
///
/// A session's turns are runs of their own, so a session goes back to an earlier step by
/// a turn of its own: a *rewind turn*, whose `rewound` says where the conversation
/// continues from and which checkpoint the workspace is restored to. Recording it in the
/// turn's `run_created` makes the intent durable in the same write that checks that no
/// other turn runs; whoever drives the rewind turn restores the workspace (idempotent, so
/// again after a crash) and then completes it, and the session's later turns continue the
/// conversation from that step. A rewind turn has no input and calls no model.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct TurnStart {
    /// The workspace checkpoint taken just before the turn began (`None`: checkpoints are
    /// off, the workspace is not on the host that made the turn, or taking it failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// This turn is a rewind of the session, to the step it names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewound: Option<Rewound>,
    /// This run goes on from a step of a run that had ended (see [`Forked`]).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub forked: Option<Forked>,
    /// The run's workspace began as a copy of a directory or a clone of a repository.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seeded: Option<WorkspaceSeed>,
}

/// Since v1 (added later; older logs have none). What a run's workspace was filled with
/// before its `run_created` was written: a person's own project, copied as the
/// workspace's first checkpoint (a rewind to the run's start gives it back).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WorkspaceSeed {
    /// The directory (on the host that created the run) or the repository's URL.
    pub from: String,
    /// The checkpoint that holds the copy.
    pub checkpoint: String,
    /// Files, directories and symlinks copied.
    pub files: u64,
    /// Bytes of file content copied.
    pub bytes: u64,
}

/// Since v1 (added later; older logs have none). A run whose log had closed (completed,
/// failed or cancelled) is taken back by a new run that goes on from one of its steps: the
/// ended run's log stays closed and append-only, and the new one begins where it left it.
/// Everything the new run needs is pinned here, so that it never reads the other run's
/// log: the conversation at the step and the calls its last answer made that had not run
/// yet. Its workspace was filled from the ended run's checkpoint before this was written
/// (a crash in between leaves an unused directory, never a run with half a workspace).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Forked {
    /// The run it goes on from.
    pub from: crate::RunId,
    /// The step (`seq`) of `from` it goes on from.
    pub to: u64,
    /// The checkpoint of `from` its workspace was filled from (taken when the fork was
    /// made if nothing had changed `from`'s workspace since the step); `None`: no sandbox.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// Who asked and through which door (`alice via cli`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub by: Option<String>,
    /// The conversation the model had seen at the step.
    pub messages: Vec<crate::Message>,
    /// The calls of the step's last answer, none of them asked about or started yet
    /// (empty between turns).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub pending: Vec<crate::ToolCall>,
    /// Model answers up to the step.
    #[serde(default)]
    pub turns: u32,
}

impl TurnStart {
    /// How a session step reads: `3` before turn 3 began, `3.7` after event 7 of turn 3.
    pub fn step_name(turn: u32, seq: u64) -> String {
        if seq == 0 {
            turn.to_string()
        } else {
            format!("{turn}.{seq}")
        }
    }
}
