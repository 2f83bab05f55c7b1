//! Configuration mistakes fail before a run exists: one clear error, exit status 2.

use super::common::{Toren, text};

/// Runs `toren run` and returns stderr, asserting exit 2 and that no run was created.
fn fails_with_2(toren: &Toren, agent: &str) -> String {
    let out = toren.run(&["run", agent, "--input", "hi"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "stderr: {stderr}");
    assert!(out.stdout.is_empty(), "nothing on stdout");
    assert_eq!(
        toren.newest_run(),
        None,
        "no run may exist after a configuration error"
    );
    let first = stderr.lines().next().unwrap_or_default();
    assert!(
        first.contains("error: "),
        "one error, first thing on stderr: {stderr}"
    );
    stderr
}

#[test]
fn a_bad_agent_file_names_file_line_and_column() {
    let toren = Toren::new();
    let path = toren.agent(
        "bad",
        "name: bad\nmodel: anthropic/claude-sonnet-5\nsandbox:\n  netwrok: true\n",
    );
    let stderr = fails_with_2(&toren, "bad");
    assert!(
        stderr.starts_with(&format!("{}:4:3: error: ", path.display())),
        "{stderr}"
    );
    assert!(stderr.contains("netwrok"), "{stderr}");

    let path = toren.agent("model", "name: model\nmodel: claude\n");
    let stderr = fails_with_2(&toren, "model");
    assert!(
        stderr.contains(&format!("{}:2:8", path.display())),
        "{stderr}"
    );
    assert!(stderr.contains("provider/model-id"), "{stderr}");

    let check = toren.run(&["check"]);
    assert_eq!(check.status.code(), Some(2));
    let stderr = text(&check.stderr);
    assert!(
        stderr.contains("bad.yaml:4:3") && stderr.contains("model.yaml:2:8"),
        "{stderr}"
    );
}

#[test]
fn check_passes_on_good_files() {
    let toren = Toren::new();
    toren.agent(
        "good",
        "name: good\nmodel: anthropic/claude-sonnet-5\nsandbox: true\n",
    );
    let out = toren.run(&["check"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let examples = concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples");
    let out = toren.run(&[
        "check",
        &format!("{examples}/hello-sandbox/agent.yaml"),
        &format!("{examples}/coder/agent.yaml"),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}

#[test]
fn an_unknown_agent_says_where_it_looked() {
    let toren = Toren::new();
    toren.agent("present", "name: present\nmodel: anthropic/x\n");
    let stderr = fails_with_2(&toren, "absent");
    assert!(
        stderr.contains("absent") && stderr.contains("present"),
        "{stderr}"
    );
}

#[test]
fn a_missing_api_key_names_the_variable() {
    let toren = Toren::new();
    toren.agent("claude", "name: claude\nmodel: anthropic/claude-sonnet-5\n");
    let stderr = fails_with_2(&toren, "claude");
    assert!(stderr.contains("ANTHROPIC_API_KEY"), "{stderr}");
    toren.agent("gpt", "name: gpt\nmodel: openai/gpt-5\n");
    let stderr = fails_with_2(&toren, "gpt");
    assert!(stderr.contains("OPENAI_API_KEY"), "{stderr}");
}

#[test]
fn an_unknown_sandbox_backend_fails_at_startup() {
    let toren = Toren::new().env("TOREN_SANDBOX", "kubernetes");
    toren.file("s.yaml", "turns: []\n");
    toren.agent("a", "name: a\nmodel: scripted/s.yaml\nsandbox: true\n");
    let stderr = fails_with_2(&toren, "a");
    assert!(
        stderr.contains("TOREN_SANDBOX")
            && stderr.contains("kubernetes")
            && stderr.contains("local"),
        "{stderr}"
    );
    // Every command checks it, not only `run`.
    let out = toren.run(&["runs", "list"]);
    assert_eq!(out.status.code(), Some(2));
}

#[test]
fn a_sandbox_agent_fails_fast_when_sandboxes_are_disabled() {
    let toren = Toren::new().env("TOREN_SANDBOX", "none");
    toren.file("s.yaml", "turns: []\n");
    toren.agent("a", "name: a\nmodel: scripted/s.yaml\nsandbox: true\n");
    let stderr = fails_with_2(&toren, "a");
    assert!(
        stderr.contains("TOREN_SANDBOX=none") && stderr.contains("TOREN_SANDBOX=local"),
        "{stderr}"
    );
    // An agent without a sandbox still runs.
    toren.agent("b", "name: b\nmodel: scripted/s.yaml\n");
    let out = toren.run(&["run", "b", "--input", "hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
}
