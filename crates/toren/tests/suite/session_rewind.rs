//! Rewinding a session through the real binary (real bubblewrap sandbox, real SQLite, a
//! fake Anthropic server): a session whose turns create, change and delete files (a git
//! repository and a 20,000-file tree among them; 2,000 where a rewind is killed) goes
//! back with `/undo` in `toren chat` and with `toren rewind SESSION --to STEP` (before a
//! turn, and to a step inside one); each time the workspace is byte for byte the copy the
//! test took at that step, the model is next sent the conversation as it was then, and the
//! chat continues from there. A turn left behind cannot be gone back to; a rewind killed at
//! random points is finished by the next chat; a session whose turn a live chat drives is
//! not rewound.

use std::collections::BTreeMap;
use std::io::Write as _;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::process::{Output, Stdio};

use serde_json::{Value, json};
use toren_protocol::{AssistantMessage, ToolCall};
use toren_test_support::{FakeAnthropic, Reply};

use super::common::{Toren, text};

pub(super) type Tree = BTreeMap<String, (char, u32, Vec<u8>)>;

/// Everything under `root`: path → (kind, mode, content or link target).
pub(super) fn tree(root: &Path) -> Tree {
    let mut out = BTreeMap::new();
    let mut stack = vec![root.to_path_buf()];
    while let Some(dir) = stack.pop() {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            let rel = path.strip_prefix(root).unwrap().display().to_string();
            let meta = std::fs::symlink_metadata(&path).unwrap();
            let mode = meta.mode() & 0o7777;
            if meta.file_type().is_symlink() {
                let target = std::fs::read_link(&path).unwrap();
                out.insert(rel, ('l', 0, target.display().to_string().into_bytes()));
            } else if meta.is_dir() {
                out.insert(rel, ('d', mode, Vec::new()));
                stack.push(path);
            } else {
                out.insert(rel, ('f', mode, std::fs::read(&path).unwrap()));
            }
        }
    }
    out
}

/// Equal trees, naming the first difference when not (20,000 entries are too many to
/// print).
pub(super) fn same(want: &Tree, got: &Tree, when: &str) {
    for (path, entry) in want {
        match got.get(path) {
            None => panic!(
                "{when}: {path} is missing ({} entries against {})",
                got.len(),
                want.len()
            ),
            Some(other) if other != entry => {
                panic!("{when}: {path} differs: {other:?} != {entry:?}")
            }
            Some(_) => {}
        }
    }
    if let Some(extra) = got.keys().find(|k| !want.contains_key(*k)) {
        panic!("{when}: {extra} should not be there");
    }
}

pub(super) fn bash(id: &str, command: &str) -> Reply {
    Reply::Turn(AssistantMessage {
        text: String::new(),
        tool_calls: vec![ToolCall::new(id, "bash", json!({ "command": command }))],
    })
}

/// The first turn's command: a git repository with a commit, files, a binary file, and a
/// tree of `dirs` × 200 files.
pub(super) fn make(dirs: u32) -> String {
    format!(
        "git init -q repo && cd repo && git config user.email t@example.com && \
         git config user.name t && echo one > a && git add a && git commit -qm one && cd .. && \
         mkdir -p docs && echo draft > docs/plan.md && printf '\\000\\001' > data.bin && \
         mkdir tree && cd tree && for d in $(seq 0 {last}); do mkdir d$d; \
         for f in $(seq 0 199); do echo \"$d $f\" > d$d/f$f; done; done",
        last = dirs - 1
    )
}
pub(super) const CHANGE: &str = "cd repo && echo two >> a && git commit -qam two && cd .. && \
    rm data.bin && echo final > docs/plan.md && ln -s docs/plan.md plan && chmod 700 docs && \
    rm -rf tree/d5 && echo changed > tree/d7/f1 && chmod 600 tree/d3/f3";
const WRECK: &str = "rm -rf repo docs tree && echo oops > wreck.txt";

/// `toren cancel RUN` refused because a rewind's restore is due (exit 1, the reason said).
pub(super) fn cancel_refused_restore_due(toren: &Toren, run: &str) {
    let out = toren.run(&["cancel", run]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("not cancelled half done"),
        "{}",
        text(&out.stderr)
    );
}

/// A home whose agent `w` (`agent_file`) talks to `fake`.
pub(super) fn anthropic_toren(fake: &FakeAnthropic, agent_file: &str) -> Toren {
    let toren = Toren::new()
        .env("ANTHROPIC_API_KEY", "k")
        .env("ANTHROPIC_BASE_URL", &fake.base_url());
    toren.agent("w", agent_file);
    toren
}

/// `toren chat NAME` with `input` on stdin (one message per line), to its end.
pub(super) fn chat(toren: &Toren, args: &[&str], input: &str) -> Output {
    let mut child = toren
        .command(args)
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child
        .stdin
        .take()
        .unwrap()
        .write_all(input.as_bytes())
        .unwrap();
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    out
}

pub(super) fn show(toren: &Toren, session: &str) -> Value {
    let out = toren.run(&["sessions", "show", session, "--json"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    serde_json::from_slice(&out.stdout).unwrap()
}

/// The texts the request's user messages carried (inputs and tool results), and the bash
/// commands its assistant messages called, in order.
pub(super) fn sent(request: &Value) -> (Vec<String>, Vec<String>) {
    let (mut said, mut commands) = (Vec::new(), Vec::new());
    for message in request["messages"].as_array().unwrap() {
        let parts = match &message["content"] {
            Value::String(s) => vec![json!({"type": "text", "text": s})],
            Value::Array(parts) => parts.clone(),
            _ => Vec::new(),
        };
        for part in parts {
            match part["type"].as_str() {
                Some("text") if message["role"] == "user" => {
                    said.push(part["text"].as_str().unwrap().to_owned());
                }
                Some("text") => said.push(format!("model: {}", part["text"].as_str().unwrap())),
                Some("tool_use") => {
                    commands.push(part["input"]["command"].as_str().unwrap_or("").to_owned());
                }
                _ => {}
            }
        }
    }
    (said, commands)
}

pub(super) struct Session {
    pub(super) toren: Toren,
    pub(super) fake: FakeAnthropic,
    pub(super) ws: PathBuf,
    /// The workspace after turns 1 and 2 (`after[0]` is the empty one, before turn 1).
    pub(super) after: Vec<Tree>,
}

/// Three turns from three `toren chat` processes: make (a git repository, files, a tree of
/// `dirs` × 200 files), change (a commit, deletes, edits, a symlink, modes), wreck (delete
/// nearly all).
pub(super) fn session(dirs: u32) -> Session {
    let fake = FakeAnthropic::start(vec![
        bash("c1", &make(dirs)),
        Reply::text("made"),
        bash("c2", CHANGE),
        Reply::text("changed"),
        bash("c3", WRECK),
        Reply::text("wrecked"),
    ])
    .unwrap();
    let toren = anthropic_toren(
        &fake,
        "name: w\nmodel: anthropic/claude-sonnet-5\nsandbox:\n  approval: never\n",
    );
    chat(&toren, &["chat", "s", "--agent", "w"], "");
    let ws = PathBuf::from(show(&toren, "s")["workspace"].as_str().unwrap());
    let mut after = vec![tree(&ws)];
    chat(&toren, &["chat", "s"], "turn one: make\n");
    after.push(tree(&ws));
    chat(&toren, &["chat", "s"], "turn two: change\n");
    after.push(tree(&ws));
    chat(&toren, &["chat", "s"], "turn three: wreck\n");
    assert!(ws.join("wreck.txt").exists());
    assert!(after[1].contains_key("repo/.git/HEAD") && after[2].contains_key("plan"));
    assert!(
        after[1].len() > dirs as usize * 200,
        "{} entries",
        after[1].len()
    );
    Session {
        toren,
        fake,
        ws,
        after,
    }
}

#[test]
fn a_session_goes_back_by_undo_and_by_step_with_its_workspace_and_conversation() {
    let Session {
        toren,
        fake,
        ws,
        after,
    } = session(100);
    let make = make(100);

    // Each turn took a checkpoint before it began, named in its run_created.
    let turns = show(&toren, "s")["turns"].as_array().unwrap().clone();
    assert_eq!(turns.len(), 3);
    for turn in &turns {
        let run = turn["run"].as_str().unwrap();
        let created = &toren.events(run)[0];
        assert!(
            created["start"]["checkpoint"].is_string(),
            "turn {}: {created}",
            turn["turn"]
        );
    }

    // /undo in the chat: back to before turn 3; the next message continues from turn 2.
    fake.push(Reply::text("after the undo"));
    let out = chat(&toren, &["chat", "s"], "/undo\nwhat now\n");
    assert!(
        text(&out.stderr).contains("is back at before turn 3"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(text(&out.stdout).trim(), "after the undo");
    same(&after[2], &tree(&ws), "after /undo");
    let (said, commands) = sent(&fake.requests().last().unwrap().body);
    assert_eq!(commands, [make.as_str(), CHANGE]);
    assert!(said.iter().any(|s| s == "turn two: change"), "{said:?}");
    assert!(!said.iter().any(|s| s.contains("turn three")), "{said:?}");
    assert_eq!(said.last().unwrap(), "what now");
    // The rewind is a turn of its own (4), and turn 5 the message after it.
    let turns = show(&toren, "s")["turns"].as_array().unwrap().clone();
    assert_eq!(turns.len(), 5);
    let rewind_run = turns[3]["run"].as_str().unwrap();
    let events = toren.events(rewind_run);
    assert_eq!(events[0]["start"]["rewound"]["turn"], 3);
    assert_eq!(events[0]["start"]["rewound"]["to"], 0);
    assert_eq!(events.last().unwrap()["type"], "run_completed");

    // `toren rewind SESSION --to 2`: before turn 2; turn 3 is off the line.
    let out = toren.run(&["rewind", "s", "--to", "2"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    same(&after[1], &tree(&ws), "after --to 2");
    let out = toren.run(&["rewind", "s", "--to", "3"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("not on the session's line"),
        "{}",
        text(&out.stderr)
    );
    fake.push(Reply::text("after the rewind"));
    chat(&toren, &["chat", "s"], "and now\n");
    let (said, commands) = sent(&fake.requests().last().unwrap().body);
    assert_eq!(commands, [make.as_str()]);
    assert!(
        !said
            .iter()
            .any(|s| s.contains("turn two") || s == "what now"),
        "{said:?}"
    );
    same(&after[1], &tree(&ws), "after the next turn");

    // A step inside turn 1: right after its bash call's result, before its answer. The
    // workspace is the one after the call; the conversation has the call and its result.
    let run1 = turns[0]["run"].as_str().unwrap();
    let done = toren
        .events(run1)
        .iter()
        .find(|e| e["type"] == "tool_completed")
        .map(|e| e["seq"].as_u64().unwrap())
        .unwrap();
    // A step in the middle of the call is refused, naming the ones there are.
    let out = toren.run(&["rewind", "s", "--to", &format!("1.{}", done - 1)]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains(&format!("1.{done}")),
        "{}",
        text(&out.stderr)
    );
    std::fs::write(ws.join("scribble"), "x").unwrap();
    let out = toren.run(&["rewind", "s", "--to", &format!("1.{done}")]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    same(&after[1], &tree(&ws), "after --to 1.N");
    fake.push(Reply::text("from inside turn one"));
    chat(&toren, &["chat", "s"], "go on\n");
    let (said, commands) = sent(&fake.requests().last().unwrap().body);
    assert_eq!(commands, [make.as_str()]);
    assert!(!said.iter().any(|s| s == "model: made"), "{said:?}");
    assert_eq!(said.last().unwrap(), "go on");
    // /history names each turn's run, where its steps are read.
    let out = chat(&toren, &["chat", "s"], "/history\n");
    assert!(
        text(&out.stderr).contains(&format!("turn 1: run {run1} (`/rewind 1`")),
        "{}",
        text(&out.stderr)
    );
    assert!(
        text(&out.stdout).contains("[1] you> turn one: make"),
        "{}",
        text(&out.stdout)
    );
    // The git repository is the one of turn 1: one commit.
    let log = std::process::Command::new("git")
        .args([
            "-C",
            &ws.join("repo").display().to_string(),
            "log",
            "--format=%s",
        ])
        .output()
        .unwrap();
    assert_eq!(text(&log.stdout), "one\n", "{}", text(&log.stderr));
}

/// A `toren rewind SESSION` killed (SIGKILL) at a random point: either it made no rewind
/// turn and the workspace is untouched, or its rewind turn completed, or the next
/// `toren chat` finishes it (the restore first); the workspace is then the step's.
#[test]
fn a_session_rewind_killed_at_any_point_is_finished_by_the_next_chat() {
    let Session {
        toren, ws, after, ..
    } = session(10);
    let run1 = show(&toren, "s")["turns"][0]["run"]
        .as_str()
        .unwrap()
        .to_owned();
    let done = toren
        .events(&run1)
        .iter()
        .find(|e| e["type"] == "tool_completed")
        .map(|e| e["seq"].as_u64().unwrap())
        .unwrap();
    let step = format!("1.{done}");
    let mut seed = u64::from(std::process::id()) | 1;
    let (mut made, mut by_chat) = (0, 0);
    for round in 0..6 {
        // The workspace moved on since the step.
        std::fs::write(ws.join(format!("scribble{round}")), "x").unwrap();
        let before = tree(&ws);
        let turns = show(&toren, "s")["turns"].as_array().unwrap().len();
        let mut child = toren.spawn(&["rewind", "s", "--to", &step]);
        // Fault injection, not synchronisation: kill after a random 0-120 ms.
        seed ^= seed << 13;
        seed ^= seed >> 7;
        seed ^= seed << 17;
        std::thread::sleep(std::time::Duration::from_millis(seed % 120));
        child.kill().unwrap();
        child.wait().unwrap();
        let shown = show(&toren, "s");
        let now = shown["turns"].as_array().unwrap();
        if now.len() == turns {
            same(&before, &tree(&ws), "a killed rewind that made no turn");
            continue;
        }
        made += 1;
        assert_eq!(now.len(), turns + 1, "{shown}");
        if now[turns]["status"] != "completed" {
            // The next chat resumes the unfinished rewind turn before anything else.
            by_chat += 1;
            chat(&toren, &["chat", "s"], "");
        }
        let shown = show(&toren, "s");
        assert_eq!(shown["turns"][turns]["status"], "completed", "{shown}");
        assert_eq!(shown["turns"][turns]["rewind_to"], step.as_str(), "{shown}");
        same(&after[1], &tree(&ws), "a killed rewind, finished");
    }
    // Whatever the kills hit, a rewind let finish gives the step's workspace.
    std::fs::write(ws.join("scribble"), "x").unwrap();
    let out = toren.run(&["rewind", "s", "--to", &step]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    same(&after[1], &tree(&ws), "a rewind after the killed ones");
    eprintln!("{made} of 6 killed rewinds had made their turn, {by_chat} finished by the chat");
}

/// While a live `toren chat` drives the session's turn, a rewind of the session is refused
/// and writes nothing: within that turn (its run's lease is live), and to before it (the
/// turn has not ended).
#[test]
fn a_session_whose_turn_is_driven_elsewhere_is_not_rewound() {
    let fake = FakeAnthropic::start(vec![bash("slow", "touch started && sleep 60")]).unwrap();
    let toren = anthropic_toren(
        &fake,
        "name: w\nmodel: anthropic/claude-sonnet-5\nsandbox:\n  approval: never\n",
    );
    let mut child = toren
        .command(&["chat", "busy", "--agent", "w"])
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    child.stdin.as_mut().unwrap().write_all(b"go\n").unwrap();
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
    let ws = loop {
        let out = toren.run(&["sessions", "show", "busy", "--json"]);
        if out.status.success() {
            let shown: Value = serde_json::from_slice(&out.stdout).unwrap();
            let ws = PathBuf::from(shown["workspace"].as_str().unwrap());
            if ws.join("started").exists() {
                break ws;
            }
        }
        assert!(
            std::time::Instant::now() < deadline,
            "the turn never started"
        );
        std::thread::sleep(std::time::Duration::from_millis(20));
    };
    let run = show(&toren, "busy")["turns"][0]["run"]
        .as_str()
        .unwrap()
        .to_owned();
    let before = toren.events(&run).len();
    let out = toren.run(&["rewind", "busy", "--to", "1.1"]);
    assert_eq!(out.status.code(), Some(1), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("is being driven by"),
        "{}",
        text(&out.stderr)
    );
    let out = toren.run(&["rewind", "busy", "--to", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("has not ended"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(toren.events(&run).len(), before);
    assert_eq!(show(&toren, "busy")["turns"].as_array().unwrap().len(), 1);
    assert!(ws.join("started").exists());
    child.kill().unwrap();
    child.wait().unwrap();
}

/// A step whose checkpoint `keep` has pruned is refused before anything is written: no
/// rewind turn is made that could not restore.
#[test]
fn a_step_whose_checkpoint_was_pruned_is_refused_and_nothing_is_written() {
    let fake = FakeAnthropic::start(vec![
        bash("c1", "echo one > one.txt"),
        Reply::text("one"),
        bash("c2", "echo two > two.txt"),
        Reply::text("two"),
    ])
    .unwrap();
    let toren = anthropic_toren(
        &fake,
        "name: w\nmodel: anthropic/claude-sonnet-5\nsandbox:\n  approval: never\n  checkpoints: {keep: 1}\n",
    );
    chat(&toren, &["chat", "p", "--agent", "w"], "first\nsecond\n");
    let ws = PathBuf::from(show(&toren, "p")["workspace"].as_str().unwrap());
    let before = tree(&ws);
    let out = toren.run(&["rewind", "p", "--to", "1"]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("no longer kept"),
        "{}",
        text(&out.stderr)
    );
    assert_eq!(show(&toren, "p")["turns"].as_array().unwrap().len(), 2);
    same(&before, &tree(&ws), "a refused rewind");
}
