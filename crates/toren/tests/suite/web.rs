//! The web page in headless Chromium (Debian's `chromium` and `chromium-driver`, installed
//! by scripts/install-chromium), driven over WebDriver (fantoccini) against the real
//! `toren serve`: sign-in (a wrong token refused), a run started from the API whose events
//! appear live, its bash call approved with the button, the run completing and the file it
//! wrote opened in the workspace viewer; an agent's `<img src=x onerror=alert(1)>` shown as
//! text; a session turn sent from the page; approvals of two runs listed oldest first and
//! decided from the list (one denied with a reason); a waiting run cancelled with the button;
//! a server restart under an open run page, after which the page shows the remaining events
//! once each; a session rewound with a turn's button and through the API; a command, the
//! model's words and a file name holding hidden characters shown as toren-display's markers
//! with the warning (the page's script agreeing with toren-display on every code point),
//! and a call asking again after an interruption carrying its notice. Screenshots
//! (desktop and 375 px) go to target/web-shots/.

use std::io::{BufRead as _, BufReader};
use std::net::TcpListener;
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, ClientBuilder, Locator};
use serde_json::{Value, json};

use super::common::Toren;

const TOKEN: &str = "web-test-token-0123456789";
const WAIT: Duration = Duration::from_secs(30);
const XSS: &str = "<img src=x onerror=alert(1)>";

fn free_port() -> u16 {
    let listener = TcpListener::bind("127.0.0.1:0").unwrap();
    listener.local_addr().unwrap().port()
}

/// A child process killed when the test ends, however it ends.
struct Reaped(Child);

impl Drop for Reaped {
    fn drop(&mut self) {
        let _ = self.0.kill();
        let _ = self.0.wait();
    }
}

/// `chromedriver` on a loopback port, and a browser session of it.
struct Browser {
    client: Client,
    _driver: Reaped,
    _profile: tempfile::TempDir,
}

impl Browser {
    async fn start() -> Self {
        let port = free_port();
        let mut driver = Command::new("chromedriver")
            .arg(format!("--port={port}"))
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("chromedriver (scripts/install-chromium installs it)");
        let stdout = driver.stdout.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stdout).lines().map_while(Result::ok) {
                if line.contains("started successfully") {
                    let _ = tx.send(());
                }
            }
        });
        let driver = Reaped(driver);
        rx.recv_timeout(WAIT).expect("chromedriver starts");
        let profile = tempfile::tempdir().unwrap();
        let mut caps = serde_json::Map::new();
        caps.insert(
            "goog:chromeOptions".into(),
            json!({
                "binary": "/usr/bin/chromium",
                "args": [
                    "--headless=new",
                    "--no-sandbox",
                    "--disable-dev-shm-usage",
                    "--disable-gpu",
                    format!("--user-data-dir={}", profile.path().display()),
                    "--window-size=1280,900",
                ],
            }),
        );
        let client = ClientBuilder::new(hyper_util::client::legacy::connect::HttpConnector::new())
            .capabilities(caps)
            .connect(&format!("http://127.0.0.1:{port}"))
            .await
            .expect("a chromium session");
        Self {
            client,
            _driver: driver,
            _profile: profile,
        }
    }

    async fn goto(&self, url: &str) {
        self.client.goto(url).await.unwrap();
    }

    /// Waits for an element matching `xpath`.
    async fn wait_for(&self, xpath: &str) -> fantoccini::elements::Element {
        self.client
            .wait()
            .at_most(WAIT)
            .for_element(Locator::XPath(xpath))
            .await
            .unwrap_or_else(|e| panic!("no {xpath}: {e}"))
    }

    async fn text(&self, css: &str) -> String {
        self.client
            .find(Locator::Css(css))
            .await
            .unwrap()
            .text()
            .await
            .unwrap()
    }

    async fn sign_in(&self, base: &str, token: &str) {
        self.goto(&format!("{base}/ui/sign-in")).await;
        let input = self.wait_for("//input[@id='token']").await;
        input.send_keys(token).await.unwrap();
        self.client
            .find(Locator::Id("sign-in"))
            .await
            .unwrap()
            .click()
            .await
            .unwrap();
    }

    /// A PNG of the page at `width` into target/web-shots/`name`-`width`.png.
    async fn shot(&self, name: &str, width: u32) {
        self.client.set_window_size(width, 900).await.unwrap();
        let png = self.client.screenshot().await.unwrap();
        let dir = shots();
        std::fs::create_dir_all(&dir).unwrap();
        std::fs::write(dir.join(format!("{name}-{width}.png")), png).unwrap();
    }

    async fn shots(&self, name: &str) {
        self.shot(name, 375).await;
        self.shot(name, 1280).await;
    }

    /// No alert is open (an `alert(1)` that ran would be).
    async fn no_alert(&self) {
        assert!(
            self.client.get_alert_text().await.is_err(),
            "an alert is open: script from a run ran"
        );
    }

    async fn close(self) {
        self.client.close().await.unwrap();
    }
}

fn shots() -> PathBuf {
    PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .parent()
        .unwrap()
        .join("web-shots")
}

/// `toren serve` on a fixed loopback port (so a restart keeps the page's origin).
struct Server {
    child: Reaped,
    base: String,
    client: reqwest::Client,
}

impl Server {
    fn start(toren: &Toren, port: u16) -> Self {
        let _ = rustls::crypto::ring::default_provider().install_default();
        let mut child = toren
            .command(&["serve", "--workers", "2"])
            .env("TOREN_API_ADDR", format!("127.0.0.1:{port}"))
            .env("TOREN_API_TOKEN", TOKEN)
            .stdout(Stdio::null())
            .stderr(Stdio::piped())
            .spawn()
            .unwrap();
        let stderr = child.stderr.take().unwrap();
        let (tx, rx) = std::sync::mpsc::channel();
        std::thread::spawn(move || {
            for line in BufReader::new(stderr).lines().map_while(Result::ok) {
                if line.contains("listening on ") {
                    let _ = tx.send(());
                }
            }
        });
        let child = Reaped(child);
        rx.recv_timeout(WAIT).expect("toren serve says its address");
        Self {
            child,
            base: format!("http://127.0.0.1:{port}"),
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

    async fn create(&self, agent: &str, input: &str) -> String {
        let (status, run) = self
            .post("/runs", json!({"agent": agent, "input": input}))
            .await;
        assert_eq!(status, 202, "{run}");
        run["id"].as_str().unwrap().to_owned()
    }

    /// SIGTERM, and waits for the exit (code 0).
    fn stop(mut self) {
        let pid = self.child.0.id().to_string();
        assert!(
            Command::new("kill")
                .args(["-TERM", &pid])
                .status()
                .unwrap()
                .success()
        );
        let status = self.child.0.wait().unwrap();
        assert_eq!(status.code(), Some(0));
    }
}

fn home() -> Toren {
    let toren = Toren::new();
    // Says the XSS line, asks to write a file (approval: the default for bash), then ends.
    toren.file(
        "careful-turns.yaml",
        &format!(
            "turns:\n  - text: {XSS:?}\n    tool_calls:\n      - bash: {{command: \"printf 'yes\\\\nfrom the agent\\\\n' > approved.txt\"}}\n  - text: \"done\"\n",
        ),
    );
    toren.agent(
        "careful",
        "name: careful\nmodel: scripted/careful-turns.yaml\nsandbox: true\n",
    );
    toren
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_watched_live_approved_with_the_button_and_its_file_opened() {
    let toren = home();
    let server = Server::start(&toren, free_port());
    let browser = Browser::start().await;
    let base = server.base.clone();

    // A wrong token is refused and shows nothing but the sign-in page.
    browser.sign_in(&base, "not-the-right-token-at-all").await;
    browser.wait_for("//p[@id='sign-in-error']").await;
    browser.goto(&format!("{base}/ui/runs")).await;
    browser.wait_for("//input[@id='token']").await;
    assert!(browser.client.current_url().await.unwrap().path() == "/ui/sign-in");

    browser.sign_in(&base, TOKEN).await;
    browser.wait_for("//h1[normalize-space()='Runs']").await;

    // Started from the API while the runs list is open: it appears there live.
    let run = server.create("careful", XSS).await;
    browser
        .wait_for(&format!(
            "//tr[@data-run='{run}']//span[normalize-space()='awaiting approval']"
        ))
        .await;
    browser
        .wait_for("//span[@id='pending-count' and normalize-space()='1']")
        .await;
    assert!(browser.client.title().await.unwrap().starts_with("(1) "));
    browser.shots("runs").await;

    browser.goto(&format!("{base}/ui/runs/{run}")).await;
    let approve = browser
        .wait_for("//section[@id='approval' and not(@hidden)]//button[@id='approve']")
        .await;
    assert!(
        browser
            .text("#approval-command")
            .await
            .contains("approved.txt"),
        "the command asked about"
    );
    // The agent's markup and the input are text: no element, no alert.
    browser
        .wait_for(&format!(
            "//li[contains(@class,'assistant')]/pre[.={XSS:?}]"
        ))
        .await;
    assert_eq!(browser.text("#run-input").await, XSS);
    let images = browser
        .client
        .find_all(Locator::Css("main img"))
        .await
        .unwrap();
    assert!(images.is_empty(), "an element was made from a run's text");
    browser.no_alert().await;
    assert_eq!(browser.text("#run-status").await, "awaiting approval");
    browser.shots("run-pending-approval").await;

    approve.click().await.unwrap();
    browser
        .wait_for("//li[contains(@class,'final') and contains(@class,'completed') and normalize-space()='done']")
        .await;
    browser
        .wait_for("//span[@id='run-status' and normalize-space()='completed']")
        .await;
    let meta = browser.text("li.tool .tool-meta").await;
    assert!(meta.starts_with("exit 0 · "), "{meta}");
    let folded = browser.text("li.tool details summary").await;
    assert!(
        folded.ends_with(" line") || folded.ends_with(" lines"),
        "{folded}"
    );
    let decided = browser.text("li.decision").await;
    assert_eq!(decided, "approved by api via api");
    browser.no_alert().await;

    // The file it wrote, from the workspace link.
    browser
        .client
        .find(Locator::Id("workspace-link"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .wait_for("//tr[@data-name='approved.txt']//a")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_for("//ol[@id='viewer']/li[2][.='from the agent']")
        .await;
    assert_eq!(browser.text("#viewer li:first-child").await, "yes");
    browser.shots("workspace").await;
    assert_eq!(
        std::fs::read_to_string(toren.workspace(&run).join("approved.txt")).unwrap(),
        "yes\nfrom the agent\n"
    );

    browser.close().await;
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_turn_sent_from_the_page_runs_and_is_shown_as_chat() {
    let toren = home();
    toren.file(
        "chatty-turns.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"echo noted > note.txt\"}\n  - text: \"noted it\"\n",
    );
    toren.agent(
        "chatty",
        "name: chatty\nmodel: scripted/chatty-turns.yaml\nsandbox:\n  approval: never\n",
    );
    let server = Server::start(&toren, free_port());
    let (status, session) = server
        .post("/sessions", json!({"agent": "chatty", "name": "notes"}))
        .await;
    assert_eq!(status, 201, "{session}");
    let browser = Browser::start().await;
    let base = server.base.clone();
    browser.sign_in(&base, TOKEN).await;
    browser.wait_for("//h1[normalize-space()='Runs']").await;

    browser.goto(&format!("{base}/ui/sessions/notes")).await;
    let message = browser.wait_for("//textarea[@id='message']").await;
    message.send_keys("take a note").await.unwrap();
    browser
        .client
        .find(Locator::Id("send-button"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    // The page goes to the new turn's run, which completes.
    browser
        .wait_for("//li[contains(@class,'final') and normalize-space()='noted it']")
        .await;
    assert_eq!(browser.text("#run-input").await, "take a note");

    // The session page shows the turn as chat, and its workspace has the file.
    browser.goto(&format!("{base}/ui/sessions/notes")).await;
    browser
        .wait_for("//li[@data-turn='1']/div[contains(@class,'user')]/pre[.='take a note']")
        .await;
    browser
        .wait_for("//li[@data-turn='1']/div[contains(@class,'assistant')]/pre[.='noted it']")
        .await;
    // Its workspace is on the session page too, and opens in the viewer.
    browser
        .wait_for("//section[@id='workspace']//tr[@data-name='note.txt']//a")
        .await
        .click()
        .await
        .unwrap();
    browser.wait_for("//ol[@id='viewer']/li[.='noted']").await;
    let view = server.get("/sessions/notes").await;
    assert_eq!(view["turns"].as_array().unwrap().len(), 1, "{view}");

    browser.close().await;
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn after_a_server_restart_the_open_run_page_shows_the_remaining_events_once_each() {
    let toren = home();
    let port = free_port();
    let server = Server::start(&toren, port);
    let browser = Browser::start().await;
    let base = server.base.clone();
    browser.sign_in(&base, TOKEN).await;
    browser.wait_for("//h1[normalize-space()='Runs']").await;

    let run = server.create("careful", "go").await;
    browser.goto(&format!("{base}/ui/runs/{run}")).await;
    browser
        .wait_for("//section[@id='approval' and not(@hidden)]")
        .await;
    browser
        .wait_for("//span[@id='stream-state' and @data-state='live']")
        .await;

    // The server goes away under the open page, and a new one takes its place.
    server.stop();
    browser
        .wait_for("//span[@id='stream-state' and @data-state='reconnecting']")
        .await;
    let server = Server::start(&toren, port);
    let pending = server.get(&format!("/runs/{run}/approvals")).await;
    let call = pending["pending"][0]["call_id"]
        .as_str()
        .unwrap()
        .to_owned();
    let (status, decided) = server
        .post(
            &format!("/runs/{run}/approvals/{call}"),
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(status, 200, "{decided}");

    browser
        .wait_for("//li[contains(@class,'final') and normalize-space()='done']")
        .await;
    // Every journaled event is on the page exactly once.
    let events = server.get(&format!("/runs/{run}/events?format=json")).await;
    let expected: Vec<String> = events
        .as_array()
        .unwrap()
        .iter()
        .map(|e| e["seq"].to_string())
        .collect();
    let mut shown = Vec::new();
    for node in browser
        .client
        .find_all(Locator::Css("#timeline [data-seq]"))
        .await
        .unwrap()
    {
        shown.push(node.attr("data-seq").await.unwrap().unwrap());
    }
    let mut sorted = shown.clone();
    sorted.sort_by_key(|s| s.parse::<u64>().unwrap());
    sorted.dedup();
    assert_eq!(sorted.len(), shown.len(), "an event shown twice: {shown:?}");
    assert_eq!(sorted, expected, "events missing from the page");
    assert_eq!(
        browser
            .client
            .find_all(Locator::Css("li.decision"))
            .await
            .unwrap()
            .len(),
        1
    );

    browser.close().await;
    server.stop();
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn approvals_across_runs_are_listed_oldest_first_and_decided_from_the_list() {
    let toren = home();
    let server = Server::start(&toren, free_port());
    let first = server.create("careful", "one").await;
    wait_pending(&server, &first).await;
    let second = server.create("careful", "two").await;
    wait_pending(&server, &second).await;

    let browser = Browser::start().await;
    let base = server.base.clone();
    browser.sign_in(&base, TOKEN).await;
    browser.wait_for("//h1[normalize-space()='Runs']").await;
    browser.goto(&format!("{base}/ui/approvals")).await;
    browser.wait_for("//ol[@id='approvals']/li[2]").await;
    let mut order = Vec::new();
    for item in browser
        .client
        .find_all(Locator::Css("li.approval"))
        .await
        .unwrap()
    {
        order.push(item.attr("data-run").await.unwrap().unwrap());
    }
    assert_eq!(order, [first.clone(), second.clone()], "oldest first");
    assert!(browser.client.title().await.unwrap().starts_with("(2) "));

    // Deny the first with a reason, approve the second, from the list.
    let item = |run: &str| format!("//li[@data-run='{run}']");
    browser
        .wait_for(&format!("{}//input[@class='reason']", item(&first)))
        .await
        .send_keys("not today")
        .await
        .unwrap();
    browser
        .wait_for(&format!("{}//button[@data-decision='deny']", item(&first)))
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_for(&format!(
            "{}//span[@class='result' and .='denied']",
            item(&first)
        ))
        .await;
    browser
        .wait_for(&format!(
            "{}//button[@data-decision='approve']",
            item(&second)
        ))
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_for(&format!(
            "{}//span[@class='result' and .='approved']",
            item(&second)
        ))
        .await;

    for (run, approved, reason) in [
        (&first, false, json!("not today")),
        (&second, true, Value::Null),
    ] {
        browser.goto(&format!("{base}/ui/runs/{run}")).await;
        browser
            .wait_for("//span[@id='run-status' and normalize-space()='completed']")
            .await;
        let events = server.get(&format!("/runs/{run}/events?format=json")).await;
        let decided = events
            .as_array()
            .unwrap()
            .iter()
            .find(|e| e["type"] == "approval_decided")
            .unwrap()
            .clone();
        assert_eq!(decided["approved"], approved, "{decided}");
        assert_eq!(
            decided.get("reason").cloned().unwrap_or(Value::Null),
            reason
        );
    }
    assert!(!toren.workspace(&first).join("approved.txt").exists());
    assert!(toren.workspace(&second).join("approved.txt").exists());

    browser.close().await;
    server.stop();
}

/// Waits until the run asks for a decision.
async fn wait_pending(server: &Server, run: &str) {
    wait_pending_call(server, run, None).await;
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_waiting_run_is_cancelled_with_the_button() {
    let toren = home();
    let server = Server::start(&toren, free_port());
    let run = server.create("careful", "go").await;
    wait_pending(&server, &run).await;
    let browser = Browser::start().await;
    let base = server.base.clone();
    browser.sign_in(&base, TOKEN).await;
    browser.wait_for("//h1[normalize-space()='Runs']").await;
    browser.goto(&format!("{base}/ui/runs/{run}")).await;
    browser
        .wait_for("//section[@id='approval' and not(@hidden)]")
        .await;
    browser
        .wait_for("//button[@id='cancel' and not(@hidden)]")
        .await
        .click()
        .await
        .unwrap();
    // The page asks first.
    assert_eq!(
        browser.client.get_alert_text().await.unwrap(),
        "Cancel this run?"
    );
    browser.client.accept_alert().await.unwrap();
    browser
        .wait_for("//li[contains(@class,'final') and contains(@class,'cancelled')]")
        .await;
    browser
        .wait_for("//span[@id='run-status' and normalize-space()='cancelled']")
        .await;
    assert_eq!(
        browser.text("li.final.cancelled").await,
        "cancelled by api via api"
    );
    let view = server.get(&format!("/runs/{run}")).await;
    assert_eq!(view["status"], "cancelled", "{view}");
    assert!(!toren.workspace(&run).join("approved.txt").exists());

    browser.close().await;
    server.stop();
}

/// Waits until the session has `turns` turns, all completed.
async fn wait_turns(server: &Server, session: &str, turns: usize) -> Value {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let view = server.get(&format!("/sessions/{session}")).await;
        let all = view["turns"].as_array().unwrap();
        if all.len() == turns && all.iter().all(|t| t["status"] == "completed") {
            return view;
        }
        assert!(std::time::Instant::now() < deadline, "{view}");
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_session_is_rewound_with_the_button_and_through_the_api() {
    let toren = home();
    toren.file(
        "writer-turns.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"echo one > one.txt\"}\n  - text: \"wrote one\"\n  - tool_calls:\n      - bash: {command: \"rm one.txt && echo two > two.txt\"}\n  - text: \"wrote two\"\n",
    );
    toren.agent(
        "writer",
        "name: writer\nmodel: scripted/writer-turns.yaml\nsandbox:\n  approval: never\n",
    );
    let server = Server::start(&toren, free_port());
    let (status, session) = server
        .post("/sessions", json!({"agent": "writer", "name": "w"}))
        .await;
    assert_eq!(status, 201, "{session}");
    let ws = toren_sandbox::workspace_path(&toren.sandbox_root(), session["id"].as_str().unwrap());
    for (n, text) in ["first", "second"].into_iter().enumerate() {
        let (status, sent) = server
            .post("/sessions/w/messages", json!({"text": text}))
            .await;
        assert_eq!(status, 202, "{sent}");
        wait_turns(&server, "w", n + 1).await;
    }
    assert!(ws.join("two.txt").exists() && !ws.join("one.txt").exists());

    // Refusals: a turn the session does not have (409), no step (422), no session (404).
    let (status, body) = server.post("/sessions/w/rewind", json!({"to": "9"})).await;
    assert_eq!(status, 409, "{body}");
    let (status, body) = server.post("/sessions/w/rewind", json!({"to": "x"})).await;
    assert_eq!(status, 422, "{body}");
    let (status, body) = server
        .post("/sessions/nope/rewind", json!({"to": "1"}))
        .await;
    assert_eq!(status, 404, "{body}");

    // The button on the session page: back to before turn 2.
    let browser = Browser::start().await;
    let base = server.base.clone();
    browser.sign_in(&base, TOKEN).await;
    browser.wait_for("//h1[normalize-space()='Runs']").await;
    browser.goto(&format!("{base}/ui/sessions/w")).await;
    browser
        .wait_for("//button[contains(@class,'rewind-turn') and @data-step='2']")
        .await
        .click()
        .await
        .unwrap();
    assert!(
        browser
            .client
            .get_alert_text()
            .await
            .unwrap()
            .starts_with("Rewind the session to before turn 2?")
    );
    browser.client.accept_alert().await.unwrap();
    // The page shows it again: turn 2 left behind, turn 3 the rewind.
    browser
        .wait_for("//li[@data-turn='2' and contains(@class,'left-behind')]")
        .await;
    browser
        .wait_for("//li[@data-turn='3' and not(contains(@class,'left-behind'))]/div[contains(@class,'rewind-note')]")
        .await;
    // Turn 1 is still on the line: it can be gone back before; turn 2 cannot.
    browser
        .wait_for(
            "//li[@data-turn='1' and not(contains(@class,'left-behind'))]//button[@data-step='1']",
        )
        .await;
    assert!(
        browser
            .client
            .find(Locator::XPath("//button[@data-step='2']"))
            .await
            .is_err()
    );
    browser.shots("session-rewound").await;
    assert_eq!(
        std::fs::read_to_string(ws.join("one.txt")).unwrap(),
        "one\n"
    );
    assert!(!ws.join("two.txt").exists());

    // Through the API: `undo` goes back to before turn 1, the newest on the line.
    let (status, body) = server
        .post("/sessions/w/rewind", json!({"to": "undo"}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["step"], "1", "{body}");
    assert_eq!(body["turn"], 4, "{body}");
    assert!(body["checkpoint"].is_string(), "{body}");
    assert!(!ws.join("one.txt").exists() && !ws.join("two.txt").exists());
    let view = wait_turns(&server, "w", 4).await;
    assert_eq!(view["turns"][3]["run_id"], body["run_id"], "{view}");

    browser.close().await;
    server.stop();
}

/// Waits until the run asks for a decision on a call other than `previous`; its id.
async fn wait_pending_call(server: &Server, run: &str, previous: Option<&str>) -> String {
    let deadline = std::time::Instant::now() + WAIT;
    loop {
        let approvals = server.get(&format!("/runs/{run}/approvals")).await;
        if let Some(call) = approvals["pending"][0]["call_id"].as_str()
            && Some(call) != previous
        {
            return call.to_owned();
        }
        assert!(
            std::time::Instant::now() < deadline,
            "no approval: {approvals}"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// A run's page offers the steps it can go back to; choosing one rewinds the workspace
/// and the conversation (the file the first call wrote is gone after a rewind to before
/// it), and the page shows the `rewound` event.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_is_rewound_from_its_page() {
    let toren = home();
    toren.file(
        "twice-turns.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"echo one > one.txt\"}\n  - tool_calls:\n      - bash: {command: \"echo two > two.txt\"}\n  - text: \"done\"\n",
    );
    toren.agent(
        "twice",
        "name: twice\nmodel: scripted/twice-turns.yaml\nsandbox: true\n",
    );
    let server = Server::start(&toren, free_port());
    let run = server.create("twice", "go").await;
    let first = wait_pending_call(&server, &run, None).await;
    let (status, body) = server
        .post(
            &format!("/runs/{run}/approvals/{first}"),
            json!({"decision": "approve"}),
        )
        .await;
    assert_eq!(status, 200, "{body}");
    wait_pending_call(&server, &run, Some(&first)).await;
    let ws = toren.workspace(&run);
    assert!(ws.join("one.txt").exists());
    // The step right after the run's start, before the first call was asked for.
    let events = server.get(&format!("/runs/{run}/events?format=json")).await;
    let start = events[0]["seq"].as_u64().unwrap();

    let browser = Browser::start().await;
    let base = server.base.clone();
    browser.sign_in(&base, TOKEN).await;
    browser.wait_for("//h1[normalize-space()='Runs']").await;
    browser.goto(&format!("{base}/ui/runs/{run}")).await;
    browser
        .wait_for("//details[@id='rewind']/summary")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_for(&format!(
            "//select[@id='rewind-step']/option[@value='{start}' and normalize-space()='step {start}: after the start']"
        ))
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_for("//button[@id='rewind-run']")
        .await
        .click()
        .await
        .unwrap();
    assert_eq!(
        browser.client.get_alert_text().await.unwrap(),
        format!(
            "Rewind the run to step {start}? Its workspace and conversation go back to how they were then."
        )
    );
    browser.client.accept_alert().await.unwrap();
    browser
        .wait_for("//ol[@id='timeline']//*[@data-seq and contains(@class,'rewound')]")
        .await;
    browser.shots("run-rewound").await;
    assert!(!ws.join("one.txt").exists(), "the rewind left one.txt");
    let events = server.get(&format!("/runs/{run}/events?format=json")).await;
    assert!(
        events
            .as_array()
            .unwrap()
            .iter()
            .any(|e| e["type"] == "rewound" && e["to"] == start),
        "{events}"
    );

    browser.close().await;
    server.stop();
}

/// The status of `run` once it has ended.
async fn wait_ended(server: &Server, run: &str) -> String {
    let deadline = std::time::Instant::now() + Duration::from_secs(60);
    loop {
        let shown = server.get(&format!("/runs/{run}")).await;
        let status = shown["status"].as_str().unwrap_or_default().to_owned();
        if ["completed", "failed", "cancelled"].contains(&status.as_str()) {
            return status;
        }
        assert!(std::time::Instant::now() < deadline, "not ended: {shown}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}

/// An ended run's page offers to go on from one of its steps: a new run starts there (the
/// page follows it) with the workspace of that step, and the ended run stays as it was.
/// Over the API the same request answers with the new run's id.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn an_ended_run_goes_on_from_a_step_as_a_new_run_from_its_page() {
    let toren = home();
    toren.file(
        "free-turns.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"echo one > one.txt\"}\n  - tool_calls:\n      - bash: {command: \"echo two > two.txt\"}\n  - text: \"done\"\n",
    );
    toren.agent(
        "free",
        "name: free\nmodel: scripted/free-turns.yaml\nsandbox:\n  approval: never\n",
    );
    let server = Server::start(&toren, free_port());
    let run = server.create("free", "go").await;
    assert_eq!(wait_ended(&server, &run).await, "completed");
    let ws = toren.workspace(&run);
    assert!(ws.join("two.txt").exists());
    let events = server.get(&format!("/runs/{run}/events?format=json")).await;
    let step = events
        .as_array()
        .unwrap()
        .iter()
        .find(|e| e["type"] == "tool_completed")
        .and_then(|e| e["seq"].as_u64())
        .unwrap();

    let browser = Browser::start().await;
    let base = server.base.clone();
    browser.sign_in(&base, TOKEN).await;
    browser.wait_for("//h1[normalize-space()='Runs']").await;
    browser.goto(&format!("{base}/ui/runs/{run}")).await;
    browser
        .wait_for("//details[@id='rewind']/summary[normalize-space()='Go on from a step']")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_for(&format!(
            "//select[@id='rewind-step']/option[@value='{step}']"
        ))
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_for("//button[@id='rewind-run' and normalize-space()='Start a new run from here']")
        .await
        .click()
        .await
        .unwrap();
    assert_eq!(
        browser.client.get_alert_text().await.unwrap(),
        format!(
            "Start a new run from step {step}? It begins with the workspace and the conversation as they were then; this run stays as it is."
        )
    );
    browser.client.accept_alert().await.unwrap();
    let deadline = std::time::Instant::now() + Duration::from_secs(30);
    let new = loop {
        let path = browser
            .client
            .current_url()
            .await
            .unwrap()
            .path()
            .to_owned();
        if let Some(id) = path.strip_prefix("/ui/runs/")
            && id != run
        {
            break id.to_owned();
        }
        assert!(std::time::Instant::now() < deadline, "still at {path}");
        tokio::time::sleep(Duration::from_millis(50)).await;
    };
    browser.close().await;
    // The server's worker drives the new run: it went on from the step (the second call
    // ran again) in a workspace of its own that began as the step's.
    assert_eq!(wait_ended(&server, &new).await, "completed");
    let created = &server.get(&format!("/runs/{new}/events?format=json")).await[0];
    assert_eq!(created["start"]["forked"]["from"], run.as_str());
    assert_eq!(created["start"]["forked"]["to"], step);
    let new_ws = toren.workspace(&new);
    assert_ne!(new_ws, ws);
    assert!(new_ws.join("one.txt").exists() && new_ws.join("two.txt").exists());
    assert_eq!(
        server.get(&format!("/runs/{run}/events?format=json")).await,
        events,
        "the ended run's log is as it was"
    );

    let (status, body) = server
        .post(&format!("/runs/{run}/rewind"), json!({"to": step}))
        .await;
    assert_eq!(status, 200, "{body}");
    assert_eq!(body["forked_from"], run.as_str());
    assert_eq!(body["to"], step);
    let other = body["run_id"].as_str().unwrap();
    assert!(other != run && other != new, "{body}");
    server.stop();
}

/// A run paused at its token budget shows the raise form on its page; raising it there
/// lets the server's worker finish the run, and the raise shows in the conversation.
#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_paused_at_its_budget_is_raised_from_its_page() {
    let model = toren_test_support::FakeAnthropic::start([
        super::budget::answer("toolu_a", 1_200, 30),
        super::budget::answer("toolu_b", 100, 10),
        toren_test_support::Reply::text("all read"),
    ])
    .unwrap();
    let toren = home()
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", &model.base_url());
    toren.agent(
        "spender",
        "name: spender\nmodel: anthropic/claude-haiku-4-5\nsandbox:\n  approval: never\n\
         budget: {tokens: 1000}\n",
    );
    let server = Server::start(&toren, free_port());
    let run = server.create("spender", "look").await;
    let deadline = std::time::Instant::now() + WAIT;
    while server.get(&format!("/runs/{run}")).await["status"] != "awaiting_budget" {
        assert!(std::time::Instant::now() < deadline, "never paused");
        tokio::time::sleep(Duration::from_millis(50)).await;
    }

    let browser = Browser::start().await;
    let base = server.base.clone();
    browser.sign_in(&base, TOKEN).await;
    browser.wait_for("//h1[normalize-space()='Runs']").await;
    browser.goto(&format!("{base}/ui/runs/{run}")).await;
    browser
        .wait_for("//section[@id='budget' and not(@hidden)]")
        .await;
    assert!(
        browser
            .text("#budget-reached")
            .await
            .starts_with("Reached: tokens."),
        "{}",
        browser.text("#budget-reached").await
    );
    browser
        .wait_for("//input[@id='add-tokens']")
        .await
        .send_keys("1000")
        .await
        .unwrap();
    browser
        .wait_for("//button[@id='raise-budget']")
        .await
        .click()
        .await
        .unwrap();
    browser
        .wait_for("//ol[@id='timeline']//li[contains(normalize-space(),'budget raised by api via api: +1000 tokens')]")
        .await;
    browser
        .wait_for("//span[@id='run-status' and normalize-space()='completed']")
        .await;
    assert_eq!(model.requests().len(), 3);
    let view = server.get(&format!("/runs/{run}")).await;
    assert_eq!(view["status"], "completed", "{view}");

    browser.close().await;
    server.stop();
}

/// A command holding a right-to-left override, an isolate, a zero-width space and a
/// carriage return; it names a file with the override in it.
const SPOOFED: &str = "touch 'invoice\u{202E}fdp.exe' # \u{2066}\u{200B}\r";
const SPOOFED_FILE: &str = "invoice\u{202E}fdp.exe";
const SPOOFED_WARNING: &str = "⚠ this command contains 4 hidden or control characters (⟨U+202E⟩ ⟨U+2066⟩ ⟨U+200B⟩ ⟨CR⟩), shown as ⟨…⟩: read it with care";

/// Strings on which the page's script and toren-display must agree.
const SAMPLES: [&str; 8] = [
    SPOOFED,
    "a\tb\r\nc\u{202E}d\u{2028}e\n",
    "echo PWNED > pwned.txt #\r\u{1b}[2K    $ ls -la",
    "x\u{E0041}y\u{FE0F}z\u{3164}",
    "ls -la ~/src → ✓ 日本語 עברית 🦀 ⟨ESC⟩",
    "\u{9b}\u{7f}\u{0}\u{85}\u{AD}",
    "\u{FEFF}\u{115F}\u{10FFFF}\u{E0100}",
    "",
];

/// Every code point toren-display hides (surrogates, which no Rust string holds, too), as
/// inclusive ranges.
fn hidden_ranges() -> Vec<(u32, u32)> {
    let mut ranges: Vec<(u32, u32)> = Vec::new();
    for cp in 0..=0x10FFFF_u32 {
        let hidden = char::from_u32(cp).is_none_or(toren_display::is_hidden);
        if !hidden {
            continue;
        }
        match ranges.last_mut() {
            Some((_, last)) if *last + 1 == cp => *last = cp,
            _ => ranges.push((cp, cp)),
        }
    }
    ranges
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn hidden_characters_are_shown_as_markers_on_every_page_as_on_the_terminal() {
    let toren = Toren::new();
    toren.file(
        "spoof-turns.yaml",
        "turns:\n  - text: \"see \\u202Egnp.exe\\u200B\"\n    tool_calls:\n      - bash: {command: \"touch 'invoice\\u202Efdp.exe' # \\u2066\\u200B\\r\"}\n  - text: \"done\\u2066\"\n",
    );
    toren.agent(
        "spoof",
        "name: spoof\nmodel: scripted/spoof-turns.yaml\nsandbox: true\n",
    );
    let server = Server::start(&toren, free_port());
    let run = server.create("spoof", "go").await;
    wait_pending(&server, &run).await;
    let shown = toren_display::visible_lines(SPOOFED).into_owned();
    assert_eq!(
        shown,
        "touch 'invoice⟨U+202E⟩fdp.exe' # ⟨U+2066⟩⟨U+200B⟩⟨CR⟩"
    );

    let browser = Browser::start().await;
    let base = server.base.clone();
    browser.sign_in(&base, TOKEN).await;
    browser.wait_for("//h1[normalize-space()='Runs']").await;

    // The approvals list: the command made visible, and the warning under it.
    browser.goto(&format!("{base}/ui/approvals")).await;
    let item = format!("//li[@data-run='{run}']");
    let command = browser
        .wait_for(&format!("{item}//pre[contains(@class,'command')]"))
        .await;
    assert_eq!(command.text().await.unwrap(), shown);
    let warning = browser
        .wait_for(&format!("{item}//p[contains(@class,'hidden-chars')]"))
        .await;
    assert_eq!(warning.text().await.unwrap(), SPOOFED_WARNING);
    assert!(
        browser
            .client
            .find_all(Locator::Css("li.approval p.attempt"))
            .await
            .unwrap()
            .is_empty(),
        "a first attempt has no notice"
    );
    browser.shots("approvals-hidden-characters").await;

    // The run page: its approval panel, the call in the timeline, the model's words.
    browser.goto(&format!("{base}/ui/runs/{run}")).await;
    browser
        .wait_for("//section[@id='approval' and not(@hidden)]//p[@id='approval-warning' and not(@hidden)]")
        .await;
    assert_eq!(browser.text("#approval-command").await, shown);
    assert_eq!(browser.text("#approval-warning").await, SPOOFED_WARNING);
    assert!(
        !browser
            .client
            .find(Locator::Id("approval-attempt"))
            .await
            .unwrap()
            .is_displayed()
            .await
            .unwrap()
    );
    assert_eq!(browser.text("li.tool pre.command").await, shown);
    browser
        .wait_for("//li[contains(@class,'assistant')]/pre[.='see ⟨U+202E⟩gnp.exe⟨U+200B⟩']")
        .await;
    browser.shots("run-hidden-characters").await;

    // The page's script renders as toren-display does: the same hidden code points (every
    // one of them), the same markers, counts and findings.
    let from_js = browser
        .client
        .execute(
            "const ranges = []; let start = -1;
             for (let cp = 0; cp <= 0x10FFFF; cp++) {
               const c = String.fromCodePoint(cp);
               const hidden = TorenDisplay.visible(c) !== c;
               if (hidden && start < 0) start = cp;
               if (!hidden && start >= 0) { ranges.push([start, cp - 1]); start = -1; }
             }
             if (start >= 0) ranges.push([start, 0x10FFFF]);
             const samples = arguments[0].map((s) => [TorenDisplay.visible(s),
               TorenDisplay.visibleLines(s), TorenDisplay.hiddenCount(s), TorenDisplay.findings(s)]);
             return [ranges, samples];",
            vec![json!(SAMPLES)],
        )
        .await
        .unwrap();
    let js_ranges: Vec<(u32, u32)> = serde_json::from_value(from_js[0].clone()).unwrap();
    assert_eq!(
        js_ranges,
        hidden_ranges(),
        "the script hides other characters"
    );
    for (sample, js) in SAMPLES.iter().zip(from_js[1].as_array().unwrap()) {
        assert_eq!(
            js,
            &json!([
                toren_display::visible(sample),
                toren_display::visible_lines(sample),
                toren_display::hidden_count(sample),
                toren_display::findings(sample),
            ]),
            "{sample:?}"
        );
    }

    // Approved: the file it made is named visibly in the listing and on its own page.
    browser
        .client
        .find(Locator::Id("approve"))
        .await
        .unwrap()
        .click()
        .await
        .unwrap();
    browser
        .wait_for(
            "//li[contains(@class,'final') and contains(@class,'completed') and .='done⟨U+2066⟩']",
        )
        .await;
    assert!(toren.workspace(&run).join(SPOOFED_FILE).exists());
    browser.goto(&format!("{base}/ui/runs/{run}/files/")).await;
    let link = browser
        .wait_for("//tr[@data-name='invoice⟨U+202E⟩fdp.exe']//a")
        .await;
    assert_eq!(link.text().await.unwrap(), "invoice⟨U+202E⟩fdp.exe");
    browser.shots("workspace-hidden-characters").await;
    link.click().await.unwrap();
    let download = browser.wait_for("//a[@id='download']").await;
    assert_eq!(
        download.attr("download").await.unwrap().as_deref(),
        Some("invoice⟨U+202E⟩fdp.exe")
    );
    let crumbs = browser.text("p.crumbs").await;
    assert!(crumbs.ends_with("/ invoice⟨U+202E⟩fdp.exe"), "{crumbs}");
    assert!(!crumbs.contains('\u{202E}'), "{crumbs}");

    browser.close().await;
    server.stop();
}

const NOTICE: &str = "⚠ attempt 2: this command was interrupted mid-execution and asks to run again; it may already have had some of its effects";

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_call_asking_again_after_an_interruption_carries_the_notice() {
    let toren = Toren::new();
    toren.file(
        "again-turns.yaml",
        "turns:\n  - tool_calls:\n      - bash: {command: \"echo attempt >> attempts.log; if [ -f once ]; then echo second; else touch once; sleep 30; fi\"}\n  - text: \"went on\"\n",
    );
    toren.agent(
        "again",
        "name: again\nmodel: scripted/again-turns.yaml\nsandbox:\n  approval: never\n  on_interrupt: ask\n",
    );
    // Killed mid-command, then resumed: the resumed run asks before running it again.
    let mut first = toren.spawn(&["run", "again", "--input", "go"]);
    let run = toren.wait_for_status(&mut first, "running");
    let deadline = std::time::Instant::now() + WAIT;
    while !toren.workspace(&run).join("once").exists() {
        assert!(
            std::time::Instant::now() < deadline,
            "the command never started"
        );
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
    let _ = first.kill();
    let _ = first.wait();
    let _resumed = Reaped(toren.spawn(&["resume", &run]));
    let deadline = std::time::Instant::now() + WAIT;
    while toren.show(&run)["pending_approval"].is_null() {
        assert!(
            std::time::Instant::now() < deadline,
            "the resumed run never asked"
        );
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    assert_eq!(toren.show(&run)["pending_approval"]["attempt"], 2);

    let server = Server::start(&toren, free_port());
    let browser = Browser::start().await;
    let base = server.base.clone();
    browser.sign_in(&base, TOKEN).await;
    browser.wait_for("//h1[normalize-space()='Runs']").await;

    browser.goto(&format!("{base}/ui/approvals")).await;
    let notice = browser
        .wait_for(&format!(
            "//li[@data-run='{run}']//p[contains(@class,'attempt')]"
        ))
        .await;
    assert_eq!(notice.text().await.unwrap(), NOTICE);
    assert!(
        browser
            .client
            .find_all(Locator::Css("li.approval p.hidden-chars"))
            .await
            .unwrap()
            .is_empty()
    );

    browser.goto(&format!("{base}/ui/runs/{run}")).await;
    browser
        .wait_for("//section[@id='approval' and not(@hidden)]//p[@id='approval-attempt' and not(@hidden)]")
        .await;
    assert_eq!(browser.text("#approval-attempt").await, NOTICE);
    assert!(
        browser
            .text("#approval-command")
            .await
            .contains("attempts.log")
    );
    assert!(
        browser
            .text("li.tool .tool-meta")
            .await
            .contains("(attempt 2)")
    );
    browser.shots("run-attempt-2").await;

    browser.close().await;
    server.stop();
}
