//! How a run's sandbox instance came to be, when it is not simply the first one made
//! for the run: reconnected to the one a dead worker left (same disk), or made anew because
//! the recorded one was gone, with what Toren put back into it from the run's journal.
//! Recorded in `sandbox_provisioned` (`event`), shown by `toren run`/`resume`/`events`.

use serde::{Deserialize, Serialize};

/// How the instance of a `sandbox_provisioned` came to be. Absent: a new instance, as
/// every event written before this field says.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum SandboxOrigin {
    /// A worker resuming the run connected to the instance already recorded (a dead
    /// worker's): same disk, the workspace as it was left.
    Reconnected,
    /// The recorded instance `previous` was gone (killed or expired), and with it its
    /// workspace; this one is new. `restored` lists the files Toren rewrote into it from
    /// the journal, `not_restored` the ones the run's file tools wrote that it could not.
    Replaced {
        previous: String,
        #[serde(default)]
        restored: Vec<String>,
        #[serde(default)]
        not_restored: Vec<NotRestored>,
    },
}

/// A file the run's file tools wrote that a replacement sandbox does not have, and why.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct NotRestored {
    pub path: String,
    pub why: String,
}

impl SandboxOrigin {
    /// One line for people, e.g. `reconnected to e2b sandbox ID (same disk)`. Paths and
    /// ids are as recorded: callers escape them for a terminal.
    pub fn describe(&self, backend: &str, instance: &str) -> String {
        match self {
            Self::Reconnected => {
                format!("reconnected to {backend} sandbox {instance} (same disk)")
            }
            Self::Replaced {
                previous,
                restored,
                not_restored,
            } => {
                let mut line = format!(
                    "the {backend} sandbox {previous} is gone and its workspace lost; new sandbox \
                     {instance}; restored from the log: "
                );
                line.push_str(&if restored.is_empty() {
                    "nothing".to_owned()
                } else {
                    restored.join(", ")
                });
                if !not_restored.is_empty() {
                    let lost: Vec<String> = not_restored
                        .iter()
                        .map(|n| format!("{} ({})", n.path, n.why))
                        .collect();
                    line.push_str("; not restored: ");
                    line.push_str(&lost.join(", "));
                }
                line
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn origins_are_tagged_objects_and_read_back() {
        let reconnected = serde_json::to_value(SandboxOrigin::Reconnected).unwrap();
        assert_eq!(reconnected, serde_json::json!({"kind": "reconnected"}));
        let replaced = SandboxOrigin::Replaced {
            previous: "old".into(),
            restored: vec!["a.txt".into()],
            not_restored: vec![NotRestored {
                path: "b.txt".into(),
                why: "bash ran after it was written".into(),
            }],
        };
        let value = serde_json::to_value(&replaced).unwrap();
        assert_eq!(value["kind"], "replaced");
        assert_eq!(
            serde_json::from_value::<SandboxOrigin>(value).unwrap(),
            replaced
        );
        assert_eq!(
            replaced.describe("e2b", "new"),
            "the e2b sandbox old is gone and its workspace lost; new sandbox new; restored \
             from the log: a.txt; not restored: b.txt (bash ran after it was written)"
        );
    }
}
