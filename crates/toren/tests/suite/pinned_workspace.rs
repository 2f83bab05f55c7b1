//! The workspace is part of the pinned run (I-4): a resumed run works in the workspace it
//! was created with, whatever `TOREN_SANDBOX_ROOT` says today, and refuses to start, naming
//! it, when that workspace is gone, rather than carrying on in an empty one.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::common::{Toren, text};

/// Writes notes.txt, then a bash call that reads it waits for approval.
fn waiting_run(toren: &Toren) -> String {
    let script = json!({"turns": [
        {"tool_calls": [{"write_file": {"path": "notes.txt", "content": "remember this\n"}}]},
        {"tool_calls": [{"bash": {"command": "cat notes.txt"}}]},
        {"text": "done"},
    ]});
    toren.file("s.yaml", &script.to_string());
    toren.agent("n", "name: n\nmodel: scripted/s.yaml\nsandbox: true\n");
    let mut child = toren.spawn(&["run", "n", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    child.kill().unwrap();
    child.wait().unwrap();
    let call = toren.show(&run)["pending_approval"]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let out = toren.run(&["approve", &run, &call]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    run
}

fn bash_output(events: &[Value]) -> Option<String> {
    let bash = events
        .iter()
        .find(|e| e["type"] == "tool_started" && e["tool"] == "bash")?;
    events
        .iter()
        .find(|e| e["type"] == "tool_completed" && e["call_id"] == bash["call_id"])
        .map(|e| e["output"].as_str().unwrap().to_owned())
}

#[test]
fn resume_uses_the_recorded_workspace_whatever_the_sandbox_root_is_now() {
    let toren = Toren::new();
    let run = waiting_run(&toren);
    let workspace = toren.workspace(&run);
    assert_eq!(
        toren.show(&run)["policy"]["workspace"],
        workspace.display().to_string(),
        "the workspace is pinned in the run"
    );
    let elsewhere = toren.dir.path().join("another-root");

    let out = toren
        .command(&["resume", &run])
        .env("TOREN_SANDBOX_ROOT", &elsewhere)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let output = bash_output(&toren.events(&run)).unwrap();
    assert!(output.starts_with("remember this\n"), "{output}");
    assert!(
        !elsewhere.join(&run).exists(),
        "no workspace was provisioned under today's root"
    );
}

#[test]
fn a_run_whose_workspace_is_gone_refuses_to_start_and_names_it() {
    let toren = Toren::new();
    let run = waiting_run(&toren);
    let workspace = toren.workspace(&run);
    let moved = toren.dir.path().join("moved-away");
    std::fs::rename(&workspace, &moved).unwrap();

    let out = toren.run(&["resume", &run]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{stderr}");
    assert!(
        stderr.contains(&workspace.display().to_string()),
        "names the workspace: {stderr}"
    );
    assert!(!workspace.exists(), "nothing was provisioned in its place");
    let shown = toren.show(&run);
    assert_eq!(
        shown["status"], "running",
        "the run is kept as it is: {shown}"
    );
    assert_eq!(shown["resumable"], true);
    assert_eq!(bash_output(&toren.events(&run)), None, "nothing ran");

    // Put back, the run goes on where it was.
    std::fs::rename(&moved, &workspace).unwrap();
    let out = toren.run(&["resume", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let output = bash_output(&toren.events(&run)).unwrap();
    assert!(output.starts_with("remember this\n"), "{output}");
}
