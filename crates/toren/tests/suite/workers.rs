//! `toren worker` as processes beside an API-only `toren serve --workers 0`: a worker
//! drives the runs the front queues and drains on SIGTERM, keeps its identity across
//! restarts and shows in `toren workers list`; a worker of another workspace volume leaves
//! a run alone and `toren runs show` says why it waits; two workers share one SQLite file
//! and the survivor finishes a SIGKILLed one's run; a worker cut off from the database
//! (another process holding SQLite's write lock for longer than the lease) loses the
//! lease, stops the command, backs off, and finishes the run once the database is back,
//! the interrupted call run exactly once more; the per-agent limit holds an agent's runs
//! back while other agents' go; three workers on a throwaway Postgres drive each run once;
//! a run no worker can drive (no provider key) is claimed once by each worker, never
//! again, and `toren runs show` and `toren workers list` say who passed it over and why.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::common::{Toren, text};

const TOKEN: &str = "workers-test-token";
const WAIT: Duration = Duration::from_secs(40);

fn home() -> Toren {
    Toren::new()
        .env("TOREN_API_ADDR", "127.0.0.1:0")
        .env("TOREN_API_TOKEN", TOKEN)
        .env("TOREN_LOG", "info")
}

/// A spawned `toren` whose stderr is collected line by line.
struct Process {
    child: Child,
    lines: Arc<Mutex<Vec<String>>>,
}

impl Process {
    fn spawn(toren: &Toren, args: &[&str]) -> Self {
        let mut child = toren.spawn(args);
        let stderr = child.stderr.take().unwrap();
        let lines = Arc::new(Mutex::new(Vec::new()));
        let theirs = Arc::clone(&lines);
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                theirs.lock().unwrap().push(line);
            }
        });
        Self { child, lines }
    }

    /// Waits for a stderr line containing `needle` and returns it.
    fn wait_line(&self, needle: &str) -> String {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(line) = self
                .lines
                .lock()
                .unwrap()
                .iter()
                .find(|l| l.contains(needle))
            {
                return line.clone();
            }
            assert!(
                Instant::now() < deadline,
                "no line with {needle:?} within {WAIT:?}: {:#?}",
                self.lines.lock().unwrap()
            );
            std::thread::sleep(Duration::from_millis(20));
        }
    }

    fn log(&self) -> String {
        self.lines.lock().unwrap().join("\n")
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    fn wait_exit(&mut self) -> Option<i32> {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "did not exit: {}", self.log());
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

impl Drop for Process {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// An API-only front: `toren serve --workers 0`.
struct Front {
    /// Kept so the front lives (and is killed) with the test.
    _process: Process,
    base: String,
    client: reqwest::Client,
}

impl Front {
    fn start(toren: &Toren) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let process = Process::spawn(toren, &["serve", "--workers", "0"]);
        let line = process.wait_line("listening on ");
        let base = line
            .split("listening on ")
            .nth(1)
            .and_then(|rest| rest.split_whitespace().next())
            .unwrap()
            .to_owned();
        Self {
            _process: process,
            base,
            client: reqwest::Client::new(),
        }
    }

    async fn create(&self, agent: &str) -> String {
        let r = self
            .client
            .post(format!("{}/runs", self.base))
            .bearer_auth(TOKEN)
            .json(&json!({"agent": agent, "input": "go"}))
            .send()
            .await
            .unwrap();
        assert_eq!(r.status().as_u16(), 202);
        let run: Value = r.json().await.unwrap();
        run["id"].as_str().unwrap().to_owned()
    }
}

/// An agent whose one bash call waits for a `go` file in its workspace.
fn slow_agent(toren: &Toren) {
    toren.file(
        "s.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"echo x >> starts; while [ ! -f go ]; do sleep 0.02; done; echo ok > done.txt\"}\n  - text: \"finished\"\n",
    );
    toren.agent(
        "slow",
        "name: slow\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
}

/// Waits until the run's status is `status` (by `toren runs show`).
fn wait_status(toren: &Toren, run: &str, status: &str) -> Value {
    let deadline = Instant::now() + WAIT;
    loop {
        let shown = toren.show(run);
        if shown["status"] == status {
            return shown;
        }
        assert!(Instant::now() < deadline, "{run} never {status}: {shown}");
        std::thread::sleep(Duration::from_millis(50));
    }
}

fn wait_file(path: &std::path::Path) {
    let deadline = Instant::now() + WAIT;
    while !path.exists() {
        assert!(
            Instant::now() < deadline,
            "{} never appeared",
            path.display()
        );
        std::thread::sleep(Duration::from_millis(20));
    }
}

/// `toren workers list --json`.
fn workers(toren: &Toren) -> Vec<Value> {
    let out = toren.run(&["workers", "list", "--json"]);
    assert!(out.status.success(), "{}", text(&out.stderr));
    serde_json::from_slice::<Vec<Value>>(&out.stdout).unwrap()
}

/// How many events of `kind` the run has.
fn count(toren: &Toren, run: &str, kind: &str) -> usize {
    toren.event_types(run).iter().filter(|t| *t == kind).count()
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_drives_queued_runs_drains_on_sigterm_and_keeps_its_identity() {
    let toren = home();
    slow_agent(&toren);
    let front = Front::start(&toren);
    let run = front.create("slow").await;
    std::thread::sleep(Duration::from_millis(300));
    assert_eq!(
        toren.show(&run)["status"],
        "queued",
        "an API-only front drives nothing"
    );

    let mut worker = Process::spawn(&toren, &["worker", "--concurrency", "2"]);
    let workspace = toren.workspace(&run);
    wait_file(&workspace.join("starts"));
    // The heartbeat after the claim says which run it drives.
    let deadline = Instant::now() + WAIT;
    let listed = loop {
        let listed = workers(&toren);
        if listed.first().is_some_and(|w| w["runs"] == json!([run])) {
            break listed;
        }
        assert!(Instant::now() < deadline, "{listed:?}");
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(listed.len(), 1, "{listed:?}");
    let first = &listed[0];
    assert_eq!(first["concurrency"], 2);
    assert_eq!(
        first["runs"],
        json!([run]),
        "the list shows the run it drives"
    );
    let id = first["id"].as_str().unwrap().to_owned();
    assert_eq!(
        std::fs::read_to_string(toren.dir.path().join("toren/worker-id"))
            .unwrap()
            .trim(),
        id,
        "the id is kept in TOREN_HOME"
    );
    let human = text(&toren.run(&["workers", "list"]).stdout);
    assert!(
        human.contains(&id) && human.contains(&run) && human.contains("s ago"),
        "{human}"
    );

    // SIGTERM drains: the command under way finishes and is journaled, then it exits 0.
    worker.signal("-TERM");
    std::thread::sleep(Duration::from_millis(200));
    std::fs::write(workspace.join("go"), "").unwrap();
    assert_eq!(worker.wait_exit(), Some(0), "{}", worker.log());
    assert_eq!(count(&toren, &run, "tool_completed"), 1);
    assert_eq!(
        count(&toren, &run, "run_completed"),
        0,
        "it stopped after the step"
    );
    assert_eq!(workers(&toren), Vec::<Value>::new(), "it deregistered");

    // Restarted, it is the same worker (another process) and finishes the run.
    let mut again = Process::spawn(&toren, &["worker"]);
    wait_status(&toren, &run, "completed");
    let listed = workers(&toren);
    assert_eq!(listed.len(), 1);
    assert_eq!(
        listed[0]["id"],
        id.as_str(),
        "the identity survives the restart"
    );
    assert_ne!(listed[0]["instance"], first["instance"], "a new process");
    assert!(
        listed[0]["instance"]
            .as_str()
            .unwrap()
            .starts_with(&format!("{id}@")),
        "the lease holder is the worker id and the process"
    );
    assert_eq!(count(&toren, &run, "tool_started"), 1, "nothing ran twice");
    again.signal("-TERM");
    assert_eq!(again.wait_exit(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_of_another_volume_leaves_the_run_alone_and_runs_show_says_why() {
    let toren = home().env("TOREN_WORKSPACE_VOLUME", "volume-a");
    slow_agent(&toren);
    let front = Front::start(&toren);
    let run = front.create("slow").await;
    assert_eq!(
        toren.show(&run)["volume"],
        "volume-a",
        "the run is pinned to the volume"
    );
    let elsewhere = same_home(
        &toren,
        &[
            ("TOREN_WORKSPACE_VOLUME", "volume-b"),
            ("TOREN_WORKER_ID", "worker-b"),
        ],
    );
    let mut other = Process::spawn(&elsewhere, &["worker"]);
    let deadline = Instant::now() + WAIT;
    while workers(&toren).is_empty() {
        assert!(Instant::now() < deadline, "{}", other.log());
        std::thread::sleep(Duration::from_millis(20));
    }
    std::thread::sleep(Duration::from_millis(500));
    let shown = toren.show(&run);
    assert_eq!(shown["status"], "queued", "left alone: {}", other.log());
    assert_eq!(shown["waiting_for_volume"], "volume-a");
    let human = text(&toren.run(&["runs", "show", &run]).stdout);
    assert!(
        human.contains("volume     volume-a") && human.contains("no live worker serves it"),
        "{human}"
    );

    std::fs::write(toren.workspace(&run).join("go"), "").unwrap();
    let mut here = Process::spawn(
        &same_home(&toren, &[("TOREN_WORKER_ID", "worker-a")]),
        &["worker"],
    );
    let shown = wait_status(&toren, &run, "completed");
    assert_eq!(shown["waiting_for_volume"], Value::Null);
    for process in [&mut other, &mut here] {
        process.signal("-TERM");
        assert_eq!(process.wait_exit(), Some(0));
    }
    assert!(
        !other.log().contains("claimed"),
        "the other volume's worker never claimed it: {}",
        other.log()
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_no_worker_can_drive_is_claimed_once_by_each_and_runs_show_says_why() {
    let toren = home();
    // No provider key in any worker's environment: nobody can drive it.
    toren.agent(
        "keyless",
        "name: keyless\nmodel: anthropic/claude-sonnet-4-5\n",
    );
    toren.file("q.yaml", "turns:\n  - text: \"done\"\n");
    toren.agent("quick", "name: quick\nmodel: scripted/q.yaml\n");
    let front = Front::start(&toren);
    let run = front.create("keyless").await;
    let mut spawned: Vec<Process> = ["worker-a", "worker-b"]
        .iter()
        .map(|id| Process::spawn(&same_home(&toren, &[("TOREN_WORKER_ID", id)]), &["worker"]))
        .collect();
    let deadline = Instant::now() + WAIT;
    let shown = loop {
        let shown = toren.show(&run);
        if shown["passed_over"]
            .as_array()
            .is_some_and(|p| p.len() == 2)
        {
            break shown;
        }
        assert!(
            Instant::now() < deadline,
            "never passed over by both: {shown}"
        );
        std::thread::sleep(Duration::from_millis(50));
    };
    assert_eq!(shown["status"], "queued");
    let passed = shown["passed_over"].as_array().unwrap();
    for (entry, worker) in passed.iter().zip(["worker-a", "worker-b"]) {
        assert_eq!(entry["worker"], worker, "{shown}");
        let reason = entry["reason"].as_str().unwrap();
        assert!(reason.contains("ANTHROPIC_API_KEY"), "{reason}");
    }
    let human = text(&toren.run(&["runs", "show", &run]).stdout);
    assert!(
        human.contains("waiting    passed over by worker worker-a, which cannot drive it: ")
            && human.contains("passed over by worker worker-b"),
        "{human}"
    );
    let listed = workers(&toren);
    assert_eq!(listed.len(), 2, "{listed:?}");
    for worker in &listed {
        assert_eq!(worker["passed_over"][0]["run"], run.as_str(), "{worker}");
    }
    let human = text(&toren.run(&["workers", "list"]).stdout);
    assert!(human.contains(&format!("passed over {run}: ")), "{human}");

    // Both keep claiming other runs, and leave this one alone: one claim each, ever.
    for _ in 0..3 {
        let quick = front.create("quick").await;
        wait_status(&toren, &quick, "completed");
    }
    for process in &mut spawned {
        let claims = process
            .log()
            .lines()
            .filter(|line| line.contains("claimed") && line.contains(&run))
            .count();
        assert_eq!(claims, 1, "{}", process.log());
    }
    assert_eq!(toren.show(&run)["status"], "queued");
    for process in &mut spawned {
        process.signal("-TERM");
        assert_eq!(process.wait_exit(), Some(0));
    }
    // No live worker: nobody is said to pass it over any more.
    assert_eq!(toren.show(&run)["passed_over"], json!([]));
}

/// Another environment on `toren`'s home, agents and database, with `vars` set too.
fn same_home(toren: &Toren, vars: &[(&str, &str)]) -> Toren {
    let mut other = Toren::new();
    for (name, value) in toren.vars() {
        other = other.env(name, value);
    }
    for (name, value) in vars {
        other = other.env(name, value);
    }
    other
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn two_workers_share_one_database_and_the_survivor_finishes_a_killed_ones_run() {
    let toren = home().env("TOREN_LEASE_TTL", "3s");
    slow_agent(&toren);
    let front = Front::start(&toren);
    let one = same_home(&toren, &[("TOREN_WORKER_ID", "one")]);
    let two = same_home(&toren, &[("TOREN_WORKER_ID", "two")]);
    let mut first = Process::spawn(&one, &["worker", "--concurrency", "1"]);
    first.wait_line("driving runs");
    let run = front.create("slow").await;
    let workspace = toren.workspace(&run);
    wait_file(&workspace.join("starts"));
    assert!(first.log().contains("claimed"), "{}", first.log());
    let mut second = Process::spawn(&two, &["worker", "--concurrency", "1"]);
    second.wait_line("driving runs");
    std::thread::sleep(Duration::from_millis(500));
    assert!(
        !second.log().contains("claimed"),
        "a run with a live lease is not claimed: {}",
        second.log()
    );

    first.signal("-KILL");
    assert_eq!(first.wait_exit(), None);
    std::fs::write(workspace.join("go"), "").unwrap();
    wait_status(&toren, &run, "completed");
    second.wait_line("claimed");
    assert_eq!(
        count(&toren, &run, "tool_started"),
        2,
        "the interrupted call ran once more"
    );
    assert_eq!(count(&toren, &run, "tool_completed"), 1);
    assert_eq!(count(&toren, &run, "run_completed"), 1);
    assert_eq!(
        std::fs::read_to_string(workspace.join("starts")).unwrap(),
        "x\nx\n",
        "the command started twice, once per worker"
    );
    second.signal("-TERM");
    assert_eq!(second.wait_exit(), Some(0));
    drop(front);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_worker_cut_off_from_the_database_stops_the_command_backs_off_and_resumes() {
    let toren = home().env("TOREN_LEASE_TTL", "3s");
    slow_agent(&toren);
    let front = Front::start(&toren);
    let mut worker = Process::spawn(&toren, &["worker", "--concurrency", "1"]);
    let run = front.create("slow").await;
    let workspace = toren.workspace(&run);
    wait_file(&workspace.join("starts"));

    // Another process takes SQLite's write lock and keeps it past the lease's ttl: the
    // worker can neither renew nor claim.
    let db = toren.dir.path().join("toren/toren.db");
    let mut lock = Command::new("python3")
        .args([
            "-c",
            "import sqlite3, sys, time\n\
             c = sqlite3.connect(sys.argv[1], isolation_level=None)\n\
             c.execute('BEGIN EXCLUSIVE')\n\
             print('locked', flush=True)\n\
             time.sleep(float(sys.argv[2]))\n\
             c.execute('ROLLBACK')",
            db.to_str().unwrap(),
            "14",
        ])
        .stdout(std::process::Stdio::piped())
        .spawn()
        .unwrap();
    let mut locked = String::new();
    BufReader::new(lock.stdout.take().unwrap())
        .read_line(&mut locked)
        .unwrap();
    assert_eq!(locked.trim(), "locked");
    worker.wait_line("lease lost");
    // The command was stopped with the run's work: it no longer waits for `go`.
    std::fs::write(workspace.join("go"), "").unwrap();
    std::thread::sleep(Duration::from_millis(300));
    assert!(
        !workspace.join("done.txt").exists(),
        "the command was killed: {}",
        worker.log()
    );
    std::fs::remove_file(workspace.join("go")).unwrap();
    worker.wait_line("cannot claim runs");
    assert!(lock.wait().unwrap().success());

    worker.wait_line("claiming runs again");
    std::fs::write(workspace.join("go"), "").unwrap();
    let deadline = Instant::now() + WAIT;
    loop {
        let shown = toren.show(&run);
        if shown["status"] == "completed" {
            break;
        }
        assert!(
            Instant::now() < deadline,
            "not completed: {shown} {:?} {}",
            toren.event_types(&run),
            worker.log()
        );
        std::thread::sleep(Duration::from_millis(50));
    }
    let log = worker.log();
    assert_eq!(
        log.matches("cannot claim runs").count(),
        1,
        "one line per state change, not per retry: {log}"
    );
    assert_eq!(count(&toren, &run, "tool_started"), 2, "re-run once: {log}");
    assert_eq!(count(&toren, &run, "tool_completed"), 1);
    assert_eq!(count(&toren, &run, "run_completed"), 1);
    worker.signal("-TERM");
    assert_eq!(worker.wait_exit(), Some(0));
    drop(front);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn workers_on_postgres_share_the_queue_and_drive_each_run_once() {
    let cluster = toren_test_support::postgres::Cluster::start()
        .unwrap_or_else(|e| panic!("cannot start a test Postgres cluster: {e:#}"));
    let toren = home()
        .env("TOREN_DATABASE_URL", &cluster.url())
        .env("TOREN_QUEUE", "postgres")
        .env("TOREN_WORKSPACE_VOLUME", "shared");
    toren.file(
        "q.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"echo x >> runs\"}\n  - text: \"done\"\n",
    );
    toren.agent(
        "quick",
        "name: quick\nmodel: scripted/q.yaml\nsandbox:\n  approval: never\n",
    );
    let front = Front::start(&toren);
    let mut workers_up: Vec<Process> = ["pg-1", "pg-2", "pg-3"]
        .iter()
        .map(|id| {
            Process::spawn(
                &same_home(&toren, &[("TOREN_WORKER_ID", id)]),
                &["worker", "--concurrency", "2"],
            )
        })
        .collect();
    for worker in &workers_up {
        worker.wait_line("driving runs");
    }
    let deadline = Instant::now() + WAIT;
    while workers(&toren).len() < 3 {
        assert!(Instant::now() < deadline, "{:?}", workers(&toren));
        std::thread::sleep(Duration::from_millis(50));
    }
    let mut runs = Vec::new();
    for _ in 0..12 {
        runs.push(front.create("quick").await);
    }
    for run in &runs {
        wait_status(&toren, run, "completed");
        assert_eq!(count(&toren, run, "tool_started"), 1, "{run} ran once");
        assert_eq!(
            std::fs::read_to_string(toren.workspace(run).join("runs")).unwrap(),
            "x\n"
        );
    }
    // Every run was claimed by exactly one worker (each logs the runs it claims).
    let claims: usize = workers_up
        .iter()
        .map(|w| w.log().matches("claimed").count())
        .sum();
    assert_eq!(claims, runs.len());
    for worker in &mut workers_up {
        worker.signal("-TERM");
        assert_eq!(worker.wait_exit(), Some(0), "{}", worker.log());
    }
    assert_eq!(workers(&toren), Vec::<Value>::new());
    drop(front);
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn the_per_agent_limit_holds_an_agents_second_run_while_another_agent_runs() {
    let toren = home().env("TOREN_AGENT_CONCURRENCY", "1");
    slow_agent(&toren);
    toren.file(
        "q.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"true\"}\n  - text: \"done\"\n",
    );
    toren.agent(
        "quick",
        "name: quick\nmodel: scripted/q.yaml\nsandbox:\n  approval: never\n",
    );
    let front = Front::start(&toren);
    let first = front.create("slow").await;
    let second = front.create("slow").await;
    let other = front.create("quick").await;
    let mut worker = Process::spawn(&toren, &["worker", "--concurrency", "3"]);
    wait_file(&toren.workspace(&first).join("starts"));
    wait_status(&toren, &other, "completed");
    assert_eq!(
        toren.show(&second)["status"],
        "queued",
        "the agent's second run waits while its first holds the one slot the limit gives it"
    );
    std::fs::write(toren.workspace(&first).join("go"), "").unwrap();
    wait_status(&toren, &first, "completed");
    wait_file(&toren.workspace(&second).join("starts"));
    std::fs::write(toren.workspace(&second).join("go"), "").unwrap();
    wait_status(&toren, &second, "completed");
    worker.signal("-TERM");
    assert_eq!(worker.wait_exit(), Some(0));
    drop(front);
}
