//! Nothing a model, a sandbox or a model provider says can drive a person's terminal or
//! hide from them (SECURITY.md, "What a person reads"). Each of [`sequences`] — terminal
//! escape sequences, C0 and C1 controls, bidirectional overrides and isolates, zero-width,
//! invisible and separator characters — is put where a person will read it: in a bash
//! command (the approval prompt, the progress line, the waiting notice, `toren runs show`,
//! `toren events`), in the command's output (`✓` lines, events), in the model's streamed
//! text and final answer (the terminal, stdout, `runs show`), in a tool name and a path the
//! tools echo in their errors (`✗` lines, events), and in a model provider's error (the
//! run's failure reason and `toren run --json`'s outcome, the warnings and error report of a
//! run stopped by an outage, `runs show`, `runs list`, `events`). Every one of those surfaces, read byte for byte on a
//! pseudo-terminal or from the command's stdout, must hold none of them raw; the approval
//! prompt must show each made visible and flag it; `--json` output must be the same data.

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toren_display::visible_lines;
use toren_test_support::{FakeAnthropic, Reply};

use super::harness::toren_for;
use super::{Backend, report};
use crate::suite::common::{Toren, text};
use crate::suite::pty::{Terminal, raw_controls};
use crate::suite::terminal::agent;

const PROMPT: &str = "approve? [y]es / [n]o: ";

/// The sequences tried, by name.
fn sequences() -> Vec<(&'static str, &'static str)> {
    vec![
        ("CSI erase line", "\u{1b}[2K"),
        ("CSI cursor up", "\u{1b}[1A"),
        ("CSI cursor home", "\u{1b}[H"),
        ("CSI clear screen", "\u{1b}[2J"),
        ("CSI conceal text", "\u{1b}[8m"),
        ("CSI colour", "\u{1b}[31;1m"),
        (
            "CSI alternate screen, hidden cursor",
            "\u{1b}[?1049h\u{1b}[?25l",
        ),
        ("carriage return", "\r"),
        ("fake prompt after CR", "\r\u{1b}[2K    $ ls -la"),
        ("backspaces", "\u{8}\u{8}\u{8}"),
        ("OSC 0 title (BEL)", "\u{1b}]0;pwned\u{7}"),
        ("OSC 2 title (ST)", "\u{1b}]2;pwned\u{1b}\\"),
        ("OSC 52 clipboard write", "\u{1b}]52;c;cm0gLXJmIH4=\u{7}"),
        (
            "OSC 8 hyperlink",
            "\u{1b}]8;;https://evil.example/\u{1b}\\click\u{1b}]8;;\u{1b}\\",
        ),
        ("DCS string", "\u{1b}P+q544e\u{1b}\\"),
        ("APC string", "\u{1b}_hidden\u{1b}\\"),
        ("PM string", "\u{1b}^hidden\u{1b}\\"),
        ("SOS string", "\u{1b}Xhidden\u{1b}\\"),
        ("ESC c full reset", "\u{1b}c"),
        ("8-bit CSI U+009B", "\u{9b}2K"),
        ("8-bit OSC U+009D", "\u{9d}0;pwned\u{9c}"),
        ("8-bit DCS U+0090", "\u{90}q\u{9c}"),
        ("NEL U+0085", "\u{85}"),
        ("BEL", "\u{7}"),
        ("DEL", "\u{7f}"),
        ("VT and FF", "\u{b}\u{c}"),
        ("RLO U+202E", "\u{202e}txt.exe"),
        ("LRO U+202D", "\u{202d}"),
        ("PDF U+202C", "\u{202c}"),
        ("LRE U+202A", "\u{202a}"),
        ("RLE U+202B", "\u{202b}"),
        ("isolates U+2066-2069", "\u{2066}\u{2067}\u{2068}\u{2069}"),
        ("LRM RLM ALM", "\u{200e}\u{200f}\u{61c}"),
        ("ZWSP U+200B", "\u{200b}"),
        ("ZWNJ ZWJ", "\u{200c}\u{200d}"),
        ("WJ U+2060", "\u{2060}"),
        (
            "invisible operators U+2061-2064",
            "\u{2061}\u{2062}\u{2063}\u{2064}",
        ),
        ("BOM U+FEFF", "\u{feff}"),
        ("soft hyphen U+00AD", "\u{ad}"),
        ("Hangul fillers U+115F U+3164", "\u{115f}\u{3164}"),
        ("Mongolian vowel separator", "\u{180e}"),
        ("Braille blank U+2800", "\u{2800}"),
        ("tag characters", "\u{e0001}\u{e0072}\u{e006d}\u{e007f}"),
        ("variation selectors", "\u{fe0f}\u{e0100}"),
        ("line and paragraph separators", "\u{2028}\u{2029}"),
        ("interlinear annotation", "\u{fff9}x\u{fffa}y\u{fffb}"),
    ]
}

/// Every sequence, each between markers: `<name>[…]`.
fn all_sequences() -> String {
    sequences()
        .iter()
        .map(|(name, seq)| format!("<{name}>[{seq}]"))
        .collect()
}

/// Fails naming `surface` if `shown` holds any character raw that a terminal obeys or
/// hides.
fn assert_clean(surface: &str, shown: &str) {
    assert_eq!(
        raw_controls(shown),
        Vec::<char>::new(),
        "{surface} let raw controls through: {shown:?}"
    );
}

/// The command that prints sequence `i` (and holds it raw itself).
fn printing(i: usize, seq: &str) -> String {
    format!("printf '%s\\n' 'S{i}:{seq}'")
}

/// `toren ARGS`, which must succeed; its stdout.
fn stdout_of(toren: &Toren, args: &[&str]) -> String {
    let out = toren.run(args);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    text(&out.stdout)
}

/// The human and `--json` forms of `runs show`, `runs list` and `events` for `run`: none
/// lets a raw control through, and the JSON forms parse (the caller checks their data).
fn read_views(toren: &Toren, run: &str) -> (Value, Vec<Value>) {
    for args in [
        vec!["runs", "show", run],
        vec!["runs", "list"],
        vec!["events", run],
    ] {
        assert_clean(&args.join(" "), &stdout_of(toren, &args));
    }
    let show = stdout_of(toren, &["runs", "show", run, "--json"]);
    assert_clean("runs show --json", &show);
    let list = stdout_of(toren, &["runs", "list", "--json"]);
    assert_clean("runs list --json", &list);
    let events = stdout_of(toren, &["events", run, "--json"]);
    assert_clean("events --json", &events);
    let events = events
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    (serde_json::from_str(&show).unwrap(), events)
}

pub(crate) fn suite(backend: &Backend) {
    let n = sequences().len();
    let mut probes = 0;
    probes += on_the_terminal(backend);
    probes += while_waiting(backend);
    probes += provider_errors(backend);
    assert!(n >= 30);
    report(backend, &format!("spoofing ({n} sequences)"), probes);
}

/// A run on a terminal: the model's text, prompts for commands holding each sequence, their
/// progress and output lines, a tool name and a path echoed in errors, the final answer.
fn on_the_terminal(backend: &Backend) -> usize {
    let toren = toren_for(backend);
    let seqs = sequences();
    let all = all_sequences();
    let mut calls: Vec<Value> = seqs
        .iter()
        .enumerate()
        .map(|(i, (_, seq))| json!({ "bash": { "command": printing(i, seq) } }))
        .collect();
    // YAML keys (the script's tool names) are at most 1024 characters: one per sequence.
    calls.extend(
        seqs.iter()
            .enumerate()
            .map(|(i, (_, seq))| json!({ format!("tool{i}:{seq}"): {} })),
    );
    calls.push(json!({ "read_file": { "path": format!("missing{all}.txt") } }));
    agent(
        &toren,
        "spoofer",
        "  approval: always\n",
        vec![json!({ "text": format!("streamed {all}\n"), "tool_calls": calls })],
        &format!("final {all}"),
    );
    let mut term = Terminal::spawn(&toren, &["run", "spoofer", "--input", "probe"]);
    let mut probes = 0;
    let mut seen = 0;
    for (i, (name, seq)) in seqs.iter().enumerate() {
        let shown = term.wait_for(PROMPT);
        let prompt = &shown[seen..];
        seen = shown.len();
        assert_clean(&format!("the prompt for {name}"), prompt);
        let command = printing(i, seq);
        assert!(
            prompt.contains(&format!("$ {}", visible_lines(&command)))
                && prompt.contains("hidden or control character"),
            "{name}: the prompt does not show the command made visible and flagged:\n{prompt}"
        );
        term.type_keys("y\n");
        probes += 1;
    }
    let (status, screen) = term.finish();
    assert_eq!(status.code(), Some(0), "{screen}");
    assert_clean("the terminal of `toren run`", &screen);
    for (i, (name, _)) in seqs.iter().enumerate() {
        // The progress line and the output line of each call were shown.
        assert!(
            screen.contains(&format!("» bash $ printf '%s\\n' 'S{i}:"))
                && screen.contains(&format!("✓ S{i}:")),
            "{name}: no progress or output line:\n{screen}"
        );
    }
    for surface in ["streamed <", "final <", "missing<"] {
        assert!(screen.contains(surface), "{surface} not shown:\n{screen}");
    }
    for i in 0..seqs.len() {
        assert!(
            screen.contains(&format!("✗ unknown tool `tool{i}:")),
            "no error for tool {i}:\n{screen}"
        );
    }
    probes += 5 * seqs.len(); // progress, output, streamed text, final answer, tool name
    probes += seqs.len(); // the path echoed in an error

    let run = toren.newest_run().unwrap();
    let (show, events) = read_views(&toren, &run);
    assert_eq!(show["output"], format!("final {all}"), "the same data");
    let commands: Vec<&str> = events
        .iter()
        .filter(|e| e["type"] == "approval_requested")
        .map(|e| e["command"].as_str().unwrap())
        .collect();
    let expected: Vec<String> = seqs
        .iter()
        .enumerate()
        .map(|(i, (_, seq))| printing(i, seq))
        .collect();
    assert_eq!(commands, expected, "events --json holds the same data");
    probes + 6 * seqs.len()
}

/// A run nobody answers on a terminal: the waiting notice on stderr and `runs show` while
/// a command holding every sequence waits.
fn while_waiting(backend: &Backend) -> usize {
    let toren = toren_for(backend);
    let command = format!("echo '{}'", all_sequences());
    agent(
        &toren,
        "waiter",
        "  approval: always\n",
        vec![json!({ "tool_calls": [{ "bash": { "command": command } }] })],
        "done",
    );
    let mut child = toren.spawn(&["run", "waiter", "--input", "probe"]);
    let run = toren.wait_for_status(&mut child, "awaiting_approval");
    let (show, _) = read_views(&toren, &run);
    assert_eq!(show["pending_approval"]["command"], command.as_str());
    let deny = toren.run(&["deny", &run, "call_1", "--reason", "no"]);
    assert_eq!(deny.status.code(), Some(0), "{}", text(&deny.stderr));
    let out = child.wait_with_output().unwrap();
    let stderr = text(&out.stderr);
    assert_eq!(out.status.code(), Some(0), "{stderr}");
    assert_clean("the waiting notice", &stderr);
    assert!(
        stderr.contains(&format!("$ {}", visible_lines(&command)))
            && stderr.contains("hidden or control character"),
        "{stderr}"
    );
    7 * sequences().len()
}

/// A model provider's error text: a run failed by it (the failure on the terminal, the
/// views) and a run stopped by an outage (the error report).
fn provider_errors(backend: &Backend) -> usize {
    let all = all_sequences();
    let status = |status: u16, retry_after| Reply::Status {
        status,
        message: format!("bad {all}"),
        retry_after,
    };
    let fake = FakeAnthropic::start(vec![
        status(400, None),
        status(400, None),
        status(529, Some(0)),
        status(529, Some(0)),
        status(529, Some(0)),
        status(529, Some(0)),
    ])
    .unwrap();
    let toren = toren_for(backend)
        .env("ANTHROPIC_API_KEY", "k")
        .env("ANTHROPIC_BASE_URL", &fake.base_url());
    toren.agent("claude", "name: claude\nmodel: anthropic/claude-sonnet-5\n");

    let term = Terminal::spawn(&toren, &["run", "claude", "--input", "probe"]);
    let (code, screen) = term.finish();
    assert_eq!(code.code(), Some(1), "{screen}");
    assert_clean("a run failed by the provider", &screen);
    assert!(screen.contains("failed: model call failed"), "{screen}");

    let term = Terminal::spawn(&toren, &["run", "claude", "--input", "probe", "--json"]);
    let (code, screen) = term.finish();
    assert_eq!(code.code(), Some(1), "{screen}");
    assert_clean("a run failed by the provider (`toren run --json`)", &screen);
    let outcome: Value = screen
        .lines()
        .find(|l| l.starts_with('{'))
        .map(|l| serde_json::from_str(l).unwrap())
        .unwrap_or_else(|| panic!("no JSON outcome:\n{screen}"));
    assert!(
        outcome["output"].as_str().unwrap().contains(&all),
        "the same data: {outcome}"
    );
    let run = toren.newest_run().unwrap();
    let (show, _) = read_views(&toren, &run);
    assert!(
        show["error"].as_str().unwrap().contains(&all),
        "the same data: {show}"
    );

    let term = Terminal::spawn(&toren, &["run", "claude", "--input", "probe"]);
    let (code, screen) = term.finish();
    assert_eq!(code.code(), Some(1), "{screen}");
    assert_clean("the error report of a stopped run", &screen);
    assert!(screen.contains("error: "), "{screen}");
    9 * sequences().len()
}
