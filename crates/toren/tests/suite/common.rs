//! A hermetic Toren home per test and helpers to run the real `toren` binary in it.

use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::time::{Duration, Instant};

use serde_json::Value;
use tempfile::TempDir;

/// A temporary `TOREN_HOME` with an agents directory; every command runs with a cleared
/// environment plus exactly the variables set here.
pub(crate) struct Toren {
    pub(crate) dir: TempDir,
    env: Vec<(String, String)>,
}

impl Toren {
    pub(crate) fn new() -> Self {
        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir_all(dir.path().join("agents")).unwrap();
        let home = dir.path().join("home");
        let env = vec![
            ("PATH".to_owned(), std::env::var("PATH").unwrap_or_default()),
            ("HOME".to_owned(), home.display().to_string()),
            (
                "TOREN_HOME".to_owned(),
                dir.path().join("toren").display().to_string(),
            ),
            (
                "TOREN_AGENTS".to_owned(),
                dir.path().join("agents").display().to_string(),
            ),
            ("TOREN_SANDBOX".to_owned(), "local".to_owned()),
        ];
        Self { dir, env }
    }

    pub(crate) fn env(mut self, name: &str, value: &str) -> Self {
        self.env.retain(|(n, _)| n != name);
        self.env.push((name.to_owned(), value.to_owned()));
        self
    }

    /// The environment every command runs with.
    pub(crate) fn vars(&self) -> &[(String, String)] {
        &self.env
    }

    pub(crate) fn agents(&self) -> PathBuf {
        self.dir.path().join("agents")
    }

    pub(crate) fn sandbox_root(&self) -> PathBuf {
        self.dir.path().join("toren").join("sandboxes")
    }

    /// Writes `agents/<name>.yaml` and returns its path.
    pub(crate) fn agent(&self, name: &str, yaml: &str) -> PathBuf {
        let path = self.agents().join(format!("{name}.yaml"));
        std::fs::write(&path, yaml).unwrap();
        path
    }

    /// Writes a file beside the agents (e.g. a script for the scripted model).
    pub(crate) fn file(&self, name: &str, content: &str) -> PathBuf {
        let path = self.agents().join(name);
        std::fs::write(&path, content).unwrap();
        path
    }

    pub(crate) fn command(&self, args: &[&str]) -> Command {
        let mut cmd = Command::new(env!("CARGO_BIN_EXE_toren"));
        cmd.args(args).env_clear().stdin(Stdio::null());
        for (name, value) in &self.env {
            cmd.env(name, value);
        }
        cmd
    }

    pub(crate) fn run(&self, args: &[&str]) -> Output {
        self.command(args).output().unwrap()
    }

    pub(crate) fn spawn(&self, args: &[&str]) -> Child {
        self.command(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap()
    }

    /// `toren events RUN --json`, parsed.
    pub(crate) fn events(&self, run: &str) -> Vec<Value> {
        let out = self.run(&["events", run, "--json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        text(&out.stdout)
            .lines()
            .map(|l| serde_json::from_str(l).unwrap())
            .collect()
    }

    /// The `type` of every event of the run, in order.
    pub(crate) fn event_types(&self, run: &str) -> Vec<String> {
        self.events(run)
            .iter()
            .map(|e| e["type"].as_str().unwrap().to_owned())
            .collect()
    }

    /// `toren runs show RUN --json`, parsed.
    pub(crate) fn show(&self, run: &str) -> Value {
        let out = self.run(&["runs", "show", run, "--json"]);
        assert!(out.status.success(), "{}", text(&out.stderr));
        serde_json::from_slice(&out.stdout).unwrap()
    }

    /// The id of the newest run.
    pub(crate) fn newest_run(&self) -> Option<String> {
        let out = self.run(&["runs", "list", "--json"]);
        let runs: Value = serde_json::from_slice(&out.stdout).ok()?;
        runs.get(0)?["id"].as_str().map(str::to_owned)
    }

    /// Waits until the newest run has `status`, returning its id. `child` is the `toren run`
    /// expected to get there; if it exits first, its output explains why.
    pub(crate) fn wait_for_status(&self, child: &mut Child, status: &str) -> String {
        let deadline = Instant::now() + Duration::from_secs(30);
        loop {
            if let Some(run) = self.newest_run()
                && self.show(&run)["status"] == status
            {
                return run;
            }
            if let Some(exit) = child.try_wait().unwrap() {
                let mut stderr = String::new();
                std::io::Read::read_to_string(child.stderr.as_mut().unwrap(), &mut stderr).unwrap();
                panic!("toren run exited ({exit}) before reaching {status}: {stderr}");
            }
            assert!(Instant::now() < deadline, "no run reached status {status}");
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    /// The host path of `run`'s workspace (inside the run's private directory).
    pub(crate) fn workspace(&self, run: &str) -> PathBuf {
        toren_sandbox::workspace_path(&self.sandbox_root(), run)
    }
}

/// Sends Ctrl-C (SIGINT) to a spawned `toren`.
pub(crate) fn interrupt(child: &Child) {
    let kill = Command::new("kill")
        .args(["-INT", &child.id().to_string()])
        .status()
        .unwrap();
    assert!(kill.success());
}

pub(crate) fn text(bytes: &[u8]) -> String {
    String::from_utf8_lossy(bytes).into_owned()
}

pub(crate) fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The root of the repository (the workspace), where the docs and examples live.
pub(crate) fn repo_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

/// A fenced code block of a Markdown page: its info string (`yaml agent`), the line of its
/// opening fence (1-based) and its body.
#[derive(Debug)]
pub(crate) struct Fence {
    pub(crate) info: String,
    pub(crate) line: usize,
    pub(crate) body: String,
}

/// Every ```-fenced block of `markdown`, in order (indented fences, as in lists, included).
pub(crate) fn fenced_blocks(markdown: &str) -> Vec<Fence> {
    let mut blocks = Vec::new();
    let mut open: Option<Fence> = None;
    for (index, line) in markdown.lines().enumerate() {
        let trimmed = line.trim_start();
        match open.as_mut() {
            None => {
                if let Some(info) = trimmed.strip_prefix("```") {
                    open = Some(Fence {
                        info: info.trim().to_owned(),
                        line: index + 1,
                        body: String::new(),
                    });
                }
            }
            Some(fence) => {
                if trimmed.trim_end() == "```" {
                    blocks.extend(open.take());
                } else {
                    fence.body.push_str(line);
                    fence.body.push('\n');
                }
            }
        }
    }
    assert!(open.is_none(), "a fence opened and never closed: {open:?}");
    blocks
}

/// A loopback port nobody listens on now.
pub(crate) fn free_port() -> u16 {
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A fake model's answer that makes one bash call `id` running `command`.
pub(crate) fn bash(id: &str, command: &str) -> toren_test_support::Reply {
    toren_test_support::Reply::Turn(toren_protocol::AssistantMessage {
        text: String::new(),
        tool_calls: vec![toren_protocol::ToolCall::new(
            id,
            "bash",
            serde_json::json!({ "command": command }),
        )],
    })
}

/// The seq of the first event of type `kind` for the call `call`.
pub(crate) fn seq_of(events: &[Value], kind: &str, call: &str) -> u64 {
    events
        .iter()
        .find(|e| e["type"] == kind && e["call_id"] == call)
        .and_then(|e| e["seq"].as_u64())
        .unwrap_or_else(|| panic!("no {kind} for {call}"))
}

/// The commands of the bash calls in an OpenAI-wire request's conversation.
pub(crate) fn commands_sent(request: &Value) -> Vec<String> {
    request["messages"]
        .as_array()
        .unwrap()
        .iter()
        .flat_map(|m| m["tool_calls"].as_array().cloned().unwrap_or_default())
        .map(|c| {
            let args: Value =
                serde_json::from_str(c["function"]["arguments"].as_str().unwrap()).unwrap();
            args["command"].as_str().unwrap().to_owned()
        })
        .collect()
}
