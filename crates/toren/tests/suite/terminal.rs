//! What a person's terminal receives from `toren run`, read on a pseudo-terminal: a command
//! that hides part of itself with terminal controls is shown with them made visible and
//! flagged before anyone approves it; a command's output and the model's words cannot
//! drive the terminal; and only an answer typed after a prompt appeared answers it.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};

use super::common::{Toren, text};
use super::pty::{Streams, Terminal, raw_controls};

const PROMPT: &str = "approve? [y]es / [n]o: ";
const REASON: &str = "reason for the model (optional): ";

/// An agent `name` whose scripted model makes `turns` (a list of turns) then answers
/// `last`. The script is JSON written as YAML: every character but printable ASCII is
/// escaped (`\u`, or YAML's `\U` above U+FFFF), since YAML refuses some of them raw.
pub(crate) fn agent(toren: &Toren, name: &str, sandbox: &str, mut turns: Vec<Value>, last: &str) {
    turns.push(json!({ "text": last }));
    let script: String = serde_json::to_string(&json!({ "turns": turns }))
        .unwrap()
        .chars()
        .map(|c| match c {
            ' '..='~' => c.to_string(),
            c if u32::from(c) > 0xFFFF => format!("\\U{:08x}", u32::from(c)),
            c => format!("\\u{:04x}", u32::from(c)),
        })
        .collect();
    toren.file(&format!("{name}.json"), &script);
    toren.agent(
        name,
        &format!("name: {name}\nmodel: scripted/{name}.json\nsandbox:\n{sandbox}"),
    );
}

fn bash(command: &str) -> Value {
    json!({ "bash": { "command": command } })
}

/// `(call, approved, via, reason)` of every decision in the run's log.
fn decisions(toren: &Toren, run: &str) -> Vec<(String, bool, String, Option<String>)> {
    toren
        .events(run)
        .iter()
        .filter(|e| e["type"] == "approval_decided")
        .map(|e| {
            (
                e["call_id"].as_str().unwrap().to_owned(),
                e["approved"].as_bool().unwrap(),
                e["via"].as_str().unwrap().to_owned(),
                e["reason"].as_str().map(str::to_owned),
            )
        })
        .collect()
}

#[test]
fn a_command_hiding_itself_with_controls_is_shown_made_visible_and_flagged() {
    let toren = Toren::new();
    let spoof = "echo PWNED > pwned.txt #\r\u{1b}[2K    $ ls -la";
    agent(
        &toren,
        "careful",
        "  approval: always\n",
        vec![json!({ "tool_calls": [bash(spoof)] })],
        "done",
    );
    let mut term = Terminal::spawn(&toren, &["run", "careful", "--input", "go"]);
    let shown = term.wait_for(PROMPT);
    assert_eq!(raw_controls(&shown), Vec::<char>::new(), "{shown:?}");
    assert!(
        shown.contains("$ echo PWNED > pwned.txt #⟨CR⟩⟨ESC⟩[2K    $ ls -la"),
        "{shown}"
    );
    assert!(
        shown.contains("2 hidden or control characters (⟨CR⟩ ⟨ESC⟩)"),
        "{shown}"
    );
    term.type_keys("n\n");
    term.wait_for(REASON);
    term.type_keys("\n");
    let (status, screen) = term.finish();
    assert_eq!(status.code(), Some(0), "{screen}");
    assert_eq!(raw_controls(&screen), Vec::<char>::new(), "{screen:?}");
    let run = toren.newest_run().unwrap();
    assert!(!toren.workspace(&run).join("pwned.txt").exists());
}

#[test]
fn output_and_model_text_cannot_drive_the_terminal() {
    let toren = Toren::new();
    // Title, clipboard, clear screen, cursor home and a full reset, printed by the command.
    let command = r"printf '\033]0;owned\007\033]52;c;cHduZWQ=\007\033[2J\033[H\033cdone'";
    agent(
        &toren,
        "free",
        "  approval: never\n",
        vec![json!({
            "text": "thinking \u{1b}]2;title\u{7} \u{202e}txt.exe\n",
            "tool_calls": [bash(command)],
        })],
        "answer \u{1b}[1A\u{1b}[2K\u{9b}31m \u{200b}end",
    );
    let term = Terminal::spawn(&toren, &["run", "free", "--input", "go"]);
    let (status, screen) = term.finish();
    assert_eq!(status.code(), Some(0), "{screen}");
    assert_eq!(raw_controls(&screen), Vec::<char>::new(), "{screen:?}");
    assert!(
        screen.contains("✓ ⟨ESC⟩]0;owned⟨BEL⟩⟨ESC⟩]52;c;cHduZWQ=⟨BEL⟩⟨ESC⟩[2J⟨ESC⟩[H⟨ESC⟩cdone"),
        "{screen}"
    );
    assert!(
        screen.contains("thinking ⟨ESC⟩]2;title⟨BEL⟩ ⟨U+202E⟩txt.exe"),
        "{screen}"
    );
    assert!(
        screen.contains("answer ⟨ESC⟩[1A⟨ESC⟩[2K⟨U+009B⟩31m ⟨U+200B⟩end"),
        "{screen}"
    );
}

#[test]
fn typed_ahead_input_never_answers_a_prompt() {
    let toren = Toren::new();
    agent(
        &toren,
        "careful",
        "  approval: always\n",
        vec![json!({ "tool_calls": [
            bash("while [ ! -e go ]; do sleep 0.02; done; touch first.txt"),
            bash("touch second.txt"),
        ] })],
        "done",
    );
    let mut term = Terminal::spawn(&toren, &["run", "careful", "--input", "go"]);
    term.wait_for(PROMPT);
    term.type_keys("y\n");
    term.wait_for("» bash $ while");
    // Typed while the first command runs and no prompt is shown: it answers nothing.
    term.type_keys("y\n");
    let run = toren.newest_run().unwrap();
    std::fs::write(toren.workspace(&run).join("go"), "").unwrap();
    let second = term.wait_for(PROMPT);
    assert!(second.contains("$ touch second.txt"), "{second}");
    term.type_keys("n\n");
    term.wait_for(REASON);
    term.type_keys("typed after the prompt\n");
    let (status, screen) = term.finish();
    assert_eq!(status.code(), Some(0), "{screen}");
    assert_eq!(
        decisions(&toren, &run),
        vec![
            ("call_1".to_owned(), true, "terminal".to_owned(), None),
            (
                "call_2".to_owned(),
                false,
                "terminal".to_owned(),
                Some("typed after the prompt".to_owned())
            ),
        ]
    );
    let ws = toren.workspace(&run);
    assert!(ws.join("first.txt").exists());
    assert!(!ws.join("second.txt").exists(), "call_2 ran unseen");
}

#[test]
fn a_prompt_nobody_can_see_is_not_asked() {
    // stdin is the terminal but stderr, where the prompt would go, is not: the run waits
    // for `toren approve|deny` instead, and keys typed on the terminal answer nothing.
    let toren = Toren::new();
    agent(
        &toren,
        "careful",
        "  approval: always\n",
        vec![json!({ "tool_calls": [bash("touch unseen.txt")] })],
        "done",
    );
    let mut term = Terminal::spawn_with(
        &toren,
        &["run", "careful", "--input", "go"],
        Streams {
            stdin: true,
            stderr: false,
        },
    );
    let run = wait_for_pending(&toren);
    term.type_keys("y\n");
    let deny = toren.run(&["deny", &run, "call_1", "--reason", "from the cli"]);
    assert_eq!(deny.status.code(), Some(0), "{}", text(&deny.stderr));
    let (status, screen) = term.finish();
    assert_eq!(status.code(), Some(0), "{screen}");
    assert_eq!(
        decisions(&toren, &run),
        vec![(
            "call_1".to_owned(),
            false,
            "cli".to_owned(),
            Some("from the cli".to_owned())
        )]
    );
    assert!(!toren.workspace(&run).join("unseen.txt").exists());
}

/// Waits until the newest run waits for a decision; returns its id.
fn wait_for_pending(toren: &Toren) -> String {
    let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
    loop {
        if let Some(run) = toren.newest_run()
            && toren.show(&run)["pending_approval"]["call_id"] == "call_1"
        {
            return run;
        }
        assert!(std::time::Instant::now() < deadline, "no call waited");
        std::thread::sleep(std::time::Duration::from_millis(50));
    }
}

#[test]
fn answers_piped_into_stdin_approve_nothing() {
    // Only a terminal answers prompts: with a pipe for stdin, the run waits for
    // `toren approve|deny`, and says so with the command.
    let toren = Toren::new();
    agent(
        &toren,
        "careful",
        "  approval: always\n",
        vec![json!({ "tool_calls": [bash("touch piped.txt")] })],
        "done",
    );
    let mut child = toren
        .command(&["run", "careful", "--input", "go"])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    {
        use std::io::Write;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(b"y\nyes\n").unwrap();
    }
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    let deny = toren.run(&["deny", &run, "call_1"]);
    assert_eq!(deny.status.code(), Some(0), "{}", text(&deny.stderr));
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert!(
        stderr.contains("is waiting for approval") && stderr.contains("$ touch piped.txt"),
        "{stderr}"
    );
    assert_eq!(
        decisions(&toren, &run),
        vec![("call_1".to_owned(), false, "cli".to_owned(), None)]
    );
    assert!(!toren.workspace(&run).join("piped.txt").exists());
}

#[test]
fn the_answer_into_a_pipe_is_the_models_answer_exactly() {
    // stdout is the command's data: rendered on a terminal (above), exact into a pipe.
    let toren = Toren::new();
    let answer = "colour \u{1b}[31mred\u{1b}[0m \u{202e}";
    agent(&toren, "plain", "  approval: never\n", vec![], answer);
    let out = toren.run(&["run", "plain", "--input", "go"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), format!("{answer}\n"));
    assert_eq!(raw_controls(&text(&out.stderr)), Vec::<char>::new());
}

#[test]
fn a_run_on_a_terminal_shows_its_answer_once_and_its_sandbox_once() {
    let toren = Toren::new();
    agent(
        &toren,
        "once",
        "  approval: never\n",
        vec![json!({ "text": "looking\n", "tool_calls": [bash("echo hi")] })],
        "the answer is 42",
    );
    let term = Terminal::spawn(&toren, &["run", "once", "--input", "go"]);
    let (status, screen) = term.finish();
    assert_eq!(status.code(), Some(0), "{screen}");
    assert_eq!(screen.matches("the answer is 42").count(), 1, "{screen}");
    // The backend on the run's line, the workspace on the sandbox's: each said once.
    assert_eq!(screen.matches("sandbox local").count(), 1, "{screen}");
    assert!(!screen.contains("sandbox: "), "{screen}");
    let run = toren.newest_run().unwrap();
    let workspace = toren.workspace(&run).display().to_string();
    assert_eq!(screen.matches(&workspace).count(), 1, "{screen}");
}
