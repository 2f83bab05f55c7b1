//! Putting back what Toren knows of a lost workspace: when a run's sandbox was gone and a
//! new one made (`sandbox`), the plan its [`RestoreSource`] gives (the files the run's
//! file tools last wrote whose content the journal holds exactly, `toren_tools::plan_restore`)
//! is written into the new `/workspace` through the same in-VM checks as the file tools
//! (`files`), and the loss is told: a note for the next command's output (the model's) and
//! the [`SandboxOrigin`] the worker records in `sandbox_provisioned` (the log and screen).

use std::sync::Arc;

use toren_protocol::{NotRestored, SandboxOrigin};
use toren_sandbox::RestoreSource;

use crate::files::VmFiles;
use crate::sandbox::E2bSandbox;

/// Writes `source`'s plan into the sandbox `id` (new, replacing `previous`); returns the
/// note for the model and the origin to record.
pub(crate) async fn restore(
    sandbox: Arc<E2bSandbox>,
    source: Option<&dyn RestoreSource>,
    previous: &str,
    (id, token): (&str, Option<&str>),
) -> (String, SandboxOrigin) {
    let plan = match source {
        Some(source) => source.plan().await,
        None => toren_sandbox::RestorePlan::default(),
    };
    let files = VmFiles {
        sandbox,
        runtime: tokio::runtime::Handle::current(),
    };
    let mut restored = Vec::new();
    let mut not_restored = plan.not_restored;
    for (path, content) in plan.files {
        match files.write_in(&path, content.as_bytes(), id, token).await {
            Ok(()) => restored.push(path),
            Err(err) => {
                tracing::warn!(sandbox = %id, %err, "could not restore a file into the new sandbox");
                not_restored.push(NotRestored {
                    path,
                    why: format!("writing it into the new sandbox failed: {err}"),
                });
            }
        }
    }
    tracing::info!(sandbox = %id, previous, restored = restored.len(), not_restored = not_restored.len(), "restored what the log holds of a lost workspace");
    let note = note(previous, id, &restored, &not_restored);
    let origin = SandboxOrigin::Replaced {
        previous: previous.to_owned(),
        restored,
        not_restored,
    };
    (note, origin)
}

/// What the model is told with the next command's output.
fn note(previous: &str, id: &str, restored: &[String], not_restored: &[NotRestored]) -> String {
    let mut note = format!(
        "[the E2B sandbox `{previous}` is gone (killed or expired), and with it the files in \
         its /workspace; this command ran in a new sandbox `{id}`. The run's log keeps every \
         earlier result. "
    );
    if restored.is_empty() {
        note.push_str("No file could be restored from the log");
    } else {
        note.push_str(&format!(
            "Restored from the log, as the file tools last wrote them: {}",
            quoted(restored.iter().map(String::as_str))
        ));
    }
    if not_restored.is_empty() {
        note.push_str(
            ". Anything else earlier commands made in the workspace (installed packages, \
             clones, build output) is not there any more.]\n",
        );
    } else {
        let lost: Vec<String> = not_restored
            .iter()
            .map(|n| format!("`{}` ({})", n.path, n.why))
            .collect();
        note.push_str(&format!(
            ". Not restored: {}; nor anything else earlier commands made in the workspace.]\n",
            lost.join(", ")
        ));
    }
    note
}

fn quoted<'a>(paths: impl Iterator<Item = &'a str>) -> String {
    paths
        .map(|p| format!("`{p}`"))
        .collect::<Vec<_>>()
        .join(", ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_note_lists_what_was_restored_and_what_was_not() {
        let lost = [NotRestored {
            path: "b.txt".into(),
            why: "a bash command ran after its last write".into(),
        }];
        assert_eq!(
            note("old", "new", &["a.txt".into(), "c/d.txt".into()], &lost),
            "[the E2B sandbox `old` is gone (killed or expired), and with it the files in its \
             /workspace; this command ran in a new sandbox `new`. The run's log keeps every \
             earlier result. Restored from the log, as the file tools last wrote them: \
             `a.txt`, `c/d.txt`. Not restored: `b.txt` (a bash command ran after its last \
             write); nor anything else earlier commands made in the workspace.]\n"
        );
        assert!(note("old", "new", &[], &[]).contains("No file could be restored from the log."));
    }
}
