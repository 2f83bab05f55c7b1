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

#[test]
fn check_reports_every_error_of_every_file_in_a_directory() {
    let toren = Toren::new();
    let dir = toren.dir.path().join("mine");
    let write = |name: &str, text: &str| {
        let path = dir.join(name);
        std::fs::create_dir_all(path.parent().unwrap()).unwrap();
        std::fs::write(&path, text).unwrap();
    };
    // Two problems in one file: both are reported, each at its line and column.
    write(
        "two.yaml",
        "name: two\nmodel: anthropic/m\nmax_turns: 0\nsandbox:\n  approval: sometimes\n",
    );
    // Unknown keys stop the YAML parser; each is reported all the same, and the checks after.
    write(
        "keys.yaml",
        "name: keys\nmodel: anthropic/m\ntools: [bash]\nsandbox:\n  netwrok: true\n  image: ''\n",
    );
    // Found by its file name, so it must carry that name (as `toren run NAME` demands).
    write("named.yaml", "name: other\nmodel: anthropic/m\n");
    // What `toren run` would fail on: a script that is not there, or not a script.
    write(
        "absent.yaml",
        "name: absent\nmodel: scripted/scripts/none.yaml\n",
    );
    write(
        "broken.yaml",
        "name: broken\nmodel: scripted/scripts/broken.yaml\n",
    );
    write("scripts/broken.yaml", "turns: 5\n");
    // A script beside its agent is that agent's, not an agent file: left out.
    write("beside.yaml", "name: beside\nmodel: scripted/turns.yaml\n");
    write("turns.yaml", "turns:\n  - text: hi\n");
    // Right, though this machine has no key for its model: a warning, not an error.
    write(
        "good/agent.yaml",
        "name: good\nmodel: anthropic/claude-sonnet-5\n",
    );

    let out = toren.run(&["check", &dir.display().to_string()]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    let at = |file: &str| format!("{}:", dir.join(file).display());
    for expected in [
        format!("{}3:12: error: `max_turns`", at("two.yaml")),
        format!("{}5:13: error: `approval`", at("two.yaml")),
        format!("{}3:1: error: unknown key `tools`", at("keys.yaml")),
        format!("{}5:3: error: unknown key `netwrok`", at("keys.yaml")),
        format!("{}6:10: error: `image` is empty", at("keys.yaml")),
        format!(
            "{}1:7: error: the agent in this file is named `other`",
            at("named.yaml")
        ),
        format!("{}2:8: error: the scripted model's file", at("absent.yaml")),
        format!("{} error: scripted model file", at("broken.yaml")),
        format!("ok: {}", dir.join("good/agent.yaml").display()),
        "5 of 7 agent files have errors".to_owned(),
        format!("ok: {}", dir.join("beside.yaml").display()),
        format!("skipped: {}", dir.join("turns.yaml").display()),
    ] {
        assert!(
            stderr.contains(&expected),
            "missing {expected:?} in:\n{stderr}"
        );
    }
    assert!(
        stderr.contains("warning: ") && stderr.contains("ANTHROPIC_API_KEY"),
        "{stderr}"
    );
    assert!(out.stdout.is_empty(), "verdicts are for people: stderr");

    // A file given by its path may carry any name, as `toren run PATH` allows.
    let out = toren.run(&["check", &dir.join("named.yaml").display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));

    let empty = toren.dir.path().join("empty");
    std::fs::create_dir_all(&empty).unwrap();
    let out = toren.run(&["check", &empty.display().to_string()]);
    assert_eq!(out.status.code(), Some(2));
    assert!(
        text(&out.stderr).contains("no agent files in"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn deploy_aws_without_credentials_says_why_in_one_line() {
    let toren = Toren::new()
        .env("E2B_API_KEY", "e2b-test")
        .env("AWS_REGION", "us-east-1")
        // Nowhere to send anything, and no instance role to ask for.
        .env("AWS_ENDPOINT_URL", "http://127.0.0.1:9")
        .env("AWS_EC2_METADATA_DISABLED", "true");
    for args in [
        &[
            "deploy-aws",
            "--image",
            "img",
            "--certificate-arn",
            "arn:cert",
        ][..],
        &["deploy-aws", "--delete"][..],
    ] {
        let out = toren.run(args);
        let stderr = text(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{stderr}");
        assert_eq!(
            stderr.lines().count(),
            1,
            "one line, no SDK dumps: {stderr}"
        );
        assert!(
            stderr.starts_with("error: no AWS credentials: "),
            "{stderr}"
        );
        assert!(stderr.contains("AWS_ACCESS_KEY_ID"), "{stderr}");
        assert!(!stderr.contains('{'), "no Debug forms: {stderr}");
    }
}

#[test]
fn telegram_with_an_agent_that_does_not_exist_fails_at_start() {
    let toren = Toren::new()
        .env("TELEGRAM_BOT_TOKEN", "123456:never-sent")
        .env("TELEGRAM_API_URL", "http://127.0.0.1:9")
        .env("TOREN_TELEGRAM_USERS", "111")
        .env("TOREN_TELEGRAM_AGENT", "helper");
    toren.agent("other", "name: other\nmodel: anthropic/m\n");
    let mut child = toren.spawn(&["telegram"]);
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(20);
    while child.try_wait().unwrap().is_none() {
        if std::time::Instant::now() > deadline {
            child.kill().unwrap();
            panic!("toren telegram kept running with an agent that does not exist");
        }
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(2), "{stderr}");
    assert!(
        stderr.contains("TOREN_TELEGRAM_AGENT is `helper`")
            && stderr.contains(&toren.agents().display().to_string())
            && stderr.contains("other"),
        "names the agent, the agents directory and what is there: {stderr}"
    );
}
