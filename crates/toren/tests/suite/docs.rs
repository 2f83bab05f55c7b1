//! The documentation read against the code, so that it cannot drift from it: every agent
//! file a Markdown page shows passes the real binary's `toren check`, and the HTTP API
//! walkthrough works when pasted as one block.
//!
//! An agent file in a page is a fenced block with the info string `yaml agent` (checked as
//! it is) or `yaml agent-excerpt` (only some keys, checked inside a minimal agent file). A
//! `yaml` block that looks like an agent file but carries neither marker fails the test, so
//! a new example cannot escape the check by being unmarked.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::common::{Fence, Toren, fenced_blocks, free_port, read, repo_root, text};

/// The Markdown pages people read: the repository's top level and `docs/`.
fn pages() -> Vec<PathBuf> {
    let root = repo_root();
    let mut pages = Vec::new();
    for dir in [root.clone(), root.join("docs")] {
        for entry in std::fs::read_dir(&dir).unwrap() {
            let path = entry.unwrap().path();
            if path.extension().is_some_and(|ext| ext == "md") {
                pages.push(path);
            }
        }
    }
    pages.sort();
    assert!(
        pages.iter().any(|p| p.ends_with("README.md")),
        "found the pages: {pages:?}"
    );
    pages
}

/// `page` as the repository names it (`README.md`, `docs/fuzzing.md`).
fn shown(page: &Path) -> String {
    page.strip_prefix(repo_root())
        .unwrap_or(page)
        .display()
        .to_string()
}

/// What a fenced block of a page is, as far as the agent-file check goes.
enum Kind {
    /// `yaml agent`: a whole agent file.
    Agent,
    /// `yaml agent-excerpt`: some keys of one.
    Excerpt,
    /// Anything else.
    Other,
}

fn kind(fence: &Fence) -> Kind {
    let mut words = fence.info.split_whitespace();
    match (words.next(), words.next()) {
        (Some("yaml"), Some("agent")) => Kind::Agent,
        (Some("yaml"), Some("agent-excerpt")) => Kind::Excerpt,
        _ => Kind::Other,
    }
}

/// Whether a block reads like an agent file or a part of one: top-level `name:` and
/// `model:`, or a top-level `sandbox:`.
fn looks_like_agent_file(body: &str) -> bool {
    let top = |key: &str| body.lines().any(|line| line.starts_with(key));
    (top("name:") && top("model:")) || top("sandbox:")
}

/// The keys an excerpt is checked inside: the smallest agent file there is.
const EXCERPT_HEAD: &str = "name: excerpt\nmodel: anthropic/claude-sonnet-5\n";

/// Runs `toren check` on `body` written to a file, and returns what it said, its lines
/// renamed to the page's (`README.md:84:5: error: …`), when it fails.
fn check(toren: &Toren, page: &Path, fence: &Fence, excerpt: bool) -> Option<String> {
    let head = if excerpt { EXCERPT_HEAD } else { "" };
    let file = toren.file(
        &format!("block-{}.yaml", fence.line),
        &format!("{head}{}", fence.body),
    );
    let out = toren.run(&["check", &file.display().to_string()]);
    if out.status.success() {
        return None;
    }
    // Line L of the file is line fence.line + L of the page, less the excerpt's head.
    let offset = fence.line as i64 - head.lines().count() as i64;
    let prefix = format!("{}:", file.display());
    let said = text(&out.stderr)
        .lines()
        .chain(text(&out.stdout).lines())
        .map(|line| {
            let Some(rest) = line.strip_prefix(&prefix) else {
                return line.to_owned();
            };
            let (number, rest) = rest.split_once(':').unwrap_or((rest, ""));
            match number.parse::<i64>() {
                Ok(n) => format!("{}:{}:{rest}", shown(page), n + offset),
                Err(_) => line.to_owned(),
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    Some(format!(
        "{}:{}: this agent file fails `toren check`:\n{said}",
        shown(page),
        fence.line
    ))
}

#[test]
fn every_agent_file_in_the_docs_passes_toren_check() {
    let toren = Toren::new();
    let mut failures = Vec::new();
    let mut checked = 0;
    for page in pages() {
        for fence in fenced_blocks(&read(&page)) {
            match kind(&fence) {
                Kind::Agent => failures.extend(check(&toren, &page, &fence, false)),
                Kind::Excerpt => failures.extend(check(&toren, &page, &fence, true)),
                Kind::Other => {
                    if fence.info.split_whitespace().next() == Some("yaml")
                        && looks_like_agent_file(&fence.body)
                    {
                        failures.push(format!(
                            "{}:{}: an agent file without its marker: open it with ```yaml \
                             agent (a whole file) or ```yaml agent-excerpt (some of its keys) \
                             so that this test checks it",
                            shown(&page),
                            fence.line
                        ));
                    }
                    continue;
                }
            }
            checked += 1;
        }
    }
    // The examples the README points at, and the Compose tier's, are agent files too.
    let mut files: Vec<PathBuf> = std::fs::read_dir(repo_root().join("examples"))
        .unwrap()
        .map(|entry| entry.unwrap().path().join("agent.yaml"))
        .filter(|file| file.exists())
        .collect();
    files.extend(
        std::fs::read_dir(repo_root().join("deploy/compose/agents"))
            .unwrap()
            .map(|entry| entry.unwrap().path())
            .filter(|file| file.extension().is_some_and(|ext| ext == "yaml")),
    );
    for file in files {
        let out = toren.run(&["check", &file.display().to_string()]);
        if !out.status.success() {
            failures.push(format!(
                "{}: fails `toren check`:\n{}",
                shown(&file),
                text(&out.stderr)
            ));
        }
        checked += 1;
    }
    assert!(
        failures.is_empty(),
        "the docs' agent files ({checked} checked):\n\n{}",
        failures.join("\n\n")
    );
    // The README's opening example and reference block, SECURITY.md's excerpts, the three
    // examples and the Compose agent: a parser that finds none checks nothing.
    assert!(checked >= 8, "only {checked} agent files found");
}

/// The README's block that starts `toren serve` in the background and drives a run with
/// curl.
fn api_walkthrough() -> Fence {
    let mut blocks: Vec<Fence> = fenced_blocks(&read(&repo_root().join("README.md")))
        .into_iter()
        .filter(|fence| fence.body.contains("toren serve &"))
        .collect();
    assert_eq!(blocks.len(), 1, "one walkthrough in the README: {blocks:?}");
    blocks.remove(0)
}

#[test]
fn the_api_walkthrough_works_when_pasted_as_one_block() {
    // As a new user pastes it: one shell, nothing configured but a HOME of its own (the
    // token is made in ~/.toren), run from the repository root. Only the address differs
    // (a free port instead of 7420), and the sandbox is the local one.
    let walkthrough = api_walkthrough();
    let port = free_port();
    assert!(
        walkthrough.body.contains("127.0.0.1:7420"),
        "the walkthrough names the default address: {}",
        walkthrough.body
    );
    let script = walkthrough
        .body
        .replace("127.0.0.1:7420", &format!("127.0.0.1:{port}"));
    let dir = tempfile::tempdir().unwrap();
    let home = dir.path().join("home");
    std::fs::create_dir(&home).unwrap();
    std::fs::write(dir.path().join("walkthrough.sh"), &script).unwrap();
    let toren = PathBuf::from(env!("CARGO_BIN_EXE_toren"));
    let path = format!(
        "{}:{}",
        toren.parent().unwrap().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let stdout = dir.path().join("stdout");
    let stderr = dir.path().join("stderr");
    let mut shell = Command::new("bash");
    shell
        .arg(dir.path().join("walkthrough.sh"))
        .current_dir(repo_root())
        .env_clear()
        .env("PATH", path)
        .env("HOME", &home)
        .env("TOREN_API_ADDR", format!("127.0.0.1:{port}"))
        .env("TOREN_SANDBOX", "local")
        .stdin(Stdio::null())
        .stdout(std::fs::File::create(&stdout).unwrap())
        .stderr(std::fs::File::create(&stderr).unwrap());
    std::os::unix::process::CommandExt::process_group(&mut shell, 0);
    let mut shell = shell.spawn().unwrap();
    let deadline = Instant::now() + Duration::from_secs(90);
    let status = loop {
        if let Some(status) = shell.try_wait().unwrap() {
            break Some(status);
        }
        if Instant::now() > deadline {
            break None;
        }
        std::thread::sleep(Duration::from_millis(100));
    };
    // The server it left in the background, and anything else of the block's.
    let group = format!("-{}", shell.id());
    let _ = Command::new("kill").args(["-TERM", "--", &group]).status();
    std::thread::sleep(Duration::from_millis(500));
    let _ = Command::new("kill").args(["-KILL", "--", &group]).status();
    let _ = shell.wait();
    let out = read(&stdout);
    let err = read(&stderr);
    assert!(
        status.is_some(),
        "the walkthrough did not finish in 90 s\nstdout:\n{out}\nstderr:\n{err}"
    );
    // What the block's comments say each line shows.
    let expected_last = walkthrough
        .body
        .lines()
        .rev()
        .find(|line| !line.trim().is_empty())
        .and_then(|line| line.split_once('#'))
        .map(|(_, comment)| comment.trim().to_owned())
        .unwrap();
    assert_eq!(
        out.lines().rev().find(|line| !line.trim().is_empty()),
        Some(expected_last.as_str()),
        "the walkthrough ends with what the README says\nstdout:\n{out}\nstderr:\n{err}"
    );
    // Nothing it runs complains: no failed request, and the home the server made for the
    // token is private.
    for complaint in ["curl: (", "open to other users"] {
        assert!(
            !err.contains(complaint),
            "the walkthrough's stderr has {complaint:?}\nstdout:\n{out}\nstderr:\n{err}"
        );
    }
    for shown in [
        // the pending approval: the command it waits to run
        "echo 'hi from the sandbox' > hi.txt",
        // the events, to the run's end
        "run_completed",
        // the file it wrote
        "hi from the sandbox\n",
    ] {
        assert!(
            out.contains(shown),
            "the walkthrough shows {shown:?}\nstdout:\n{out}\nstderr:\n{err}"
        );
    }
}
