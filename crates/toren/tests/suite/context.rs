//! A long run against a model with a small context window: 300 turns whose tool outputs
//! would fill the window many times over complete against the fake Anthropic server, which
//! refuses an oversize request exactly as the real API does; and a run killed with SIGKILL
//! in the middle of a model call sends, once resumed, byte for byte the requests an
//! uninterrupted run sends.

use std::process::Child;
use std::time::{Duration, Instant};

use pretty_assertions::assert_eq;
use serde_json::{Value, json};
use toren_protocol::{AssistantMessage, ToolCall};
use toren_test_support::{FakeAnthropic, ReceivedRequest, Reply, fake_input_tokens};

use super::common::{Toren, text};

/// The model's window, on both sides: the agent file says it, the fake enforces it.
const WINDOW: u64 = 16_000;
const TURNS: usize = 300;
/// The model call the interrupted run is killed in (1-based).
const KILLED_IN: usize = 150;

fn agent(context_tokens: Option<u64>) -> String {
    let window = context_tokens.map_or(String::new(), |t| format!("context_tokens: {t}\n"));
    format!(
        "name: long\nmodel: anthropic/claude-haiku-4-5\nmax_turns: 400\n{window}\
         sandbox:\n  approval: never\n"
    )
}

/// 299 tool turns, then the answer. The outputs: a 20,000-byte bash output every 50th
/// turn, file reads of 3 to 9 KB otherwise (reads are cheap; commands start a sandbox).
fn replies() -> Vec<Reply> {
    let turn = |n: usize, name: &str, arguments: Value| {
        Reply::Turn(AssistantMessage {
            text: format!("Step {n}."),
            tool_calls: vec![ToolCall::new(format!("toolu_{n:03}"), name, arguments)],
        })
    };
    let mut replies = vec![turn(
        1,
        "bash",
        json!({"command": "seq 100000 104000 > numbers.txt; echo written"}),
    )];
    for n in 2..TURNS {
        replies.push(if n % 50 == 0 {
            turn(
                n,
                "bash",
                json!({"command": "head -c 20000 /dev/zero | tr '\\0' x"}),
            )
        } else {
            let lines = 200 + (n * 37) % 500;
            turn(
                n,
                "read_file",
                json!({"path": "numbers.txt", "offset": n, "limit": lines}),
            )
        });
    }
    replies.push(Reply::text("All 300 steps done."));
    replies
}

fn home(fake: &FakeAnthropic, context_tokens: Option<u64>) -> Toren {
    let toren = Toren::new()
        .env("ANTHROPIC_API_KEY", "sk-ant-test")
        .env("ANTHROPIC_BASE_URL", &fake.base_url());
    toren.agent("long", &agent(context_tokens));
    toren
}

fn fake(replies: Vec<Reply>) -> FakeAnthropic {
    let fake = FakeAnthropic::start(replies).unwrap();
    fake.limit_input_tokens(WINDOW);
    fake.stream_whole();
    fake
}

fn bodies(requests: &[ReceivedRequest]) -> Vec<String> {
    requests
        .iter()
        .map(|r| String::from_utf8(r.raw_body.clone()).unwrap())
        .collect()
}

fn finish(child: Child) -> std::process::Output {
    let out = child.wait_with_output().unwrap();
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    out
}

#[test]
fn a_window_smaller_than_the_spec_says_is_learnt_from_the_providers_refusal() {
    // The table gives Claude 200k tokens; this server has 16k. Once the conversation outgrows
    // it, the server refuses the request as the API does ("prompt is too long: N tokens > M
    // maximum"; before compaction existed, that failed the run). The refusal is recorded
    // with a compaction that fits what it taught, and the run goes on to the end.
    let fake = fake(
        replies()[..40]
            .iter()
            .cloned()
            .chain([Reply::text("done")])
            .collect(),
    );
    let toren = home(&fake, None);
    let out = toren.run(&["run", "long", "--input", "read the numbers"]);
    assert_eq!(out.status.code(), Some(0), "{}", text(&out.stderr));
    assert_eq!(text(&out.stdout), "done\n");
    let run = toren.newest_run().unwrap();
    let events = toren.events(&run);
    let refusals: Vec<&Value> = events
        .iter()
        .filter(|e| e["type"] == "context_compacted" && !e["refused"].is_null())
        .collect();
    assert_eq!(
        refusals.len(),
        1,
        "one refusal teaches the window: {refusals:#?}"
    );
    let refused = &refusals[0]["refused"];
    assert_eq!(refused["limit_tokens"], WINDOW);
    let message = refused["message"].as_str().unwrap();
    assert!(
        message.starts_with("prompt is too long: ")
            || message.starts_with("input length and `max_tokens` exceed context limit: "),
        "{message}"
    );
    assert_eq!(refusals[0]["context_tokens"], WINDOW);
    let shown = text(&toren.run(&["events", &run]).stdout);
    assert!(
        shown.contains("to fit the context window of 16000 tokens")
            && shown.contains("; the provider refused the request: "),
        "{shown}"
    );
    let sent = fake.requests();
    let refused_requests = sent.len() - 41;
    assert_eq!(
        refused_requests, 1,
        "only the first oversize request was sent"
    );
}

#[test]
fn three_hundred_turns_fit_a_small_window_and_a_resumed_run_sends_the_same_bytes() {
    // The reference: uninterrupted. Beside it, the same run killed inside model call 150.
    let reference = fake(replies());
    let mut hung = replies();
    hung[KILLED_IN - 1] = Reply::Hang;
    let interrupted = fake(hung.drain(..KILLED_IN).collect());
    let (a, b) = (
        home(&reference, Some(WINDOW)),
        home(&interrupted, Some(WINDOW)),
    );
    let input = ["run", "long", "--input", "read the numbers"];
    let started = Instant::now();
    let whole = a.spawn(&input);
    let mut killed = b.spawn(&input);
    let deadline = Instant::now() + Duration::from_secs(120);
    while interrupted.requests().len() < KILLED_IN {
        assert!(
            killed.try_wait().unwrap().is_none(),
            "the run ended before call {KILLED_IN}"
        );
        assert!(Instant::now() < deadline, "call {KILLED_IN} never came");
        std::thread::sleep(Duration::from_millis(20));
    }
    killed.kill().unwrap(); // SIGKILL, while it waits for the answer
    killed.wait().unwrap();
    let out = finish(whole);
    assert_eq!(text(&out.stdout), "All 300 steps done.\n");
    let run_a = a.newest_run().unwrap();

    // Resumed against a server holding the rest of the script.
    let rest = fake(replies().split_off(KILLED_IN - 1));
    let run_b = b.newest_run().unwrap();
    let resumed = b
        .command(&["resume", &run_b])
        .env("ANTHROPIC_BASE_URL", rest.base_url())
        .output()
        .unwrap();
    assert_eq!(resumed.status.code(), Some(0), "{}", text(&resumed.stderr));
    assert_eq!(text(&resumed.stdout), "All 300 steps done.\n");
    let elapsed = started.elapsed();

    let want = bodies(&reference.requests());
    assert_eq!(want.len(), TURNS, "one request per turn, none refused");
    let before_kill = bodies(&interrupted.requests());
    let after_resume = bodies(&rest.requests());
    assert_eq!(before_kill.len(), KILLED_IN);
    assert_eq!(after_resume.len(), TURNS - KILLED_IN + 1);
    // The call in flight at the kill is sent again, the same bytes; and so is every other.
    assert!(
        before_kill[KILLED_IN - 1] == after_resume[0],
        "call {KILLED_IN} differs"
    );
    for (n, body) in before_kill.iter().chain(&after_resume[1..]).enumerate() {
        assert!(
            *body == want[n],
            "request {} differs from the uninterrupted run's",
            n + 1
        );
    }

    // Every request fitted the window with its max_tokens, and the window was needed.
    let requests = reference.requests();
    for (n, r) in requests.iter().enumerate() {
        let tokens = fake_input_tokens(&r.raw_body) + r.body["max_tokens"].as_u64().unwrap();
        assert!(tokens <= WINDOW, "request {}: {tokens}", n + 1);
    }
    let tools = requests[0].body["tools"].to_string();
    assert!(
        toren_agent::estimate_tokens(&tools) <= toren_agent::TOOLS_RESERVE,
        "the tool definitions outgrew their reserve: {}",
        toren_agent::estimate_tokens(&tools)
    );
    let last = &requests[TURNS - 1].raw_body;
    let events = a.events(&run_a);
    let compactions = events
        .iter()
        .filter(|e| e["type"] == "context_compacted")
        .count();
    assert!(compactions > 10, "{compactions} compactions");
    assert!(
        events.iter().all(|e| e["refused"].is_null()),
        "no request was refused: none was sent too large"
    );
    let shown = a.show(&run_a);
    assert_eq!(shown["context"]["compactions"], compactions);
    assert_eq!(shown["context"]["window_tokens"], WINDOW);
    assert_eq!(shown["usage"]["input_tokens"], 42 * TURNS as u64);
    let human = text(&a.run(&["runs", "show", &run_a]).stdout);
    assert!(
        human.contains(&format!(
            "\ncontext    {} to fit 16,000 tokens: ",
            toren_display::count(compactions, "compaction", "compactions")
        )),
        "{human}"
    );
    let last = String::from_utf8_lossy(last);
    assert!(
        last.contains("removed to fit the context window")
            && last.contains("earlier messages were left out here"),
        "the last request carries stubs and a note"
    );
    // The interrupted run's log is the reference's, event for event (times and ids aside).
    let kinds = |t: &Toren, run: &str| -> Vec<Value> {
        t.events(run)
            .into_iter()
            .map(|mut e| {
                for key in ["run_id", "at", "workspace", "instance"] {
                    e.as_object_mut().unwrap().remove(key);
                }
                if e["type"] == "run_created" {
                    e = json!({"type": "run_created"});
                }
                // A workspace checkpoint's id is new in each run; that there is one is not.
                if let Some(checkpoint) = e.get_mut("checkpoint") {
                    *checkpoint = json!("<checkpoint>");
                }
                e
            })
            .collect()
    };
    assert_eq!(kinds(&b, &run_b), kinds(&a, &run_a));
    eprintln!(
        "context: {TURNS} turns twice over, {compactions} compactions, {} events, in {:.1}s",
        events.len(),
        elapsed.as_secs_f64()
    );
}
