//! What a run's journal says its workspace holds, for a sandbox that lost it (an E2B
//! sandbox killed or expired): [`plan_restore`] folds the events into the files whose
//! latest content is known exactly — each path's last successful `write_file`, with the
//! successful `edit_file`s after it applied in order, by the same matching the tool used
//! (`matching`) — and the ones the file tools wrote that cannot be restored, with why:
//! a `bash` command that ended after the last write (it may have changed or removed the
//! file; one started and not ended does not count: it is the call that met the loss, run
//! next in the new sandbox over the restored files), an edit of a file whose earlier content the log does not hold, content holding a
//! `[redacted:NAME]` marker (the journal keeps arguments with secrets' values replaced),
//! and everything before a rewind (the workspace went back to a checkpoint). Files made by
//! commands are never in the plan: only their output is journaled. The worker reads the
//! log and the backend writes the plan; this module only decides.

use std::collections::BTreeMap;

use serde::Deserialize;
use toren_protocol::{EventKind, NotRestored};
use toren_sandbox::RestorePlan;

use crate::matching::{Edit, Found};
use crate::write::{EDIT, WRITE};

/// What a file's content is known to be.
enum Known {
    Exactly(String),
    Unknown(&'static str),
}

const AFTER_BASH: &str = "a bash command ran after its last write";
const UNKNOWN_BASE: &str = "edited, but its content before the edit is not in the log";
const REDACTED: &str = "it holds a redacted secret";
const REWOUND: &str = "written before a rewind";

#[derive(Deserialize)]
struct WriteArgs {
    path: String,
    content: String,
}

#[derive(Deserialize)]
struct EditArgs {
    path: String,
    old_string: String,
    new_string: String,
}

/// The restore plan for a run whose journal's events are `events`, in order.
pub fn plan_restore<'a>(events: impl IntoIterator<Item = &'a EventKind>) -> RestorePlan {
    let mut calls: BTreeMap<&str, (&str, &serde_json::Value)> = BTreeMap::new();
    // Each path's state, and the order of its last write.
    let mut files: BTreeMap<String, (u64, Known)> = BTreeMap::new();
    let mut order = 0;
    for event in events {
        match event {
            EventKind::ModelResponded(responded) => {
                for call in &responded.message.tool_calls {
                    calls.insert(&call.id, (&call.name, &call.arguments));
                }
            }
            EventKind::Rewound(_) => {
                for (_, known) in files.values_mut() {
                    *known = Known::Unknown(REWOUND);
                }
            }
            // A command that ended, however (a failing one may have written too), may
            // have changed any file. One started and not ended is the call that met the
            // loss (it runs in the new sandbox, after the restore) or one cut short with
            // its sandbox: it is run again, over the restored files.
            EventKind::ToolCompleted(done)
                if calls.get(done.call_id.as_str()).map(|c| c.0) == Some(toren_protocol::BASH) =>
            {
                for (_, known) in files.values_mut() {
                    if matches!(known, Known::Exactly(_)) {
                        *known = Known::Unknown(AFTER_BASH);
                    }
                }
            }
            EventKind::ToolCompleted(done) if !done.is_error => {
                let Some(&(name, args)) = calls.get(done.call_id.as_str()) else {
                    continue;
                };
                order += 1;
                if name == WRITE {
                    if let Ok(w) = WriteArgs::deserialize(args) {
                        files.insert(w.path, (order, Known::Exactly(w.content)));
                    }
                } else if name == EDIT
                    && let Ok(e) = EditArgs::deserialize(args)
                {
                    let entry = files
                        .entry(e.path)
                        .or_insert((order, Known::Unknown(UNKNOWN_BASE)));
                    entry.0 = order;
                    if let Known::Exactly(text) = &entry.1 {
                        entry.1 = match Edit::find(text, &e.old_string, &e.new_string) {
                            Found::Matches(edit) => Known::Exactly(edit.apply()),
                            Found::OnlyIgnoringLineEndings { .. } | Found::Nothing => {
                                Known::Unknown(UNKNOWN_BASE)
                            }
                        };
                    }
                }
            }
            _ => {}
        }
    }
    let mut plan = RestorePlan::default();
    let mut known: Vec<(u64, String, String)> = Vec::new();
    for (path, (at, state)) in files {
        match state {
            Known::Exactly(text) if text.contains("[redacted:") => {
                plan.not_restored.push(NotRestored {
                    path,
                    why: REDACTED.to_owned(),
                });
            }
            Known::Exactly(text) => known.push((at, path, text)),
            Known::Unknown(why) => plan.not_restored.push(NotRestored {
                path,
                why: why.to_owned(),
            }),
        }
    }
    known.sort_by_key(|(at, _, _)| *at);
    plan.files = known.into_iter().map(|(_, p, t)| (p, t)).collect();
    plan
}

#[cfg(test)]
#[path = "restore_tests.rs"]
mod tests;
