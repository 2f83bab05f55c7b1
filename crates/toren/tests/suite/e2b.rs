//! The e2b backend through the real `toren` binary, against the local E2B server of
//! `toren-test-support` (E2B_API_URL / E2B_SANDBOX_URL point at it): scripted work with
//! bash and the file tools completes in the VM and its sandbox is killed at the end; no
//! runtime credential ever reaches envd; a `toren` SIGKILLed mid-command is resumed by
//! another process, which reconnects to the same sandbox id (in the log and on the
//! server) and finds its files; a sandbox killed behind Toren's back leads to a new one,
//! a completed run and a stated loss, with the files the log knows exactly restored.

use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::Value;
use toren_test_support::e2b::{ENVD_VERSION, FakeE2b, Faults};

use super::common::{Toren, read, text};
use super::scripted::{WORK_AGENT, WORK_SCRIPT};

const KEY: &str = "e2b_00112233445566778899aabbccddeeff";

fn e2b_home(fake: &FakeE2b) -> Toren {
    Toren::new()
        .env("TOREN_SANDBOX", "auto")
        .env("E2B_API_KEY", KEY)
        .env("E2B_API_URL", &fake.api_url())
        .env("E2B_SANDBOX_URL", &fake.sandbox_url())
        .env("ANTHROPIC_API_KEY", "sk-ant-never-sent")
}

fn provisioned(events: &[Value]) -> Vec<String> {
    events
        .iter()
        .filter(|e| e["type"] == "sandbox_provisioned")
        .map(|e| {
            assert_eq!(e["backend"], "e2b");
            // The envd version E2B reported for the sandbox, as the fake reports it.
            assert_eq!(e["envd_version"], ENVD_VERSION);
            e["instance"].as_str().unwrap().to_owned()
        })
        .collect()
}

fn kill9(child: &mut std::process::Child) {
    let _ = child.kill();
    let _ = child.wait();
}

#[test]
fn scripted_work_completes_in_an_e2b_sandbox_and_no_credential_reaches_it() {
    let fake = FakeE2b::start(KEY).unwrap();
    // Every runtime credential this process holds, none of which may reach E2B.
    let credentials = [
        ("ANTHROPIC_API_KEY", "sk-ant-never-sent"),
        ("OPENAI_API_KEY", "sk-openai-never-sent"),
        ("TOREN_API_TOKEN", "toren-token-never-sent"),
        ("TELEGRAM_BOT_TOKEN", "123456:telegram-never-sent"),
    ];
    let toren = credentials
        .iter()
        .fold(e2b_home(&fake), |toren, (name, value)| {
            toren.env(name, value)
        });
    toren.file("work.yaml", WORK_SCRIPT);
    toren.agent("worker", WORK_AGENT);
    let out = toren.run(&["run", "worker", "--input", "do the work"]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "All done.\n");
    let run = toren.newest_run().unwrap();
    let events = toren.events(&run);
    assert_eq!(events[0]["policy"]["backend"], "e2b", "auto picked e2b");
    let ids = provisioned(&events);
    assert_eq!(ids.len(), 1, "{ids:?}");
    let last_bash = events
        .iter()
        .find(|e| e["type"] == "tool_completed" && e["call_id"] == "call_5")
        .unwrap();
    assert_eq!(last_bash["exit_code"], 3);
    assert_eq!(
        last_bash["output"],
        "one\nTWO\nthree\nbuilt\n[exit code: 3]"
    );
    assert_eq!(
        fake.sandboxes(),
        Vec::<String>::new(),
        "killed at the run's end"
    );
    assert_eq!(fake.calls("kill"), 1);
    // Every request either plane received: commands (Process/Start bodies, envs
    // included), file uploads and the create body (metadata; no envVars are sent).
    let requests = fake.requests();
    assert!(
        requests
            .iter()
            .any(|r| r.method == "POST" && r.uri.starts_with("/files"))
    );
    for request in requests {
        let text = request.text();
        for (name, value) in credentials {
            assert!(!text.contains(value), "{name} reached E2B: {text}");
        }
        // The E2B key goes to the control plane as its X-API-Key header, nowhere else.
        assert!(!request.body.contains(KEY), "the E2B key in a body: {text}");
        if request.plane == "envd" {
            assert!(!text.contains(KEY), "the E2B key reached a sandbox: {text}");
            // No deadline of E2B's for a command (the SDKs' 60 s trap): Toren's own
            // timeout kills it.
            assert!(
                !request
                    .headers
                    .iter()
                    .any(|(name, _)| name.eq_ignore_ascii_case("connect-timeout-ms")),
                "{text}"
            );
        }
    }
}

const LONG_COMMAND: &str = r#"
turns:
  - tool_calls:
      - write_file: {path: kept.txt, content: "made before the crash\n"}
  - tool_calls:
      - bash: {command: "echo start >> starts.txt; sleep 5; cat kept.txt starts.txt"}
  - text: "went on"
"#;

/// Waits until the sandbox's `starts.txt` has `lines` lines.
fn wait_for_starts(fake: &FakeE2b, lines: usize) -> String {
    let deadline = Instant::now() + Duration::from_secs(30);
    loop {
        for id in fake.sandboxes() {
            let disk = fake.disk(&id).unwrap();
            let starts = std::fs::read_to_string(disk.workspace().join("starts.txt"));
            if starts.unwrap_or_default().lines().count() >= lines {
                return id;
            }
        }
        assert!(Instant::now() < deadline, "the command never started");
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// A run of `LONG_COMMAND` (agent `k`, no approvals) whose toren was SIGKILLed while its
/// command ran in the sandbox: the fake, the home, the run and the sandbox's id.
fn killed_mid_command() -> (FakeE2b, Toren, String, String) {
    let fake = FakeE2b::start(KEY).unwrap();
    let toren = e2b_home(&fake);
    toren.file("s.yaml", LONG_COMMAND);
    toren.agent(
        "k",
        "name: k\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    let mut child = toren.spawn(&["run", "k", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "running");
    let id = wait_for_starts(&fake, 1);
    kill9(&mut child);
    (fake, toren, run, id)
}

#[test]
fn a_killed_toren_is_resumed_in_the_same_sandbox() {
    let (fake, toren, run, id) = killed_mid_command();
    assert_eq!(
        fake.sandboxes(),
        vec![id.clone()],
        "the sandbox outlives its worker"
    );

    let out = toren.run(&["resume", &run]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "went on\n");
    let events = toren.events(&run);
    assert_eq!(
        provisioned(&events),
        vec![id.clone(), id.clone()],
        "one sandbox, reconnected"
    );
    // The resuming process says it reconnected: in the log, and on the operator's screen.
    let reconnected = events
        .iter()
        .rfind(|e| e["type"] == "sandbox_provisioned")
        .unwrap();
    assert_eq!(
        reconnected["origin"],
        serde_json::json!({"kind": "reconnected"})
    );
    assert!(
        stderr.contains(&format!("reconnected to e2b sandbox {id} (same disk)")),
        "{stderr}"
    );
    let done = events
        .iter()
        .rfind(|e| e["type"] == "tool_completed")
        .unwrap();
    // Same disk: the file written before the crash, and the first attempt's line.
    assert!(
        done["output"]
            .as_str()
            .unwrap()
            .ends_with("made before the crash\nstart\nstart\n[exit code: 0]"),
        "{done}"
    );
    assert_eq!(fake.calls("create"), 1);
    // On the server: the resuming process connected to that very sandbox, and only to it.
    let connects: Vec<String> = fake
        .requests()
        .into_iter()
        .filter(|r| r.plane == "control" && r.method == "POST" && r.uri.ends_with("/connect"))
        .map(|r| r.uri)
        .collect();
    assert!(
        !connects.is_empty()
            && connects
                .iter()
                .all(|uri| *uri == format!("/sandboxes/{id}/connect")),
        "{connects:?}"
    );
    assert_eq!(fake.sandboxes(), Vec::<String>::new());
}

#[test]
fn a_worker_elsewhere_that_finds_the_sandbox_gone_restores_from_the_log() {
    let (fake, toren, run, id) = killed_mid_command();
    // The sandbox dies with its worker, and the resuming one runs on another machine: no
    // note of this machine's names the sandbox, only the run's log.
    assert!(fake.kill(&id));
    std::fs::remove_file(toren.workspace(&run).join(".toren-e2b-sandbox")).unwrap();

    let out = toren.run(&["resume", &run]);
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    let events = toren.events(&run);
    let ids = provisioned(&events);
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], id);
    let replaced = events
        .iter()
        .rfind(|e| e["type"] == "sandbox_provisioned")
        .unwrap();
    // The interrupted command had not ended: it runs again, over the restored file.
    assert_eq!(
        replaced["origin"],
        serde_json::json!({"kind": "replaced", "previous": id, "restored": ["kept.txt"], "not_restored": []})
    );
    let done = events
        .iter()
        .rfind(|e| e["type"] == "tool_completed")
        .unwrap();
    let output = done["output"].as_str().unwrap();
    assert!(
        output.contains(&format!("the E2B sandbox `{id}` is gone"))
            && output.ends_with("made before the crash\nstart\n[exit code: 0]"),
        "{output}"
    );
    assert!(
        stderr.contains("restored from the log: kept.txt"),
        "{stderr}"
    );
    // `runs show` names how the run's current sandbox came to be.
    let shown = toren.run(&["runs", "show", &run]);
    assert!(
        text(&shown.stdout).contains(&format!(
            "instance   the e2b sandbox {id} is gone and its workspace lost; new sandbox {}; \
             restored from the log: kept.txt\n",
            ids[1]
        )),
        "{}",
        text(&shown.stdout)
    );
}

const TWO_COMMANDS: &str = r#"
turns:
  - tool_calls:
      - bash: {command: "echo first > first.txt; sleep 3"}
  - tool_calls:
      - bash: {command: "ls"}
  - text: "finished"
"#;

#[test]
fn a_sandbox_killed_behind_torens_back_is_replaced_and_the_loss_stated() {
    let fake = FakeE2b::start(KEY).unwrap();
    let toren = e2b_home(&fake);
    toren.file("s.yaml", TWO_COMMANDS);
    toren.agent(
        "t",
        "name: t\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    let mut child = toren.spawn(&["run", "t", "--input", "go"]);
    let run = toren.wait_for_status(&mut child, "running");
    let deadline = Instant::now() + Duration::from_secs(30);
    let old = loop {
        let ids = fake.sandboxes();
        if let Some(id) = ids.first()
            && fake
                .disk(id)
                .unwrap()
                .workspace()
                .join("first.txt")
                .exists()
        {
            break id.clone();
        }
        assert!(Instant::now() < deadline, "the first command never ran");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(fake.kill(&old));
    let status = child.wait().unwrap();
    assert!(status.success());
    let events = toren.events(&run);
    assert_eq!(events.last().unwrap()["type"], "run_completed");
    let ids = provisioned(&events);
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], old);
    assert_ne!(ids[1], old);
    let outputs: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "tool_completed")
        .map(|e| e["output"].as_str().unwrap())
        .collect();
    assert!(
        outputs[0].contains("went away while this command ran"),
        "{outputs:?}"
    );
    assert!(
        outputs[1].contains(&format!("the E2B sandbox `{old}` is gone")),
        "{outputs:?}"
    );
    // The log says the workspace was lost; no file tool wrote anything to restore.
    let replaced = events
        .iter()
        .rfind(|e| e["type"] == "sandbox_provisioned")
        .unwrap();
    assert_eq!(
        replaced["origin"],
        serde_json::json!({"kind": "replaced", "previous": old, "restored": [], "not_restored": []})
    );
}

const FILES_THEN_PAUSE: &str = r#"
turns:
  - tool_calls:
      - write_file: {path: b.txt, content: "before bash\n"}
  - tool_calls:
      - bash: {command: "echo more >> b.txt"}
  - tool_calls:
      - write_file: {path: a.txt, content: "alpha\nbeta\n"}
  - tool_calls:
      - edit_file: {path: a.txt, old_string: beta, new_string: BETA}
  - tool_calls:
      - write_file: {path: c/d.txt, content: "nested\n"}
  - delay_ms: 4000
    tool_calls:
      - bash: {command: "cat a.txt c/d.txt; ls"}
  - text: "finished"
"#;

#[test]
fn a_lost_sandbox_gets_back_the_files_the_log_knows_and_the_rest_is_listed_as_lost() {
    let fake = FakeE2b::start(KEY).unwrap();
    let toren = e2b_home(&fake);
    toren.file("s.yaml", FILES_THEN_PAUSE);
    toren.agent(
        "r",
        "name: r\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    let child = toren.spawn(&["run", "r", "--input", "go"]);
    // Killed once the file tools' last write is on its disk, while the model "thinks".
    let deadline = Instant::now() + Duration::from_secs(30);
    let old = loop {
        if let Some(id) = fake.sandboxes().first()
            && fake.disk(id).unwrap().workspace().join("c/d.txt").exists()
        {
            break id.clone();
        }
        assert!(Instant::now() < deadline, "the file tools never wrote");
        std::thread::sleep(Duration::from_millis(20));
    };
    assert!(fake.kill(&old));
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_eq!(text(&out.stdout), "finished\n");
    let run = toren.newest_run().unwrap();
    let events = toren.events(&run);
    let ids = provisioned(&events);
    assert_eq!(ids.len(), 2, "{ids:?}");
    assert_eq!(ids[0], old);
    let new = ids[1].clone();
    assert_ne!(new, old);
    // The log: the loss, what was restored, and what was not and why.
    let replaced = events
        .iter()
        .rfind(|e| e["type"] == "sandbox_provisioned")
        .unwrap();
    assert_eq!(
        replaced["origin"],
        serde_json::json!({
            "kind": "replaced",
            "previous": old,
            "restored": ["a.txt", "c/d.txt"],
            "not_restored": [{"path": "b.txt", "why": "a bash command ran after its last write"}],
        })
    );
    // The new sandbox's disk: the restored files with their exact bytes, b.txt not there.
    let disk = fake.disk(&new).unwrap().workspace();
    assert_eq!(read(&disk.join("a.txt")), "alpha\nBETA\n");
    assert_eq!(read(&disk.join("c/d.txt")), "nested\n");
    assert!(!disk.join("b.txt").exists());
    // The model's result: the loss note, then the command's output over the restored files.
    let last = events
        .iter()
        .rfind(|e| e["type"] == "tool_completed")
        .unwrap();
    let output = last["output"].as_str().unwrap();
    assert!(
        output.contains(&format!("the E2B sandbox `{old}` is gone"))
            && output.contains(
                "Restored from the log, as the file tools last wrote them: `a.txt`, `c/d.txt`"
            )
            && output.contains("Not restored: `b.txt` (a bash command ran after its last write)")
            && output.ends_with("alpha\nBETA\nnested\na.txt\nc\n[exit code: 0]"),
        "{output}"
    );
    // The operator's screen.
    assert!(
        stderr.contains(&format!(
            "the e2b sandbox {old} is gone and its workspace lost; new sandbox {new}; restored \
             from the log: a.txt, c/d.txt; not restored: b.txt (a bash command ran after its \
             last write)"
        )),
        "{stderr}"
    );
}

fn chat(toren: &Toren, args: &[&str], input: &str) -> std::process::Output {
    use std::io::Write as _;
    let mut child = toren
        .command(args)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    child.wait_with_output().unwrap()
}

fn answer(text: &str, call: Option<(&str, Value)>) -> toren_protocol::AssistantMessage {
    toren_protocol::AssistantMessage {
        text: text.to_owned(),
        tool_calls: call
            .map(|(name, args)| toren_protocol::ToolCall::new(format!("toolu_{name}"), name, args))
            .into_iter()
            .collect(),
    }
}

#[test]
fn a_sessions_sandbox_is_paused_between_turns_resumed_for_the_next_and_killed_with_it() {
    use toren_test_support::{FakeAnthropic, Reply};
    let model = FakeAnthropic::start(Reply::turns(vec![
        answer(
            "",
            Some((
                "write_file",
                serde_json::json!({"path": "notes.txt", "content": "day one\n"}),
            )),
        ),
        answer("I wrote notes.txt.", None),
        answer(
            "",
            Some(("bash", serde_json::json!({"command": "cat notes.txt"}))),
        ),
        answer("It says: day one.", None),
    ]))
    .unwrap();
    let fake = FakeE2b::start(KEY).unwrap();
    let toren = e2b_home(&fake)
        .env("ANTHROPIC_API_KEY", "k")
        .env("ANTHROPIC_BASE_URL", &model.base_url());
    toren.agent(
        "claude",
        "name: claude\nmodel: anthropic/claude-sonnet-5\nsandbox:\n  approval: never\n",
    );
    let out = chat(&toren, &["chat", "s", "--agent", "claude"], "make a note\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "I wrote notes.txt.\n");
    let ids = fake.sandboxes();
    assert_eq!(ids.len(), 1);
    assert_eq!(fake.paused(&ids[0]), Some(true), "paused between turns");
    let disk = fake.disk(&ids[0]).unwrap();
    assert_eq!(read(&disk.workspace().join("notes.txt")), "day one\n");

    let out = chat(&toren, &["chat", "s"], "read it\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "It says: day one.\n");
    assert_eq!(fake.sandboxes(), ids, "the same sandbox, resumed");
    assert_eq!(fake.paused(&ids[0]), Some(true));
    assert_eq!(fake.calls("create"), 1);

    let out = toren.run(&["sessions", "rm", "s"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        fake.sandboxes(),
        Vec::<String>::new(),
        "killed with the session"
    );
}

#[test]
fn the_reaper_kills_sandboxes_of_finished_runs_and_leaves_live_ones() {
    // A run killed mid-command: live, its sandbox waits for a resume.
    let (fake, toren, run, live) = killed_mid_command();
    let out = toren.run(&["sandbox", "reap"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        fake.sandboxes(),
        vec![live.clone()],
        "a live run's sandbox stays"
    );
    // Cancelled, the run is finished: its sandbox goes at the next sweep.
    let out = toren.run(&["cancel", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let out = toren.run(&["sandbox", "reap", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("would kill: {live} (run {run}): its run is finished\n")
    );
    assert_eq!(fake.sandboxes(), vec![live.clone()]);
    let out = toren.run(&["sandbox", "reap"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("killed: {live} (run {run}): its run is finished\n")
    );
    assert_eq!(fake.sandboxes(), Vec::<String>::new());
}

#[test]
fn a_live_sessions_paused_sandbox_is_kept_by_the_reaper_and_a_removed_ones_reaped() {
    use toren_test_support::{FakeAnthropic, Reply};
    let model = FakeAnthropic::start(Reply::turns(vec![
        answer(
            "",
            Some((
                "write_file",
                serde_json::json!({"path": "notes.txt", "content": "day one\n"}),
            )),
        ),
        answer("I wrote notes.txt.", None),
    ]))
    .unwrap();
    let fake = FakeE2b::start(KEY).unwrap();
    let toren = e2b_home(&fake)
        .env("ANTHROPIC_API_KEY", "k")
        .env("ANTHROPIC_BASE_URL", &model.base_url());
    toren.agent(
        "claude",
        "name: claude\nmodel: anthropic/claude-sonnet-5\nsandbox:\n  approval: never\n",
    );
    let out = chat(&toren, &["chat", "s", "--agent", "claude"], "make a note\n");
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let ids = fake.sandboxes();
    assert_eq!(ids.len(), 1);
    let id = ids[0].clone();
    assert_eq!(fake.paused(&id), Some(true));
    let turn = fake.metadata(&id).unwrap()["toren_run"].clone();

    // The session lives: its paused sandbox stays, though the turn that made it finished.
    let out = toren.run(&["sandbox", "reap"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "");
    assert_eq!(
        fake.sandboxes(),
        vec![id.clone()],
        "a live session's sandbox"
    );

    // Removed while E2B could not be reached: the session goes, its sandbox is left.
    fake.set_faults(Faults {
        control_down: true,
        ..Faults::default()
    });
    let out = toren.run(&["sessions", "rm", "s"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    fake.set_faults(Faults::default());
    assert_eq!(fake.sandboxes(), vec![id.clone()], "left behind");

    // The reaper collects it: the store knows its turn, not its session.
    let out = toren.run(&["sandbox", "reap", "--dry-run"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("would kill: {id} (run {turn}): its session was removed\n")
    );
    assert_eq!(fake.sandboxes(), vec![id.clone()]);
    let out = toren.run(&["sandbox", "reap"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(
        text(&out.stdout),
        format!("killed: {id} (run {turn}): its session was removed\n")
    );
    assert_eq!(fake.sandboxes(), Vec::<String>::new());
    assert!(fake.is_gone(&id));
}

const ONE_COMMAND: &str = r#"
turns:
  - tool_calls:
      - bash: {command: "echo made > made.txt; cat made.txt"}
  - text: "done"
"#;

#[test]
fn a_run_e2b_has_no_room_for_waits_instead_of_failing_and_resumes_once_it_has() {
    let fake = FakeE2b::start(KEY).unwrap();
    let toren = e2b_home(&fake);
    toren.file("s.yaml", ONE_COMMAND);
    toren.agent(
        "w",
        "name: w\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    // E2B's concurrency limit for longer than the backend's backoff (7 tries, ~16 s).
    let limit = "maximum number of concurrent E2B sandboxes (20) reached".to_owned();
    fake.set_faults(Faults {
        create_errors: vec![(429, limit); 7],
        ..Faults::default()
    });
    let out = toren.run(&["run", "w", "--input", "go"]);
    let stderr = text(&out.stderr);
    assert_ne!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("E2B refused to start another sandbox (429)")
            && stderr.contains("is kept as it is: resume it with `toren resume"),
        "{stderr}"
    );
    let run = toren.newest_run().unwrap();
    let events = toren.events(&run);
    assert!(
        events.iter().all(|e| e["type"] != "run_failed"),
        "the run waits, it is not failed: {events:?}"
    );
    assert_eq!(fake.sandboxes(), Vec::<String>::new());

    // E2B has room again: the same run goes on and completes.
    let out = toren.run(&["resume", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "done\n");
    let events = toren.events(&run);
    assert_eq!(events.last().unwrap()["type"], "run_completed");
    assert_eq!(provisioned(&events).len(), 1);
    let done = events
        .iter()
        .find(|e| e["type"] == "tool_completed")
        .unwrap();
    assert_eq!(done["output"], "made\n[exit code: 0]");
}

/// A run whose workspace starts as a copy of a project (`--workspace-from`): its sandbox
/// has the project in `/workspace` (history, links and all) before the first command, and
/// a sandbox replacing a lost one gets it again.
#[test]
fn an_e2b_sandbox_starts_with_the_project_the_run_was_given() {
    let fake = FakeE2b::start(KEY).unwrap();
    let toren = e2b_home(&fake).env("TOREN_SANDBOX", "e2b");
    let project = toren.dir.path().join("project");
    std::fs::create_dir_all(project.join("src")).unwrap();
    std::fs::write(project.join("src/hello.txt"), "hello from the project\n").unwrap();
    std::os::unix::fs::symlink("src/hello.txt", project.join("link")).unwrap();
    toren.file(
        "look-turns.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"cat link && ls -l src/hello.txt | cut -c1-10\"}\n  - text: \"seen\"\n",
    );
    toren.agent(
        "look",
        "name: look\nmodel: scripted/look-turns.yaml\nsandbox:\n  approval: never\n",
    );
    let out = toren.run(&[
        "run",
        "look",
        "look",
        "--workspace-from",
        &project.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run = toren.newest_run().unwrap();
    let events = toren.events(&run);
    assert_eq!(events[0]["start"]["seeded"]["files"], 3);
    let done = events
        .iter()
        .find(|e| e["type"] == "tool_completed")
        .unwrap();
    let output = done["output"].as_str().unwrap();
    assert!(output.contains("hello from the project"), "{done}");
    assert!(output.contains("-rw-"), "{done}");
}
