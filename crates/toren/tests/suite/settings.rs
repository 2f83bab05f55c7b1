//! Settings reach the runtime from the environment through the one registry, and nowhere
//! else: the lease's length, `max_tokens`, who is recorded as deciding an approval, and
//! `TOREN_LOG`; a value that does not parse stops every command with exit status 2.

use std::time::Duration;

use pretty_assertions::assert_eq;
use serde_json::Value;
use toren_protocol::AssistantMessage;
use toren_test_support::{FakeAnthropic, Reply};

use super::common::{Toren, text};
use super::pty::Terminal;

/// Two bash calls, each waiting for a decision (`sandbox: true` asks before bash runs).
const TWO_CALLS: &str = r#"
turns:
  - tool_calls:
      - bash: {command: "echo one"}
      - bash: {command: "echo two"}
  - text: "finished"
"#;

fn careful(toren: &Toren) {
    toren.file("s.yaml", TWO_CALLS);
    toren.agent(
        "careful",
        "name: careful\nmodel: scripted/s.yaml\nsandbox: true\n",
    );
}

/// `(call_id, by)` of every `approval_decided`, in order.
fn deciders(events: &[Value]) -> Vec<(String, String)> {
    events
        .iter()
        .filter(|e| e["type"] == "approval_decided")
        .map(|e| {
            (
                e["call_id"].as_str().unwrap().to_owned(),
                e["by"].as_str().unwrap().to_owned(),
            )
        })
        .collect()
}

/// Waits until the run has requested approval of `call`.
fn wait_for_request(toren: &Toren, run: &str, call: &str) {
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    while !toren
        .events(run)
        .iter()
        .any(|e| e["type"] == "approval_requested" && e["call_id"] == call)
    {
        assert!(
            std::time::Instant::now() < deadline,
            "{call} never asked for"
        );
        std::thread::sleep(Duration::from_millis(50));
    }
}

#[test]
fn approve_and_deny_record_user_else_logname() {
    let toren = Toren::new();
    careful(&toren);
    let mut child = toren.spawn(&["run", "careful", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");

    let approve = toren
        .command(&["approve", &run, "call_1"])
        .env("USER", "grace")
        .env("LOGNAME", "hopper")
        .output()
        .unwrap();
    assert_eq!(approve.status.code(), Some(0), "{}", text(&approve.stderr));
    wait_for_request(&toren, &run, "call_2");
    // No USER (as under some cron daemons and `env -i`): the login name is recorded.
    let deny = toren
        .command(&["deny", &run, "call_2"])
        .env("LOGNAME", "ada")
        .output()
        .unwrap();
    assert_eq!(deny.status.code(), Some(0), "{}", text(&deny.stderr));

    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        deciders(&toren.events(&run)),
        [
            ("call_1".to_owned(), "grace".to_owned()),
            ("call_2".to_owned(), "ada".to_owned())
        ]
    );
}

#[test]
fn a_decision_by_nobody_named_says_so_and_a_reason_reaches_the_model_as_a_sentence() {
    // Neither USER nor LOGNAME (the harness clears the environment), as in a bare container.
    let toren = Toren::new();
    careful(&toren);
    let mut child = toren.spawn(&["run", "careful", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    wait_for_request(&toren, &run, "call_1");
    let out = toren.run(&["approve", &run, "call_1"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    wait_for_request(&toren, &run, "call_2");
    let deny = ["deny", &run, "call_2", "--reason", "do not delete files"];
    let out = toren.run(&deny);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let events = toren.events(&run);
    // The model is told the reason as a sentence of its own.
    let told = events
        .iter()
        .find(|e| e["type"] == "tool_completed" && e["call_id"] == "call_2")
        .map(|e| e["output"].as_str().unwrap().to_owned());
    assert_eq!(
        told.as_deref(),
        Some(
            "The human denied this command; it did not run. Their reason: do not delete \
             files.\nAdjust your approach."
        )
    );
    let unnamed = "unnamed (no USER or LOGNAME)".to_owned();
    assert_eq!(
        deciders(&events),
        [
            ("call_1".to_owned(), unnamed.clone()),
            ("call_2".to_owned(), unnamed)
        ]
    );
    assert!(
        events
            .iter()
            .filter(|e| e["type"] == "approval_decided")
            .all(|e| e["via"] == "cli")
    );
    let shown = text(&toren.run(&["events", &run]).stdout);
    assert!(
        shown.contains("by unnamed (no USER or LOGNAME) via cli") && !shown.contains("unknown"),
        "{shown}"
    );
}

#[test]
fn the_terminal_prompt_records_the_same_user() {
    let toren = Toren::new().env("LOGNAME", "ada");
    careful(&toren);
    let mut term = Terminal::spawn(&toren, &["run", "careful", "--input", "go"]);
    term.wait_for("approve? [y]es / [n]o: ");
    term.type_keys("y\n");
    term.wait_for("approve? [y]es / [n]o: ");
    term.type_keys("y\n");
    let (status, shown) = term.finish();
    assert_eq!(status.code(), Some(0), "{shown}");
    let run = toren.newest_run().unwrap();
    assert_eq!(
        deciders(&toren.events(&run)),
        [
            ("call_1".to_owned(), "ada".to_owned()),
            ("call_2".to_owned(), "ada".to_owned())
        ]
    );
}

#[test]
fn the_lease_lasts_toren_lease_ttl() {
    let toren = Toren::new().env("TOREN_LEASE_TTL", "10m");
    careful(&toren);
    let mut child = toren.spawn(&["run", "careful", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    let db = toren.dir.path().join("toren").join("toren.db");
    let left = tokio::runtime::Runtime::new().unwrap().block_on(async {
        use toren_store::EventLog;
        let store = toren_store::SqliteStore::open(&format!("sqlite://{}", db.display()))
            .await
            .unwrap();
        let summary = store.run(&run.parse().unwrap()).await.unwrap();
        let lease = summary.lease.expect("the running process holds the lease");
        lease.expires_at.duration_since(jiff::Timestamp::now())
    });
    child.kill().unwrap();
    child.wait().unwrap();
    // Taken or renewed within the last minute, for ten: far beyond the default 30 s.
    assert!(
        left > jiff::SignedDuration::from_secs(9 * 60)
            && left <= jiff::SignedDuration::from_secs(10 * 60),
        "the lease expires in {left:#}"
    );
}

#[test]
fn toren_max_tokens_reaches_the_model() {
    let fake = FakeAnthropic::start(Reply::turns(vec![AssistantMessage {
        text: "hello".into(),
        tool_calls: vec![],
    }]))
    .unwrap();
    let toren = Toren::new()
        .env("ANTHROPIC_API_KEY", "sk-ant-test-key")
        .env("ANTHROPIC_BASE_URL", &fake.base_url())
        .env("TOREN_MAX_TOKENS", "1234");
    toren.agent("claude", "name: claude\nmodel: anthropic/claude-sonnet-5\n");
    let out = toren.run(&["run", "claude", "--input", "hi"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let requests = fake.requests();
    assert_eq!(requests.len(), 1);
    assert_eq!(requests[0].body["max_tokens"], 1234);
}

/// Runs `args` with `name=value` and returns stderr, asserting exit status 2 and that the
/// message names the variable and the value.
fn refused(name: &str, value: &str, args: &[&str]) -> String {
    let toren = Toren::new().env(name, value);
    // An agent that ends at once, so a value wrongly ignored shows as a finished run.
    toren.file("s.yaml", "turns:\n  - text: \"hi\"\n");
    toren.agent("quick", "name: quick\nmodel: scripted/s.yaml\n");
    let out = toren.run(args);
    let stderr = text(&out.stderr);
    assert_eq!(
        out.status.code(),
        Some(2),
        "{name}={value} {args:?}: {stderr}"
    );
    assert!(out.stdout.is_empty(), "{stderr}");
    assert!(
        stderr.starts_with("error: ") && stderr.contains(&format!("{name}={value}")),
        "{stderr}"
    );
    assert_eq!(toren.newest_run(), None, "no run was created");
    stderr
}

#[test]
fn a_bad_value_stops_every_command_naming_the_variable() {
    let stderr = refused("TOREN_LEASE_TTL", "30", &["run", "quick", "--input", "go"]);
    assert!(stderr.contains("`30s`"), "the form it expects: {stderr}");
    refused("TOREN_MAX_TOKENS", "0", &["run", "quick", "--input", "go"]);
    refused("TOREN_APPROVAL_POLL", "soon", &["runs", "list"]);
    // TOREN_LOG is checked before any command runs, and is not silently replaced.
    let stderr = refused(
        "TOREN_LOG",
        "toren=loudest",
        &["run", "quick", "--input", "go"],
    );
    assert!(
        stderr.contains("`warn`"),
        "an example of the form: {stderr}"
    );
    refused("TOREN_LOG", "toren=loudest", &["check"]);
}

/// Every `.rs` file under `dir`, recursively.
fn rust_files(dir: &std::path::Path, found: &mut Vec<std::path::PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, found);
        } else if path.extension().is_some_and(|ext| ext == "rs") {
            found.push(path);
        }
    }
}

#[test]
fn only_wiring_reads_the_environment() {
    // Libraries receive resolved settings, and the binary reads its environment in one
    // place, so that every variable is in the registry (documented, checked, never granted
    // to a sandbox when it is Toren's own).
    let crates = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("..");
    let wiring = crates.join("toren/src/wiring.rs").canonicalize().unwrap();
    let reads = [
        "env::var(",
        "env::var_os(",
        "env::vars(",
        "env::vars_os(",
        "from_env(",
        "from_default_env(",
    ];
    let mut files = Vec::new();
    for entry in std::fs::read_dir(&crates).unwrap() {
        let dir = entry.unwrap().path();
        // The benchmark program is not part of the runtime: it starts `toren` with an
        // environment of its own making (PATH passed on), as a user's shell would.
        if dir.file_name().is_some_and(|name| name == "toren-bench") {
            continue;
        }
        let src = dir.join("src");
        if src.is_dir() {
            rust_files(&src, &mut files);
        }
    }
    assert!(files.len() > 50, "found the sources: {}", files.len());
    let mut offenders = Vec::new();
    for file in files {
        if file.canonicalize().unwrap() == wiring {
            continue;
        }
        let source = std::fs::read_to_string(&file).unwrap();
        for (n, line) in source.lines().enumerate() {
            if reads.iter().any(|read| line.contains(read)) {
                offenders.push(format!("{}:{}: {}", file.display(), n + 1, line.trim()));
            }
        }
    }
    assert_eq!(offenders, Vec::<String>::new());
}
