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
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TurnStart {
    /// The workspace checkpoint taken just before the turn began (`None`: checkpoints are
    /// off, the workspace is not on the host that made the turn, or taking it failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub checkpoint: Option<String>,
    /// This turn is a rewind of the session, to the step it names.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub rewound: Option<Rewound>,
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
