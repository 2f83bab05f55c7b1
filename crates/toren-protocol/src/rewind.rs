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
}
