//! What every trust probe shares: a scripted agent whose tool calls are the probes (the
//! script is written as JSON, which is YAML), running it through the real `toren` binary,
//! reading each call's result back from `toren events --json`, and looking at the host's
//! processes while a run is under way.

use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Output};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::Backend;
use crate::suite::common::{Toren, text};

/// One tool call the scripted model makes.
#[derive(Clone, Debug)]
pub(crate) struct Call {
    pub(crate) tool: String,
    pub(crate) args: Value,
}

pub(crate) fn call(tool: &str, args: Value) -> Call {
    Call {
        tool: tool.to_owned(),
        args,
    }
}

pub(crate) fn bash(command: &str) -> Call {
    call("bash", json!({ "command": command }))
}

pub(crate) fn bash_for(command: &str, timeout_secs: u64) -> Call {
    call(
        "bash",
        json!({ "command": command, "timeout_secs": timeout_secs }),
    )
}

/// The script: each inner list is one model turn's tool calls, then a final answer.
pub(crate) fn script(turns: &[Vec<Call>]) -> String {
    let mut list: Vec<Value> = turns
        .iter()
        .map(|calls| {
            let calls: Vec<Value> = calls
                .iter()
                .map(|c| {
                    let mut one = serde_json::Map::new();
                    one.insert(c.tool.clone(), c.args.clone());
                    Value::Object(one)
                })
                .collect();
            json!({ "tool_calls": calls })
        })
        .collect();
    list.push(json!({ "text": "probes done" }));
    serde_json::to_string_pretty(&json!({ "turns": list })).unwrap()
}

/// A Toren home for `backend`, with an agent `name` running `turns`.
pub(crate) fn agent(toren: &Toren, name: &str, sandbox_yaml: &str, turns: &[Vec<Call>]) {
    toren.file(&format!("{name}.script.yaml"), &script(turns));
    toren.agent(
        name,
        &format!("name: {name}\nmodel: scripted/{name}.script.yaml\nsandbox:\n{sandbox_yaml}"),
    );
}

pub(crate) fn toren_for(backend: &Backend) -> Toren {
    let toren = Toren::new().env("TOREN_SANDBOX", backend.sandbox);
    if backend.sandbox != "e2b" {
        return toren;
    }
    let fake = FAKE.get_or_init(|| toren_test_support::e2b::FakeE2b::start(E2B_KEY).unwrap());
    toren
        .env("E2B_API_KEY", E2B_KEY)
        .env("E2B_API_URL", &fake.api_url())
        .env("E2B_SANDBOX_URL", &fake.sandbox_url())
}

/// One local E2B service for the test's process (nextest runs each test in its own).
static FAKE: std::sync::OnceLock<toren_test_support::e2b::FakeE2b> = std::sync::OnceLock::new();

/// The local E2B service, once a test under e2b started it.
pub(crate) fn fake() -> Option<&'static toren_test_support::e2b::FakeE2b> {
    FAKE.get()
}

/// The ids of the E2B sandboxes `events` say the run used, in order.
pub(crate) fn sandbox_ids(events: &[Value]) -> Vec<String> {
    let mut ids: Vec<String> = Vec::new();
    for e in events {
        if e["type"] == "sandbox_provisioned"
            && e["backend"] == "e2b"
            && let Some(id) = e["instance"].as_str()
            && !ids.iter().any(|known| known == id)
        {
            ids.push(id.to_owned());
        }
    }
    ids
}

/// Where the files of `run`'s workspace are: the host workspace, or under e2b the disk of
/// the run's last sandbox (before it has one, nothing ran: the host stand-in, empty).
pub(crate) fn workspace(toren: &Toren, run: &str) -> std::path::PathBuf {
    let e2b = FAKE.get().and_then(|fake| {
        let events = toren.events(run);
        let last = events
            .iter()
            .rev()
            .find(|e| e["type"] == "sandbox_provisioned" && e["backend"] == "e2b")?;
        Some(fake.disk(last["instance"].as_str()?)?.workspace())
    });
    e2b.unwrap_or_else(|| toren.workspace(run))
}

/// The API key of the trust suite's local E2B service.
pub(crate) const E2B_KEY: &str = "e2b_0123456789abcdef0123456789abcdef";

/// The outcome of one tool call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Outcome {
    pub(crate) is_error: bool,
    pub(crate) output: String,
}

/// A finished run: the process output, its id, its events and each call's result.
pub(crate) struct Ran {
    pub(crate) out: Output,
    pub(crate) run: String,
    pub(crate) events: Vec<Value>,
    pub(crate) results: BTreeMap<String, Outcome>,
}

impl Ran {
    pub(crate) fn collect(toren: &Toren, out: Output) -> Self {
        let run = toren
            .newest_run()
            .unwrap_or_else(|| panic!("no run was created: {}", text(&out.stderr)));
        let events = toren.events(&run);
        let results = events
            .iter()
            .filter(|e| e["type"] == "tool_completed")
            .map(|e| {
                (
                    e["call_id"].as_str().unwrap().to_owned(),
                    Outcome {
                        is_error: e["is_error"].as_bool().unwrap(),
                        output: e["output"].as_str().unwrap().to_owned(),
                    },
                )
            })
            .collect();
        Self {
            out,
            run,
            events,
            results,
        }
    }

    /// The result of the `index`th call of the script (0-based).
    pub(crate) fn result(&self, index: usize) -> &Outcome {
        let id = format!("call_{}", index + 1);
        self.results
            .get(&id)
            .unwrap_or_else(|| panic!("{id} has no result; stderr:\n{}", text(&self.out.stderr)))
    }

    /// The run ended with the script's final answer: every probe went back to the model.
    pub(crate) fn assert_completed(&self) {
        assert_eq!(
            (self.out.status.code(), text(&self.out.stdout)),
            (Some(0), "probes done\n".to_owned()),
            "stderr:\n{}",
            text(&self.out.stderr)
        );
    }

    /// The whole event log as text.
    pub(crate) fn log_text(&self) -> String {
        self.events
            .iter()
            .map(Value::to_string)
            .collect::<Vec<_>>()
            .join("\n")
    }
}

/// Runs `toren run AGENT` to its end.
pub(crate) fn run(toren: &Toren, agent: &str) -> Ran {
    let out = toren.run(&["run", agent, "--input", "probe"]);
    Ran::collect(toren, out)
}

/// Runs `toren run AGENT`, calling `watch` with the child's pid every few milliseconds
/// until it exits.
pub(crate) fn run_watching(toren: &Toren, agent: &str, mut watch: impl FnMut(u32)) -> Ran {
    let mut child: Child = toren.spawn(&["run", agent, "--input", "probe"]);
    let pid = child.id();
    let deadline = Instant::now() + Duration::from_secs(120);
    while child.try_wait().unwrap().is_none() {
        if Instant::now() >= deadline {
            let _ = child.kill();
            let out = child.wait_with_output().unwrap();
            panic!("the run did not end; stderr:\n{}", text(&out.stderr));
        }
        watch(pid);
        std::thread::sleep(Duration::from_millis(15));
    }
    let out = child.wait_with_output().unwrap();
    Ran::collect(toren, out)
}

/// Every process's pid and command line (NULs shown as spaces).
pub(crate) fn command_lines() -> Vec<(u32, String)> {
    let Ok(entries) = std::fs::read_dir("/proc") else {
        return Vec::new();
    };
    entries
        .flatten()
        .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
        .filter_map(|pid| {
            let raw = std::fs::read(format!("/proc/{pid}/cmdline")).ok()?;
            Some((pid, String::from_utf8_lossy(&raw).replace('\0', " ")))
        })
        .collect()
}

/// Processes (other than this test) whose command line contains `marker`.
pub(crate) fn processes_with(marker: &str) -> Vec<(u32, String)> {
    command_lines()
        .into_iter()
        .filter(|(pid, line)| *pid != std::process::id() && line.contains(marker))
        .collect()
}

/// Waits up to `within` for no process to carry `marker`; the leftovers otherwise.
pub(crate) fn gone(marker: &str, within: Duration) -> Vec<(u32, String)> {
    let deadline = Instant::now() + within;
    loop {
        let left = processes_with(marker);
        if left.is_empty() || Instant::now() >= deadline {
            return left;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
}

/// `VmHWM` (peak resident memory) of `pid` in KiB.
pub(crate) fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))?
        .trim()
        .trim_end_matches("kB")
        .trim()
        .parse()
        .ok()
}

/// Every regular file under `dir`, recursively (symlinks not followed).
pub(crate) fn files_under(dir: &Path) -> Vec<std::path::PathBuf> {
    let mut found = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(dir) = stack.pop() {
        let Ok(entries) = std::fs::read_dir(&dir) else {
            continue;
        };
        for entry in entries.flatten() {
            let kind = entry.file_type().unwrap();
            if kind.is_dir() {
                stack.push(entry.path());
            } else if kind.is_file() {
                found.push(entry.path());
            }
        }
    }
    found.sort();
    found
}

/// Whether `haystack` contains `needle` as bytes.
pub(crate) fn contains(haystack: &[u8], needle: &str) -> bool {
    haystack
        .windows(needle.len())
        .any(|w| w == needle.as_bytes())
}
