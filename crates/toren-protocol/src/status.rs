//! Run statuses. A run's status is a fold over its events; [`EventKind::status_after`]
//! says how each event moves it, so stores can keep a status column in step.
//!
//! [`EventKind::status_after`]: crate::EventKind::status_after

use std::fmt;
use std::str::FromStr;

use serde::{Deserialize, Serialize};

#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunStatus {
    Queued,
    Running,
    AwaitingApproval,
    /// Paused at a limit of its budget until someone raises it; no worker claims it.
    AwaitingBudget,
    Completed,
    Failed,
    Cancelled,
}

impl RunStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            Self::Queued => "queued",
            Self::Running => "running",
            Self::AwaitingApproval => "awaiting_approval",
            Self::AwaitingBudget => "awaiting_budget",
            Self::Completed => "completed",
            Self::Failed => "failed",
            Self::Cancelled => "cancelled",
        }
    }

    /// Whether the run has ended and will never append another event.
    pub fn is_terminal(self) -> bool {
        match self {
            Self::Completed | Self::Failed | Self::Cancelled => true,
            Self::Queued | Self::Running | Self::AwaitingApproval | Self::AwaitingBudget => false,
        }
    }
}

impl fmt::Display for RunStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// A status string that is not one of Toren's run statuses.
#[derive(Debug, thiserror::Error)]
#[error("unknown run status `{0}`")]
pub struct UnknownStatus(String);

impl FromStr for RunStatus {
    type Err = UnknownStatus;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        Ok(match s {
            "queued" => Self::Queued,
            "running" => Self::Running,
            "awaiting_approval" => Self::AwaitingApproval,
            "awaiting_budget" => Self::AwaitingBudget,
            "completed" => Self::Completed,
            "failed" => Self::Failed,
            "cancelled" => Self::Cancelled,
            other => return Err(UnknownStatus(other.to_owned())),
        })
    }
}
