//! A first real project, through the real binary (real bubblewrap or the Docker Engine,
//! real SQLite, real git): a run's workspace starts as a copy of a directory or a clone of
//! a repository (`toren run --workspace-from`), the person's own directory is never
//! changed, and the result comes out as a patch that `git apply` takes (`toren diff`) or
//! as a directory (`toren export`). A directory with a link pointing out of it, and a
//! repository the agent's network policy does not let it reach, are refused with nothing
//! created.

use std::path::Path;

use pretty_assertions::assert_eq;

use toren_test_support::git::ServedRepository;

use super::common::{Toren, read, text};

/// The agent's one bash call: reads the project's file, changes it, adds one.
const SCRIPT: &str = "turns:\n  - tool_calls:\n      - bash: {command: \"cat hello.txt && echo changed >> hello.txt && echo new > src/new.txt\"}\n  - text: \"done\"\n";

fn git(dir: &Path, args: &[&str]) -> String {
    toren_test_support::git::git(dir, args).unwrap()
}

/// A small git project: `hello.txt`, `src/lib.rs`, a link inside it, one commit.
fn project(root: &Path) -> std::path::PathBuf {
    let dir = root.join("project");
    std::fs::create_dir_all(dir.join("src")).unwrap();
    std::fs::write(dir.join("hello.txt"), "hello\n").unwrap();
    std::fs::write(dir.join("src/lib.rs"), "pub fn f() {}\n").unwrap();
    std::os::unix::fs::symlink("src/lib.rs", dir.join("lib")).unwrap();
    git(&dir, &["init", "-q"]);
    git(&dir, &["add", "."]);
    git(&dir, &["commit", "-qm", "first"]);
    dir
}

fn home(backend: &str, sandbox: &str) -> Toren {
    let toren = Toren::new().env("TOREN_SANDBOX", backend);
    toren.file("edit.yaml", SCRIPT);
    toren.agent(
        "dev",
        &format!("name: dev\nmodel: scripted/edit.yaml\nsandbox:\n  approval: never\n{sandbox}"),
    );
    toren
}

fn a_project_goes_in_and_its_result_comes_out(backend: &str) {
    let toren = home(backend, "");
    let dir = project(toren.dir.path());
    let out = toren.run(&[
        "run",
        "dev",
        "improve it",
        "--workspace-from",
        &dir.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run = toren.newest_run().unwrap();
    let ws = toren.workspace(&run);
    // The agent worked on the copy (its history with it); the person's directory is as
    // it was.
    assert_eq!(read(&ws.join("hello.txt")), "hello\nchanged\n");
    assert_eq!(read(&ws.join("src/new.txt")), "new\n");
    assert_eq!(git(&ws, &["log", "--format=%s"]), "first\n");
    assert_eq!(
        std::fs::read_link(ws.join("lib")).unwrap(),
        Path::new("src/lib.rs")
    );
    assert_eq!(read(&dir.join("hello.txt")), "hello\n");
    assert!(!dir.join("src/new.txt").exists());
    let created = &toren.events(&run)[0];
    assert_eq!(
        created["start"]["seeded"]["from"],
        dir.display().to_string()
    );
    let completed = toren
        .events(&run)
        .into_iter()
        .find(|e| e["type"] == "tool_completed")
        .unwrap();
    assert!(
        completed["output"]
            .as_str()
            .unwrap_or_default()
            .contains("hello"),
        "{completed}"
    );

    // The result as a patch, against the project as it was given: `git apply` takes it.
    let out = toren.run(&["diff", &run]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let patch = text(&out.stdout);
    assert!(
        patch.contains("+changed") && patch.contains("+new"),
        "{patch}"
    );
    assert!(!patch.contains(".git/"), "git's own files changed: {patch}");
    std::fs::write(toren.dir.path().join("result.patch"), &patch).unwrap();
    git(
        &dir,
        &[
            "apply",
            &toren.dir.path().join("result.patch").display().to_string(),
        ],
    );
    assert_eq!(read(&dir.join("hello.txt")), "hello\nchanged\n");
    assert_eq!(read(&dir.join("src/new.txt")), "new\n");

    // The result as a directory: the workspace as it is, links kept as links.
    let out_dir = toren.dir.path().join("out");
    let out = toren.run(&["export", &run, &out_dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert!(out.stdout.is_empty());
    assert_eq!(read(&out_dir.join("hello.txt")), "hello\nchanged\n");
    assert_eq!(read(&out_dir.join("src/new.txt")), "new\n");
    assert_eq!(
        std::fs::read_link(out_dir.join("lib")).unwrap(),
        Path::new("src/lib.rs")
    );
    assert_eq!(git(&out_dir, &["log", "--format=%s"]), "first\n");
    // Never over what is there.
    let out = toren.run(&["export", &run, &out_dir.display().to_string()]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("is not empty"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_project_goes_in_and_its_result_comes_out_locally() {
    a_project_goes_in_and_its_result_comes_out("local");
}

#[test]
fn a_project_goes_in_and_its_result_comes_out_in_docker() {
    a_project_goes_in_and_its_result_comes_out("docker");
}

#[test]
fn a_project_with_a_link_out_or_a_missing_one_is_refused_and_nothing_is_created() {
    let toren = home("local", "");
    let dir = project(toren.dir.path());
    std::os::unix::fs::symlink("/etc", dir.join("src/etc")).unwrap();
    let out = toren.run(&[
        "run",
        "dev",
        "go",
        "--workspace-from",
        &dir.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(said.contains("`src/etc` points outside it"), "{said}");
    assert_eq!(toren.newest_run(), None, "a run was created");
    let left: Vec<_> = std::fs::read_dir(toren.sandbox_root())
        .map(Iterator::collect)
        .unwrap_or_default();
    assert!(left.is_empty(), "a workspace was left: {left:?}");

    let missing = toren.dir.path().join("nope");
    let out = toren.run(&[
        "run",
        "dev",
        "go",
        "--workspace-from",
        &missing.display().to_string(),
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(text(&out.stderr).contains("nope"), "{}", text(&out.stderr));
    assert_eq!(toren.newest_run(), None);
}

#[test]
fn a_repository_is_cloned_only_where_the_agents_network_reaches() {
    let closed = home("local", "");
    let dir = project(closed.dir.path());
    let served = ServedRepository::start(closed.dir.path(), &dir).unwrap();
    // No network: the clone is refused, naming the host and the fix.
    let out = closed.run(&["run", "dev", "go", "--workspace-from", &served.url]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    let said = text(&out.stderr);
    assert!(
        said.contains("does not let it reach `127.0.0.1`") && said.contains("sandbox.network"),
        "{said}"
    );
    assert_eq!(closed.newest_run(), None);

    let open = home("local", "  network: true\n");
    let out = open.run(&["run", "dev", "go", "--workspace-from", &served.url]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let run = open.newest_run().unwrap();
    let ws = open.workspace(&run);
    assert_eq!(read(&ws.join("hello.txt")), "hello\nchanged\n");
    assert_eq!(git(&ws, &["log", "--format=%s"]), "first\n");
    let out = open.run(&["diff", &run]);
    assert!(
        text(&out.stdout).contains("+changed"),
        "{}",
        text(&out.stdout)
    );
    // Credentials in the URL would be journaled: refused.
    let out = open.run(&[
        "run",
        "dev",
        "go",
        "--workspace-from",
        "https://me:token@example.test/repo.git",
    ]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("credentials"),
        "{}",
        text(&out.stderr)
    );
}

#[test]
fn a_chat_session_starts_from_a_project_and_only_a_new_one_does() {
    let toren = home("local", "");
    let dir = project(toren.dir.path());
    let from = dir.display().to_string();
    let mut child = toren
        .command(&["chat", "proj", "--agent", "dev", "--workspace-from", &from])
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .stderr(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    std::io::Write::write_all(child.stdin.as_mut().unwrap(), b"improve it\n").unwrap();
    drop(child.stdin.take());
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    let shown = toren.run(&["sessions", "show", "proj", "--json"]);
    let shown: serde_json::Value = serde_json::from_slice(&shown.stdout).unwrap();
    let ws = std::path::PathBuf::from(shown["workspace"].as_str().unwrap());
    assert_eq!(read(&ws.join("hello.txt")), "hello\nchanged\n");
    assert_eq!(git(&ws, &["log", "--format=%s"]), "first\n");
    assert_eq!(read(&dir.join("hello.txt")), "hello\n");
    // An existing session keeps the workspace it has worked in.
    let out = toren.run(&["chat", "proj", "--agent", "dev", "--workspace-from", &from]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out.stderr));
    assert!(
        text(&out.stderr).contains("starts a new session"),
        "{}",
        text(&out.stderr)
    );
}
