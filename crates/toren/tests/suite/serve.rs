//! `toren serve` as a process on a loopback port: runs created over the API are driven to
//! completion by its workers, SIGTERM exits 0, a run left unfinished by a SIGKILLed
//! server is completed by the next one, and a two-turn session's second turn carries the
//! first, with the file it wrote downloaded over the API.

use std::io::{BufRead as _, BufReader};
use std::process::{Child, Command};
use std::time::{Duration, Instant};

use serde_json::{Value, json};

use super::common::Toren;

const TOKEN: &str = "serve-test-token";
const WAIT: Duration = Duration::from_secs(30);

/// A running `toren serve` and the address it said it listens on.
struct Server {
    child: Child,
    base: String,
    client: reqwest::Client,
}

impl Server {
    fn start(toren: &Toren) -> Self {
        Self::start_with(toren, &["--workers", "2"])
    }

    fn start_with(toren: &Toren, args: &[&str]) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut child = toren.spawn(&[&["serve"], args].concat());
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if let Some(rest) = line.split("listening on ").nth(1) {
                    let addr = rest
                        .split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned();
                    let _ = tx.send(addr);
                }
            }
        });
        let base = rx.recv_timeout(WAIT).expect("toren serve says its address");
        Self {
            child,
            base,
            client: reqwest::Client::new(),
        }
    }

    async fn post(&self, path: &str, body: Value) -> (u16, Value) {
        let r = self
            .client
            .post(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
            .json(&body)
            .send()
            .await
            .unwrap();
        (r.status().as_u16(), r.json().await.unwrap())
    }

    async fn get(&self, path: &str) -> Value {
        let r = self
            .client
            .get(format!("{}{path}", self.base))
            .bearer_auth(TOKEN)
            .send()
            .await
            .unwrap();
        assert!(r.status().is_success(), "GET {path}: {}", r.status());
        r.json().await.unwrap()
    }

    async fn create(&self, agent: &str) -> String {
        let (status, run) = self
            .post("/runs", json!({"agent": agent, "input": "go"}))
            .await;
        assert_eq!(status, 202, "{run}");
        run["id"].as_str().unwrap().to_owned()
    }

    /// Waits until `pred` holds of the run's events.
    async fn wait_events(&self, run: &str, what: &str, pred: impl Fn(&[Value]) -> bool) {
        let deadline = Instant::now() + WAIT;
        loop {
            let events = self.get(&format!("/runs/{run}/events?format=json")).await;
            let events = events.as_array().unwrap();
            if pred(events) {
                return;
            }
            let types: Vec<&Value> = events.iter().map(|e| &e["type"]).collect();
            assert!(
                Instant::now() < deadline,
                "{what}: not within {WAIT:?}: {types:?}"
            );
            tokio::time::sleep(Duration::from_millis(20)).await;
        }
    }

    async fn wait_completed(&self, run: &str) {
        self.wait_events(run, "run_completed", |e| {
            e.last().is_some_and(|e| e["type"] == "run_completed")
        })
        .await;
    }

    fn signal(&self, signal: &str) {
        let status = Command::new("kill")
            .args([signal, &self.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    }

    /// Waits for the process to exit and returns its exit code.
    fn wait_exit(mut self) -> Option<i32> {
        let deadline = Instant::now() + WAIT;
        loop {
            if let Some(status) = self.child.try_wait().unwrap() {
                return status.code();
            }
            assert!(Instant::now() < deadline, "toren serve did not exit");
            std::thread::sleep(Duration::from_millis(20));
        }
    }
}

fn home() -> Toren {
    Toren::new()
        .env("TOREN_API_ADDR", "127.0.0.1:0")
        .env("TOREN_API_TOKEN", TOKEN)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_drives_a_run_created_over_the_api_and_exits_0_on_sigterm() {
    let toren = home();
    toren.file("s.yaml", "turns:\n  - tool_calls:\n      - bash: {command: \"echo hi > out.txt\"}\n  - text: \"done\"\n");
    toren.agent(
        "free",
        "name: free\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    let server = Server::start(&toren);

    let unauthorized = server
        .client
        .get(format!("{}/runs", server.base))
        .send()
        .await
        .unwrap();
    assert_eq!(unauthorized.status().as_u16(), 401);

    let run = server.create("free").await;
    server.wait_completed(&run).await;
    let got = server.get(&format!("/runs/{run}")).await;
    assert_eq!(got["status"], "completed");
    assert_eq!(
        std::fs::read_to_string(toren.workspace(&run).join("out.txt")).unwrap(),
        "hi\n"
    );

    // The SSE stream of an ended run: every event, then the end.
    let sse = server
        .client
        .get(format!("{}/runs/{run}/events", server.base))
        .bearer_auth(TOKEN)
        .header("Last-Event-ID", "1")
        .send()
        .await
        .unwrap()
        .text()
        .await
        .unwrap();
    assert!(!sse.contains("id: 1\n") && sse.contains("id: 2\n"), "{sse}");
    assert!(sse.contains("event: run_completed"), "{sse}");

    server.signal("-TERM");
    assert_eq!(server.wait_exit(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_left_by_a_killed_server_is_completed_by_the_next_one() {
    let toren = home();
    toren.file(
        "s.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"touch started; while [ ! -f go ]; do sleep 0.02; done; echo ok > done.txt\"}\n  - text: \"finished\"\n",
    );
    toren.agent(
        "slow",
        "name: slow\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    let first = Server::start(&toren);
    let run = first.create("slow").await;
    let workspace = toren.workspace(&run);
    first
        .wait_events(&run, "the command started", |_| {
            workspace.join("started").exists()
        })
        .await;
    first.signal("-KILL");
    assert_eq!(first.wait_exit(), None, "killed by a signal");

    // Nobody drives it now; the next server claims it and runs the call again.
    std::fs::write(workspace.join("go"), "").unwrap();
    let second = Server::start(&toren);
    second.wait_completed(&run).await;
    assert_eq!(
        std::fs::read_to_string(workspace.join("done.txt")).unwrap(),
        "ok\n"
    );
    let run_view = second.get(&format!("/runs/{run}")).await;
    assert_eq!(run_view["status"], "completed");
    second.signal("-TERM");
    assert_eq!(second.wait_exit(), Some(0));
}

#[test]
fn serve_refuses_a_non_loopback_address_without_a_token() {
    let toren = Toren::new().env("TOREN_API_ADDR", "0.0.0.0:0");
    let out = toren.run(&["serve"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(stderr.contains("TOREN_API_TOKEN"), "{stderr}");
    assert!(!stderr.contains("listening"), "{stderr}");
}

#[test]
fn serve_refuses_a_queue_it_does_not_have_and_postgres_without_a_postgres_store() {
    let out = home().env("TOREN_QUEUE", "sqs").run(&["serve"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("TOREN_QUEUE") && stderr.contains("`local`"),
        "{stderr}"
    );
    assert!(!stderr.contains("listening"), "{stderr}");
    let out = home().env("TOREN_QUEUE", "postgres").run(&["serve"]);
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("TOREN_QUEUE=postgres") && stderr.contains("TOREN_DATABASE_URL"),
        "{stderr}"
    );
    assert!(!stderr.contains("listening"), "{stderr}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn on_loopback_without_a_token_serve_makes_one_only_its_owner_can_read() {
    use std::os::unix::fs::PermissionsExt as _;
    let toren = Toren::new().env("TOREN_API_ADDR", "127.0.0.1:0");
    let server = Server::start(&toren);
    let path = toren.dir.path().join("toren").join("api-token");
    let token = std::fs::read_to_string(&path).unwrap().trim().to_owned();
    assert!(token.len() >= 32, "{token}");
    let mode = std::fs::metadata(&path).unwrap().permissions().mode();
    assert_eq!(mode & 0o777, 0o600);
    let get = |token: &str| {
        server
            .client
            .get(format!("{}/runs", server.base))
            .bearer_auth(token)
            .send()
    };
    assert_eq!(get(&token).await.unwrap().status().as_u16(), 200);
    assert_eq!(get(TOKEN).await.unwrap().status().as_u16(), 401);
    server.signal("-TERM");
    assert_eq!(server.wait_exit(), Some(0));

    // The next start keeps the same token.
    let again = Server::start(&toren);
    assert_eq!(
        std::fs::read_to_string(&path).unwrap().trim(),
        token,
        "the token changed"
    );
    again.signal("-TERM");
    assert_eq!(again.wait_exit(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_bash_call_approved_over_the_api_runs_and_records_who_decided() {
    let toren = home();
    toren.file(
        "s.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"echo yes > approved.txt\"}\n  - text: \"done\"\n",
    );
    toren.agent(
        "careful",
        "name: careful\nmodel: scripted/s.yaml\nsandbox: true\n",
    );
    let server = Server::start(&toren);
    let run = server.create("careful").await;
    server
        .wait_events(&run, "approval_requested", |e| {
            e.iter().any(|e| e["type"] == "approval_requested")
        })
        .await;
    let pending = server.get(&format!("/runs/{run}/approvals")).await;
    let call = pending["pending"][0]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    assert!(!toren.workspace(&run).join("approved.txt").exists());

    let path = format!("/runs/{run}/approvals/{call}");
    let (status, _) = server.post(&path, json!({"decision": "approve"})).await;
    assert_eq!(status, 200);
    let (status, problem) = server.post(&path, json!({"decision": "deny"})).await;
    assert_eq!(status, 409, "{problem}");
    assert_eq!(problem["decision"], "approve");

    server.wait_completed(&run).await;
    let events = server.get(&format!("/runs/{run}/events?format=json")).await;
    let decided = events
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "approval_decided")
        .unwrap();
    assert_eq!(
        (&decided["by"], &decided["via"]),
        (&json!("api"), &json!("api"))
    );
    assert_eq!(
        std::fs::read_to_string(toren.workspace(&run).join("approved.txt")).unwrap(),
        "yes\n"
    );
    server.signal("-TERM");
    assert_eq!(server.wait_exit(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_lets_the_command_under_way_finish_then_exits_0() {
    let toren = home();
    toren.file(
        "s.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"touch started; sleep 1; echo ok > done.txt; echo finished\"}\n  - text: \"all done\"\n",
    );
    toren.agent(
        "steady",
        "name: steady\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    let first = Server::start(&toren);
    let run = first.create("steady").await;
    let workspace = toren.workspace(&run);
    first
        .wait_events(&run, "the command started", |_| {
            workspace.join("started").exists()
        })
        .await;
    first.signal("-TERM");
    assert_eq!(first.wait_exit(), Some(0));

    // The command ran to its end and its result is journaled; the run stopped there.
    assert_eq!(
        std::fs::read_to_string(workspace.join("done.txt")).unwrap(),
        "ok\n"
    );
    let events = toren.events(&run);
    let last = events.last().unwrap();
    assert_eq!(last["type"], "tool_completed", "{events:?}");
    assert_eq!(last["output"], "finished\n[exit code: 0]", "{last}");
    let view = toren.show(&run);
    assert_eq!(view["resumable"], true, "{view}");

    // The next server asks for the answer only: the command does not run again.
    let second = Server::start(&toren);
    second.wait_completed(&run).await;
    let starts = toren
        .event_types(&run)
        .iter()
        .filter(|t| *t == "tool_started")
        .count();
    assert_eq!(starts, 1);
    second.signal("-TERM");
    assert_eq!(second.wait_exit(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn sigterm_past_the_shutdown_timeout_stops_the_command_and_leaves_the_run_resumable() {
    let toren = home();
    toren.file(
        "s.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"touch started; while [ ! -f go ]; do sleep 0.02; done; echo ok > done.txt\"}\n  - text: \"finished\"\n",
    );
    toren.agent(
        "slow",
        "name: slow\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    let first = Server::start_with(&toren, &["--shutdown-timeout", "200ms"]);
    let run = first.create("slow").await;
    let workspace = toren.workspace(&run);
    first
        .wait_events(&run, "the command started", |_| {
            workspace.join("started").exists()
        })
        .await;
    first.signal("-TERM");
    assert_eq!(first.wait_exit(), Some(0));

    // Interrupted, not ended, and nobody holds it.
    let view = toren.show(&run);
    assert_eq!(view["status"], "running", "{view}");
    assert_eq!(view["resumable"], true, "{view}");
    std::fs::write(workspace.join("go"), "").unwrap();
    let second = Server::start(&toren);
    second.wait_completed(&run).await;
    assert_eq!(
        std::fs::read_to_string(workspace.join("done.txt")).unwrap(),
        "ok\n"
    );
    second.signal("-TERM");
    assert_eq!(second.wait_exit(), Some(0));
}

/// A session name cannot look like a session id, nor take a chat front door's names, so
/// an id always finds its own session and no API client makes a session a chat would adopt.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_name_cannot_shadow_an_id_or_take_a_chats_name() {
    let toren = home();
    toren.agent(
        "memo",
        "name: memo\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    toren.file("s.yaml", "turns:\n  - text: \"hi\"\n");
    let server = Server::start(&toren);
    let (status, alice) = server
        .post("/sessions", json!({"agent": "memo", "name": "alice-work"}))
        .await;
    assert_eq!(status, 201, "{alice}");
    let id = alice["id"].as_str().unwrap().to_owned();
    for name in [id.as_str(), "ses_anything", "telegram-111-1"] {
        let (status, refused) = server
            .post("/sessions", json!({"agent": "memo", "name": name}))
            .await;
        assert_eq!(status, 422, "{name}: {refused}");
        assert!(
            refused["detail"]
                .as_str()
                .unwrap()
                .contains("cannot be a session's name"),
            "{refused}"
        );
    }
    let found = server.get(&format!("/sessions/{id}")).await;
    assert_eq!(found["name"], "alice-work", "{found}");
    assert_eq!(
        server.get("/sessions").await["sessions"]
            .as_array()
            .unwrap()
            .len(),
        1
    );
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_two_turn_session_over_the_api_and_its_file_downloaded() {
    let toren = home();
    // Turn 2 answers with script turns 2–3 only if it carries turn 1's two assistant
    // messages; without them it would write the memo again.
    toren.file(
        "s.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"printf 'from turn one\\\\n' > memo.txt\"}\n  - text: \"wrote it\"\n  - tool_calls:\n      - read_file: {path: memo.txt}\n  - text: \"read it\"\n",
    );
    toren.agent(
        "memo",
        "name: memo\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    let server = Server::start(&toren);
    let (status, session) = server
        .post("/sessions", json!({"agent": "memo", "name": "notes"}))
        .await;
    assert_eq!(status, 201, "{session}");
    let id = session["id"].as_str().unwrap().to_owned();

    let mut runs = Vec::new();
    for text in ["write a memo", "read it back"] {
        let (status, sent) = server
            .post(&format!("/sessions/{id}/messages"), json!({"text": text}))
            .await;
        assert_eq!(status, 202, "{sent}");
        let run = sent["run"]["id"].as_str().unwrap().to_owned();
        server.wait_completed(&run).await;
        runs.push(run);
    }
    let second = server
        .get(&format!("/runs/{}/events?format=json", runs[1]))
        .await;
    let second = second.to_string();
    assert!(
        second.contains("read_file") && !second.contains("printf"),
        "{second}"
    );
    assert!(second.contains("from turn one"), "{second}");

    let view = server.get("/sessions/notes").await;
    assert_eq!(view["turns"].as_array().unwrap().len(), 2, "{view}");

    let memo = server
        .client
        .get(format!("{}/sessions/{id}/files/memo.txt", server.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(memo.status().as_u16(), 200);
    assert_eq!(
        memo.headers()["content-type"].to_str().unwrap(),
        "text/plain"
    );
    assert_eq!(memo.bytes().await.unwrap().as_ref(), b"from turn one\n");
    let run_file = server
        .client
        .get(format!("{}/runs/{}/files/memo.txt", server.base, runs[0]))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(run_file.bytes().await.unwrap().as_ref(), b"from turn one\n");

    server.signal("-TERM");
    assert_eq!(server.wait_exit(), Some(0));
}

/// `approval_requested` is in the run's log.
async fn wait_requested(server: &Server, run: &str) {
    server
        .wait_events(run, "approval_requested", |e| {
            e.iter().any(|e| e["type"] == "approval_requested")
        })
        .await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_waiting_for_approval_holds_no_worker_and_survives_sigkill() {
    let toren = home();
    toren.file(
        "ask.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"echo yes > approved.txt\"}\n  - text: \"approved and done\"\n",
    );
    toren.agent(
        "careful",
        "name: careful\nmodel: scripted/ask.yaml\nsandbox: true\n",
    );
    toren.file(
        "free-script.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"echo free > free.txt\"}\n  - text: \"free done\"\n",
    );
    toren.agent(
        "free",
        "name: free\nmodel: scripted/free-script.yaml\nsandbox:\n  approval: never\n",
    );
    // One worker: while the first run waits for a person, the second still runs.
    let first = Server::start_with(&toren, &["--workers", "1"]);
    let waiting = first.create("careful").await;
    wait_requested(&first, &waiting).await;
    let other = first.create("free").await;
    first.wait_completed(&other).await;
    let view = first.get(&format!("/runs/{waiting}")).await;
    assert_eq!(view["status"], "awaiting_approval", "{view}");

    first.signal("-KILL");
    assert_eq!(first.wait_exit(), None, "killed by a signal");

    let second = Server::start_with(&toren, &["--workers", "1"]);
    let approvals = second.get(&format!("/runs/{waiting}/approvals")).await;
    let call = approvals["pending"][0]["call_id"]
        .as_str()
        .unwrap_or_else(|| panic!("{approvals}"))
        .to_owned();
    let (status, body) = second
        .post(
            &format!("/runs/{waiting}/approvals/{call}"),
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    second.wait_completed(&waiting).await;
    assert_eq!(
        std::fs::read_to_string(toren.workspace(&waiting).join("approved.txt")).unwrap(),
        "yes\n"
    );
    let types = toren.event_types(&waiting);
    assert_eq!(
        types.iter().filter(|t| *t == "approval_requested").count(),
        1,
        "{types:?}"
    );
    second.signal("-TERM");
    assert_eq!(second.wait_exit(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn decisions_record_the_name_of_the_token_and_json_logs_never_show_it() {
    let secret = "0123456789abcdef-ada-secret";
    let toren = Toren::new().env("TOREN_API_ADDR", "127.0.0.1:0");
    let tokens = toren.file(
        "tokens",
        &format!("# clients\nada:{secret}\nci:{TOKEN}-ci-bot\n"),
    );
    let toren = toren.env("TOREN_API_TOKENS_FILE", tokens.to_str().unwrap());
    toren.file(
        "s.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"true\"}\n  - text: \"done\"\n",
    );
    toren.agent(
        "careful",
        "name: careful\nmodel: scripted/s.yaml\nsandbox: true\n",
    );
    let mut child = toren.spawn(&["serve", "--log-format", "json"]);
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel::<String>();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            let _ = tx.send(line);
        }
    });
    let base = loop {
        let line = rx.recv_timeout(WAIT).expect("toren serve says its address");
        if let Some(rest) = line.split("listening on ").nth(1) {
            break rest.split_whitespace().next().unwrap().to_owned();
        }
    };
    let _ = rustls::crypto::ring::default_provider().install_default();
    let server = Server {
        child,
        base,
        client: reqwest::Client::new(),
    };
    let as_ada = |r: reqwest::RequestBuilder| r.bearer_auth(secret);
    let created: Value = as_ada(server.client.post(format!("{}/runs", server.base)))
        .json(&json!({"agent": "careful", "input": "go"}))
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
    let run = created["id"].as_str().unwrap().to_owned();
    // The other token works too; a token that is not in the file does not.
    let other = server
        .client
        .get(format!("{}/runs/{run}", server.base))
        .bearer_auth(format!("{TOKEN}-ci-bot"))
        .send()
        .await
        .unwrap();
    assert_eq!(other.status().as_u16(), 200);
    let deadline = Instant::now() + WAIT;
    let call = loop {
        let approvals: Value = as_ada(
            server
                .client
                .get(format!("{}/runs/{run}/approvals", server.base)),
        )
        .send()
        .await
        .unwrap()
        .json()
        .await
        .unwrap();
        if let Some(call) = approvals["pending"][0]["call_id"].as_str() {
            break call.to_owned();
        }
        assert!(Instant::now() < deadline, "no approval asked: {approvals}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    let decided = as_ada(
        server
            .client
            .post(format!("{}/runs/{run}/approvals/{call}", server.base)),
    )
    .json(&json!({"decision": "approve"}))
    .send()
    .await
    .unwrap();
    assert_eq!(decided.status().as_u16(), 200);
    let deadline = Instant::now() + WAIT;
    while toren.show(&run)["status"] != "completed" {
        assert!(Instant::now() < deadline, "not completed");
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let events = toren.events(&run);
    let decided = events
        .iter()
        .find(|e| e["type"] == "approval_decided")
        .unwrap();
    assert_eq!(
        (&decided["by"], &decided["via"]),
        (&json!("ada"), &json!("api"))
    );

    server.signal("-TERM");
    assert_eq!(server.wait_exit(), Some(0));
    let lines: Vec<String> = rx.try_iter().collect();
    let logs: Vec<Value> = lines
        .iter()
        .filter_map(|l| serde_json::from_str::<Value>(l).ok())
        .collect();
    assert!(
        logs.iter().any(|l| l["target"] == "toren::access"
            && l["fields"]["path"] == format!("/runs/{run}/approvals/{call}")
            && l["fields"]["status"] == 200),
        "no access log line: {lines:#?}"
    );
    assert!(
        logs.iter()
            .any(|l| l["span"]["run_id"] == run.as_str() && l["fields"]["message"] == "claimed"),
        "no run line with its run_id: {lines:#?}"
    );
    let all = lines.join("\n");
    assert!(!all.contains(secret) && !all.contains(TOKEN), "{all}");
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_message_sent_while_a_turn_runs_becomes_the_next_turn_when_it_ends() {
    let toren = home();
    toren.file(
        "s.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"touch started; while [ ! -f go ]; do sleep 0.02; done\"}\n  - text: \"first\"\n  - text: \"second\"\n",
    );
    toren.agent(
        "chatty",
        "name: chatty\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    let server = Server::start(&toren);
    let (status, session) = server
        .post("/sessions", json!({"agent": "chatty", "name": "talk"}))
        .await;
    assert_eq!(status, 201, "{session}");
    let (_, first) = server
        .post("/sessions/talk/messages", json!({"text": "one"}))
        .await;
    let first_run = first["run"]["id"].as_str().unwrap().to_owned();
    // The session's workspace, as its first turn's pinned policy records it.
    let workspace = std::path::PathBuf::from(
        toren.events(&first_run)[0]["policy"]["workspace"]
            .as_str()
            .unwrap(),
    );
    server
        .wait_events(&first_run, "the first turn's command", |_| {
            workspace.join("started").exists()
        })
        .await;
    let (status, queued) = server
        .post("/sessions/talk/messages", json!({"text": "two"}))
        .await;
    assert_eq!(status, 202, "{queued}");
    assert_eq!(queued["queued"], true, "{queued}");

    std::fs::write(workspace.join("go"), "").unwrap();
    server.wait_completed(&first_run).await;
    let deadline = Instant::now() + WAIT;
    let second_run = loop {
        let view = server.get("/sessions/talk").await;
        if let Some(run) = view["turns"][1]["run_id"].as_str() {
            break run.to_owned();
        }
        assert!(Instant::now() < deadline, "no second turn: {view}");
        tokio::time::sleep(Duration::from_millis(20)).await;
    };
    server.wait_completed(&second_run).await;
    let events = toren.events(&second_run);
    assert_eq!(events[0]["input"], "two", "{:?}", events[0]);
    server.signal("-TERM");
    assert_eq!(server.wait_exit(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn deleting_a_session_over_the_api_removes_the_container_a_killed_server_left() {
    let toren = home().env("TOREN_SANDBOX", "docker");
    toren.file(
        "s.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"echo kept > kept.txt; while [ ! -f go ]; do sleep 0.05; done\"}\n  - text: \"done\"\n",
    );
    toren.agent(
        "boxed",
        "name: boxed\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    let containers = || {
        let out = toren.run(&["sandbox", "list", "--json"]);
        assert_eq!(out.status.code(), Some(0));
        serde_json::from_slice::<Value>(&out.stdout).unwrap()
    };
    let first = Server::start(&toren);
    let (status, session) = first
        .post("/sessions", json!({"agent": "boxed", "name": "boxed-talk"}))
        .await;
    assert_eq!(status, 201, "{session}");
    let (_, sent) = first
        .post("/sessions/boxed-talk/messages", json!({"text": "go"}))
        .await;
    let run = sent["run"]["id"].as_str().unwrap().to_owned();
    let workspace = std::path::PathBuf::from(
        toren.events(&run)[0]["policy"]["workspace"]
            .as_str()
            .unwrap(),
    );
    first
        .wait_events(&run, "the turn's command", |_| {
            workspace.join("kept.txt").exists()
        })
        .await;
    first.signal("-KILL");
    assert_eq!(first.wait_exit(), None, "killed by a signal");
    // The killed server's container is left behind.
    assert_eq!(
        containers().as_array().unwrap().len(),
        1,
        "{}",
        containers()
    );

    // An API-only server: nobody drives the turn; it is cancelled, then the session goes.
    let second = Server::start_with(&toren, &["--workers", "0"]);
    let (status, _) = second.post(&format!("/runs/{run}/cancel"), json!({})).await;
    assert_eq!(status, 202);
    assert_eq!(
        containers().as_array().unwrap().len(),
        1,
        "{}",
        containers()
    );
    let deleted = second
        .client
        .delete(format!("{}/sessions/boxed-talk", second.base))
        .bearer_auth(TOKEN)
        .send()
        .await
        .unwrap();
    assert_eq!(deleted.status().as_u16(), 200);
    assert_eq!(
        containers(),
        json!([]),
        "the session's container is still there"
    );
    assert!(workspace.join("kept.txt").exists(), "the workspace stays");
    second.signal("-TERM");
    assert_eq!(second.wait_exit(), Some(0));
}

/// An open SSE response, read frame by frame.
struct Sse {
    response: reqwest::Response,
    buffer: String,
}

impl Sse {
    async fn open(server: &Server, path: &str, last_event_id: Option<&str>) -> Self {
        let mut request = server
            .client
            .get(format!("{}{path}", server.base))
            .bearer_auth(TOKEN);
        if let Some(id) = last_event_id {
            request = request.header("Last-Event-ID", id);
        }
        let response = request.send().await.unwrap();
        assert_eq!(response.status().as_u16(), 200);
        Self {
            response,
            buffer: String::new(),
        }
    }

    /// The next frame with an id: `(id, event name)`; `None` at the end of the stream.
    async fn next(&mut self) -> Option<(String, String)> {
        loop {
            if let Some(end) = self.buffer.find("\n\n") {
                let frame: String = self.buffer.drain(..end + 2).collect();
                let field = |name: &str| {
                    frame
                        .lines()
                        .find_map(|l| l.strip_prefix(name))
                        .map(|v| v.trim().to_owned())
                };
                if let (Some(id), Some(event)) = (field("id:"), field("event:")) {
                    return Some((id, event));
                }
                continue;
            }
            let chunk = tokio::time::timeout(WAIT, self.response.chunk())
                .await
                .expect("the stream went quiet")
                .unwrap()?;
            self.buffer.push_str(&String::from_utf8_lossy(&chunk));
        }
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_follower_that_reconnects_with_last_event_id_misses_and_repeats_nothing() {
    let toren = home();
    toren.file(
        "s.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"touch started; while [ ! -f go ]; do sleep 0.02; done\"}\n  - tool_calls:\n      - bash: {command: \"echo two\"}\n  - text: \"done\"\n",
    );
    toren.agent(
        "followed",
        "name: followed\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    let server = Server::start(&toren);
    let run = server.create("followed").await;
    let path = format!("/runs/{run}/events");

    // Follow until the first command runs, then drop the connection.
    let mut seen = Vec::new();
    let mut first = Sse::open(&server, &path, None).await;
    while let Some((id, event)) = first.next().await {
        seen.push((id, event.clone()));
        if event == "tool_started" {
            break;
        }
    }
    drop(first);
    let last = seen.last().unwrap().0.clone();
    std::fs::write(toren.workspace(&run).join("go"), "").unwrap();

    // Reconnect from the last id seen: the rest, live, to the end.
    let mut second = Sse::open(&server, &path, Some(&last)).await;
    while let Some(frame) = second.next().await {
        seen.push(frame);
    }
    let ids: Vec<u64> = seen.iter().map(|(id, _)| id.parse().unwrap()).collect();
    let want: Vec<u64> = (1..=ids.len() as u64).collect();
    assert_eq!(ids, want, "{seen:?}");
    assert_eq!(seen.last().unwrap().1, "run_completed");
    assert_eq!(
        ids.len(),
        toren.events(&run).len(),
        "every journaled event, once"
    );
    server.signal("-TERM");
    assert_eq!(server.wait_exit(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_followed_over_sse_across_its_turns() {
    let toren = home();
    toren.file(
        "s.yaml",
        "turns:\n  - text: \"first answer\"\n  - text: \"second answer\"\n",
    );
    toren.agent("talker", "name: talker\nmodel: scripted/s.yaml\n");
    let server = Server::start(&toren);
    let (status, _) = server
        .post(
            "/sessions",
            json!({"agent": "talker", "name": "followed-talk"}),
        )
        .await;
    assert_eq!(status, 201);
    let mut follow = Sse::open(&server, "/sessions/followed-talk/events", None).await;
    let mut ends = Vec::new();
    for text in ["one", "two"] {
        let (status, _) = server
            .post("/sessions/followed-talk/messages", json!({"text": text}))
            .await;
        assert_eq!(status, 202);
        // The stream carries this turn to its end, then waits for the next one.
        loop {
            let (id, event) = follow.next().await.expect("the stream stays open");
            if event == "run_completed" {
                ends.push(id);
                break;
            }
        }
    }
    assert_eq!(ends, ["1:3", "2:3"]);
    // A shutdown ends the stream (the client reconnects to the next server).
    server.signal("-TERM");
    assert_eq!(follow.next().await, None);
    assert_eq!(server.wait_exit(), Some(0));
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn old_runs_this_server_leaves_alone_do_not_hide_newer_ones() {
    let toren = home();
    toren.file(
        "s.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"true\"}\n  - text: \"done\"\n",
    );
    toren.agent(
        "boxed",
        "name: boxed\nmodel: scripted/s.yaml\nsandbox:\n  approval: never\n",
    );
    // More runs than one claim pass looks at, pinned to docker by an API-only server.
    let docker = Server::start_with(
        &Toren::new()
            .env("TOREN_API_ADDR", "127.0.0.1:0")
            .env("TOREN_API_TOKEN", TOKEN)
            .env("TOREN_SANDBOX", "docker")
            .env(
                "TOREN_HOME",
                toren.dir.path().join("toren").to_str().unwrap(),
            )
            .env("TOREN_AGENTS", toren.agents().to_str().unwrap()),
        &["--workers", "0"],
    );
    for _ in 0..70 {
        docker.create("boxed").await;
    }
    docker.signal("-TERM");
    assert_eq!(docker.wait_exit(), Some(0));

    // A local server leaves them alone and still drives the run created after them.
    let local = Server::start(&toren);
    let run = local.create("boxed").await;
    local.wait_completed(&run).await;
    local.signal("-TERM");
    assert_eq!(local.wait_exit(), Some(0));
}

/// An injected secret unset in the environment: `toren serve` with its own
/// workers on the local queue drives every run it creates, so its API refuses the run and
/// the session up front (422, naming the variable, nothing made); an API-only front
/// (`--workers 0`) leaves the check to the worker that will claim the run.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn serve_refuses_an_unset_injected_secret_only_where_it_drives_its_runs() {
    let toren = home();
    toren.file("s.yaml", "turns:\n  - text: \"done\"\n");
    toren.agent(
        "injector",
        "name: injector\nmodel: scripted/s.yaml\nsandbox:\n  network: [api.test]\n  \
         secrets:\n    GH_TOKEN: {hosts: [api.test], header: \"Authorization: Bearer ${value}\"}\n",
    );
    let server = Server::start(&toren);
    for (path, body) in [
        ("/runs", json!({"agent": "injector", "input": "go"})),
        ("/sessions", json!({"agent": "injector", "name": "s"})),
    ] {
        let (status, problem) = server.post(path, body).await;
        assert_eq!(status, 422, "{path}: {problem}");
        let detail = problem["detail"].as_str().unwrap();
        assert!(
            detail.contains("agent `injector` injects GH_TOKEN through its egress proxy"),
            "{detail}"
        );
    }
    assert_eq!(server.get("/runs").await["runs"], json!([]));
    assert_eq!(server.get("/sessions").await["sessions"], json!([]));
    server.signal("-TERM");
    assert_eq!(server.wait_exit(), Some(0));

    let front = Server::start_with(&toren, &["--workers", "0"]);
    let (status, run) = front
        .post("/runs", json!({"agent": "injector", "input": "go"}))
        .await;
    assert_eq!(status, 202, "{run}");
    front.signal("-TERM");
    assert_eq!(front.wait_exit(), Some(0));
}
