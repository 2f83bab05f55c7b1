//! The documentation read against the code, so that it cannot drift from it: every agent
//! file a Markdown page shows passes the real binary's `toren check`, the HTTP API
//! walkthrough works when pasted as one block, every environment variable a page names is
//! one something in the repository reads, every variable Toren reads is in the table of
//! docs/configuration.md with the default it has, every file a page names is there, every
//! API route a page names is one the server serves (and docs/http-api.md's table lists
//! them all), ARCHITECTURE.md maps every crate, docs/dependencies.md explains every dependency,
//! and the Compose tier's `.env.example` shows every variable its compose file reads. What
//! a test cannot read (a sentence that says a feature is missing when it is there) is left
//! to review.
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

/// The HTTP API page's block that starts `toren serve` in the background and drives a run
/// with curl.
fn api_walkthrough() -> Fence {
    let mut blocks: Vec<Fence> = fenced_blocks(&read(&repo_root().join("docs/http-api.md")))
        .into_iter()
        .filter(|fence| fence.body.contains(" toren serve &"))
        .collect();
    assert_eq!(blocks.len(), 1, "one walkthrough on the page: {blocks:?}");
    blocks.remove(0)
}

#[test]
fn the_api_walkthrough_works_when_pasted_as_one_block() {
    // As a new user pastes it: one shell, nothing configured but a HOME of its own (the
    // token is made in ~/.toren), run from the repository root. Only the address differs
    // (a free port instead of 7420).
    for tool in ["curl", "jq"] {
        let found = Command::new("sh")
            .args(["-c", &format!("command -v {tool}")])
            .output()
            .unwrap();
        assert!(
            found.status.success(),
            "the walkthrough needs {tool}: scripts/setup installs it"
        );
    }
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
        "the walkthrough ends with what the page says\nstdout:\n{out}\nstderr:\n{err}"
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

/// Variables the docs name that are not Toren's settings, each with a file of the
/// repository that reads it (which must name it) or, for another program's, `None`.
const NOT_SETTINGS: &[(&str, Option<&str>)] = &[
    // The Compose tier's `.env`, read by its compose file.
    ("TOREN_PORT", Some("deploy/compose/compose.yaml")),
    ("TOREN_AGENTS_DIR", Some("deploy/compose/compose.yaml")),
    ("TOREN_POSTGRES_IMAGE", Some("deploy/compose/compose.yaml")),
    // Knobs of the test suites.
    (
        "TOREN_CHAOS_KILLS",
        Some("crates/toren/tests/suite/chaos.rs"),
    ),
    (
        "TOREN_UPDATE_OPENAPI",
        Some("crates/toren-server/tests/openapi.rs"),
    ),
    // Ollama's own: its server's context length.
    ("OLLAMA_CONTEXT_LENGTH", None),
];

/// The prefixes of the variables Toren and the programs it talks to read.
const PREFIXES: &[&str] = &[
    "TOREN_",
    "E2B_",
    "TELEGRAM_",
    "ANTHROPIC_",
    "OPENAI_",
    "OLLAMA_",
    "DOCKER_",
    "AWS_",
];

/// Every word of `text` that is a variable name with one of [`PREFIXES`], with its line.
fn variables_named(text: &str) -> Vec<(usize, String)> {
    let mut found = Vec::new();
    for (index, line) in text.lines().enumerate() {
        let words =
            line.split(|c: char| !(c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_'));
        for word in words {
            let word = word.trim_end_matches('_');
            if PREFIXES
                .iter()
                .any(|p| word.starts_with(p) && word.len() > p.len())
            {
                found.push((index + 1, word.to_owned()));
            }
        }
    }
    found
}

#[test]
fn every_variable_the_docs_name_is_read_by_something() {
    let mut unknown = Vec::new();
    for page in pages() {
        for (line, name) in variables_named(&read(&page)) {
            if toren_config::env_vars::lookup(&name).is_some() {
                continue;
            }
            match NOT_SETTINGS.iter().find(|(n, _)| *n == name) {
                Some((_, None)) => {}
                Some((_, Some(file))) => {
                    assert!(
                        read(&repo_root().join(file)).contains(&name),
                        "{file} no longer reads {name}: take it out of NOT_SETTINGS"
                    );
                }
                None => unknown.push(format!("{}:{line}: {name}", shown(&page))),
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "variables the docs name that nothing reads (a setting Toren does not have, or a \
         misspelling):\n{}",
        unknown.join("\n")
    );
}

/// A row of the configuration page's table: the variables it names and its default.
struct Row {
    names: Vec<String>,
    default: String,
}

/// The rows of the configuration page's table (`docs/configuration.md`).
fn configuration_rows(page: &str) -> Vec<Row> {
    let rows: Vec<Row> = page
        .lines()
        .filter(|line| line.starts_with("| `"))
        .map(|row| {
            let mut cells = row.trim_start_matches("| ").split(" | ");
            let names = cells.next().unwrap_or_default();
            Row {
                names: names
                    .split('`')
                    .skip(1)
                    .step_by(2)
                    .map(str::to_owned)
                    .collect(),
                default: cells.next().unwrap_or_default().to_owned(),
            }
        })
        .collect();
    assert!(
        rows.len() > 20,
        "read the configuration table: {} rows",
        rows.len()
    );
    rows
}

/// The names in the first column of the configuration page's table.
fn configuration_table() -> Vec<String> {
    configuration_rows(&read(&repo_root().join("docs/configuration.md")))
        .into_iter()
        .flat_map(|row| row.names)
        .collect()
}

#[test]
fn every_variable_toren_reads_is_in_the_configuration_table() {
    // The registry is every variable the binary reads (settings::only_wiring_reads_the_environment).
    let table = configuration_table();
    let missing: Vec<&str> = toren_config::ENV_VARS
        .iter()
        .map(|var| var.name)
        .filter(|name| !table.iter().any(|row| row == name))
        .collect();
    assert!(
        missing.is_empty(),
        "read by Toren but not in docs/configuration.md's table: {missing:?}"
    );
    let stray: Vec<&String> = table
        .iter()
        .filter(|name| toren_config::env_vars::lookup(name).is_none())
        .collect();
    assert!(
        stray.is_empty(),
        "in the configuration table but not read by Toren: {stray:?}"
    );
}

#[test]
fn the_configuration_table_states_the_defaults_toren_uses() {
    // A default that is one literal value is stated first, exactly; the others (derived
    // from another variable, or described) are read by eye.
    let page = read(&repo_root().join("docs/configuration.md"));
    let mut wrong = Vec::new();
    let mut compared = 0;
    for row in configuration_rows(&page) {
        for name in &row.names {
            let Some(var) = toren_config::env_vars::lookup(name) else {
                continue;
            };
            let Some(default) = var.default.filter(|d| !d.contains(['$', ' '])) else {
                continue;
            };
            compared += 1;
            // The value first, then perhaps where another applies: `warn` (`info` for …).
            let stated = format!("`{default}`");
            let rest = row.default.strip_prefix(&stated);
            if !rest.is_some_and(|rest| rest.is_empty() || rest.starts_with(" (")) {
                wrong.push(format!(
                    "{name}: the table says {}, Toren uses `{default}`",
                    row.default
                ));
            }
        }
    }
    assert!(wrong.is_empty(), "{}", wrong.join("\n"));
    assert!(compared > 10, "only {compared} defaults compared");
}

/// Paths the docs name that exist only once something makes them.
const NOT_YET_THERE: &[&str] = &[
    // proptest writes it when a property first fails (docs/fuzzing.md says so).
    "crates/toren-sandbox/tests/suite/proptest-regressions/fuzz_paths.txt",
];

#[test]
fn every_file_the_docs_name_is_there() {
    let root = repo_root();
    let mut missing = Vec::new();
    for page in pages() {
        for (index, line) in read(&page).lines().enumerate() {
            for quoted in line.split('`').skip(1).step_by(2) {
                let path = quoted.trim_start_matches("./");
                let path = path.split([' ', ':']).next().unwrap_or_default();
                let ours = [
                    "crates/",
                    "scripts/",
                    "deploy/",
                    "docs/",
                    "examples/",
                    "docker/",
                ]
                .iter()
                .any(|dir| path.starts_with(dir));
                if ours && !NOT_YET_THERE.contains(&path) && !root.join(path).exists() {
                    missing.push(format!("{}:{}: {path}", shown(&page), index + 1));
                }
            }
        }
    }
    assert!(
        missing.is_empty(),
        "named but not there:\n{}",
        missing.join("\n")
    );
}

/// `(method, path)` with every `{parameter}` written `{}`.
fn route(method: &str, path: &str) -> (String, String) {
    let mut normal = String::new();
    let mut in_parameter = false;
    for c in path.chars() {
        match c {
            '{' => {
                in_parameter = true;
                normal.push_str("{}");
            }
            '}' => in_parameter = false,
            _ if !in_parameter => normal.push(c),
            _ => {}
        }
    }
    (method.to_ascii_uppercase(), normal)
}

/// Every `METHOD /path` in `line` (outside the web page's `/ui`).
fn routes_named(line: &str) -> Vec<(String, String)> {
    let mut found = Vec::new();
    for method in ["GET", "POST", "DELETE", "PUT", "PATCH"] {
        for (at, _) in line.match_indices(&format!("{method} /")) {
            let rest = &line[at + method.len() + 1..];
            let path: String = rest
                .chars()
                .take_while(|c| c.is_ascii_alphanumeric() || "/{}_.-".contains(*c))
                .collect();
            let path = path.trim_end_matches('.');
            if !path.starts_with("/ui") {
                found.push(route(method, path));
            }
        }
    }
    found
}

#[test]
fn the_api_routes_the_docs_name_are_the_ones_it_serves() {
    let spec: serde_json::Value =
        serde_json::from_str(&read(&repo_root().join("crates/toren-server/openapi.json"))).unwrap();
    let served: Vec<(String, String)> = spec["paths"]
        .as_object()
        .unwrap()
        .iter()
        .flat_map(|(path, methods)| {
            methods
                .as_object()
                .unwrap()
                .keys()
                .map(|method| route(method, path))
                .collect::<Vec<_>>()
        })
        .collect();
    assert!(served.len() > 20, "read the OpenAPI document: {served:?}");
    // Routes of other services the docs talk about (E2B's control plane).
    let others = [route("POST", "/sandboxes")];
    let mut unknown = Vec::new();
    for page in pages() {
        for (index, line) in read(&page).lines().enumerate() {
            for named in routes_named(line) {
                if !served.contains(&named) && !others.contains(&named) {
                    unknown.push(format!(
                        "{}:{}: {} {}",
                        shown(&page),
                        index + 1,
                        named.0,
                        named.1
                    ));
                }
            }
        }
    }
    assert!(
        unknown.is_empty(),
        "routes Toren does not serve:\n{}",
        unknown.join("\n")
    );
    // And the HTTP API page's route table lists every route (a directory listing, `files`
    // or `files/`, is the row of `files/{path}`).
    let api = read(&repo_root().join("docs/http-api.md"));
    let listed: Vec<(String, String)> = api
        .lines()
        .filter(|line| line.starts_with("| `"))
        .flat_map(|row| routes_named(row.split(" | ").next().unwrap()))
        .collect();
    let unlisted: Vec<String> = served
        .iter()
        .filter(|(method, path)| {
            let listing = path.trim_end_matches('/').ends_with("/files");
            let as_listed = if listing {
                route(method, &format!("{}/{{path}}", path.trim_end_matches('/')))
            } else {
                (method.clone(), path.clone())
            };
            !listed.contains(&as_listed)
        })
        .map(|(method, path)| format!("{method} {path}"))
        .collect();
    assert!(
        unlisted.is_empty(),
        "served but not in docs/http-api.md's route table: {unlisted:?}"
    );
}

#[test]
fn architecture_maps_every_crate() {
    let architecture = read(&repo_root().join("ARCHITECTURE.md"));
    let mut crates: Vec<String> = std::fs::read_dir(repo_root().join("crates"))
        .unwrap()
        .map(|entry| entry.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    crates.sort();
    let unmapped: Vec<&String> = crates
        .iter()
        .filter(|name| !architecture.contains(&format!("\n| `{name}` |")))
        .collect();
    assert!(crates.len() > 10, "found the crates: {crates:?}");
    assert!(
        unmapped.is_empty(),
        "crates without a row in ARCHITECTURE.md's table: {unmapped:?}"
    );
}

/// The names a table row's first cell gives in backticks, leaving out what is in
/// parentheses (features: `axum` (`query` too)).
fn first_cell_names(row: &str) -> Vec<String> {
    let first = row
        .trim_start_matches("| ")
        .split(" | ")
        .next()
        .unwrap_or_default();
    let mut outside = String::new();
    let mut depth = 0usize;
    for c in first.chars() {
        match c {
            '(' => depth += 1,
            ')' => depth = depth.saturating_sub(1),
            _ if depth == 0 => outside.push(c),
            _ => {}
        }
    }
    outside
        .split('`')
        .skip(1)
        .step_by(2)
        .map(str::to_owned)
        .collect()
}

#[test]
fn every_dependency_has_its_reason_in_docs_dependencies() {
    let manifest = read(&repo_root().join("Cargo.toml"));
    let section = manifest
        .split("\n[workspace.dependencies]\n")
        .nth(1)
        .expect("the root Cargo.toml has [workspace.dependencies]");
    let section = section.split("\n[").next().unwrap();
    let dependencies: Vec<&str> = section
        .lines()
        .filter_map(|line| line.split_once('=').map(|(name, _)| name.trim()))
        .filter(|name| !name.is_empty() && !name.starts_with('#') && !name.starts_with("toren"))
        .collect();
    assert!(
        dependencies.len() > 20,
        "read the dependencies: {dependencies:?}"
    );
    let page = read(&repo_root().join("docs/dependencies.md"));
    let named: Vec<String> = page
        .lines()
        .filter(|line| line.starts_with("| "))
        .flat_map(first_cell_names)
        .collect();
    let unexplained: Vec<&&str> = dependencies
        .iter()
        .filter(|dep| !named.iter().any(|name| name == *dep))
        .collect();
    assert!(
        unexplained.is_empty(),
        "workspace dependencies docs/dependencies.md does not explain: {unexplained:?}"
    );
    let gone: Vec<&String> = named
        .iter()
        .filter(|name| !dependencies.contains(&name.as_str()))
        .collect();
    assert!(
        gone.is_empty(),
        "docs/dependencies.md explains crates the workspace does not depend on: {gone:?}"
    );
}

#[test]
fn the_compose_env_example_names_every_variable_the_compose_file_reads() {
    let compose = read(&repo_root().join("deploy/compose/compose.yaml"));
    let example = read(&repo_root().join("deploy/compose/.env.example"));
    let mut read_by_compose: Vec<&str> = compose
        .split("${")
        .skip(1)
        .filter_map(|rest| rest.split([':', '}', '-']).next())
        .collect();
    read_by_compose.sort_unstable();
    read_by_compose.dedup();
    assert!(
        read_by_compose.contains(&"POSTGRES_PASSWORD"),
        "read the compose file's variables: {read_by_compose:?}"
    );
    let unnamed: Vec<&&str> = read_by_compose
        .iter()
        .filter(|name| !example.contains(&format!("{name}=")))
        .collect();
    assert!(
        unnamed.is_empty(),
        "compose.yaml reads variables .env.example does not show: {unnamed:?}"
    );
}

#[test]
fn every_command_is_in_the_readmes_commands_table() {
    let out = Toren::new().run(&["--help"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    let help = text(&out.stdout);
    let commands: Vec<&str> = help
        .split("Commands:\n")
        .nth(1)
        .expect("toren --help lists its commands")
        .lines()
        .take_while(|line| !line.trim().is_empty())
        // A command's line starts two spaces in; its description's continuation further.
        .filter(|line| line.starts_with("  ") && !line.starts_with("   "))
        .filter_map(|line| line.split_whitespace().next())
        .filter(|name| *name != "help")
        .collect();
    assert!(commands.len() > 15, "read the commands: {commands:?}");
    let readme = read(&repo_root().join("README.md"));
    let table = readme
        .split("\n## Commands\n")
        .nth(1)
        .expect("the README has a Commands section");
    let table = table.split("\n## ").next().unwrap();
    let missing: Vec<&&str> = commands
        .iter()
        .filter(|name| !table.contains(&format!("`toren {name}")))
        .collect();
    assert!(
        missing.is_empty(),
        "commands the README's table does not list: {missing:?}"
    );
}

/// Code and docs say what the code does and why, never which issue asked for it: a reader
/// without the tracker learns nothing from an issue number. Applied migrations are the one
/// exception: their text is checksummed by the databases that ran them, so it never
/// changes.
#[test]
fn no_file_cites_an_issue_number() {
    let listed = std::process::Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(repo_root())
        .output()
        .unwrap();
    assert!(
        listed.status.success(),
        "git ls-files: {}",
        text(&listed.stderr)
    );
    let mut cited = Vec::new();
    for name in text(&listed.stdout).split('\0').filter(|n| !n.is_empty()) {
        if name.contains("/migrations/") {
            continue;
        }
        let Ok(content) = std::fs::read_to_string(repo_root().join(name)) else {
            continue;
        };
        for (number, line) in content.lines().enumerate() {
            let lower = line.to_ascii_lowercase();
            let cites = lower.match_indices("issue ").any(|(at, _)| {
                lower[at + "issue ".len()..]
                    .chars()
                    .next()
                    .is_some_and(|c| c.is_ascii_digit() || c == '#')
            });
            if cites {
                cited.push(format!("{name}:{}: {}", number + 1, line.trim()));
            }
        }
    }
    assert!(
        cited.is_empty(),
        "history references:\n{}",
        cited.join("\n")
    );
}
