//! A reader that goes away: `toren runs list | head -1` and the like end quietly (no
//! panic, no "Broken pipe" message, status 0), whichever command writes, and a run whose
//! stderr reader went away still runs to its end.

use std::process::{Output, Stdio};

use pretty_assertions::assert_eq;

use super::common::{Toren, text};

/// Runs `toren ARGS` with stdout (or stderr) a pipe whose reader is closed before the
/// command writes anything.
fn closed(toren: &Toren, args: &[&str], close_stdout: bool) -> Output {
    let mut child = toren
        .command(args)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    if close_stdout {
        drop(child.stdout.take());
    } else {
        drop(child.stderr.take());
    }
    child.wait_with_output().unwrap()
}

#[test]
fn commands_end_quietly_when_their_reader_goes_away() {
    let toren = Toren::new();
    toren.file("s.yaml", "turns:\n  - text: \"hello\"\n");
    toren.agent("plain", "name: plain\nmodel: scripted/s.yaml\n");

    // stderr's reader gone: the run still runs to its end, and its answer reaches stdout.
    let out = closed(&toren, &["run", "plain", "first"], false);
    assert_eq!(out.status.code(), Some(0));
    assert_eq!(text(&out.stdout).trim(), "hello");
    // stdout's reader gone: the run is done, the answer has nowhere to go.
    let out = closed(&toren, &["run", "plain", "second"], true);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(!text(&out.stderr).contains("panicked"));

    let run = toren.newest_run().unwrap();
    for args in [
        &["runs", "list"][..],
        &["runs", "list", "--json"],
        &["runs", "show", &run],
        &["runs", "show", &run, "--json"],
        &["events", &run],
        &["events", &run, "--json"],
        &["sessions", "list"],
        &["--help"],
    ] {
        let out = closed(&toren, args, true);
        let stderr = text(&out.stderr);
        assert!(
            !stderr.contains("panicked") && !stderr.contains("Broken pipe"),
            "{args:?}: {stderr}"
        );
        assert_eq!(out.status.code(), Some(0), "{args:?}: {stderr}");
    }
    // Failures are said on stderr; a reader gone there takes nothing but the message.
    let out = closed(&toren, &["runs", "show", "run_zzzz"], false);
    assert_eq!(out.status.code(), Some(2));
}
