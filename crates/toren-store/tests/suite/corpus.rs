//! The corpus of v1 events (`tests/corpus/v1_events.jsonl`, written by hand, never edited):
//! every line must keep decoding, to the same meaning, with today's `toren_protocol::Event`,
//! and the store must serve such events from its tables. When the format grows a field
//! (with a serde default), add the default to the expectation here; never touch the corpus.

use pretty_assertions::assert_eq;
use serde_json::json;
use toren_protocol::{
    AgentSpec, ApprovalDecided, ApprovalPolicy, ApprovalRequested, AssistantMessage,
    ContextCompacted, Event, EventKind, MessageRange, ModelResponded, ResolvedPolicy, RunCancelled,
    RunCompleted, RunCreated, RunFailed, RunId, SandboxProvisioned, SandboxSpec, ToolCall,
    ToolCompleted, ToolStarted, Usage,
};
use toren_protocol::{BudgetLimit, BudgetLimits, BudgetRaised, BudgetReached, Spending, Usd};
use toren_protocol::{ChannelBinding, MessageDelivered, SessionTurn, SizeRefusal, TurnStart};
use toren_store::EventLog;

const CORPUS: &str = include_str!("../corpus/v1_events.jsonl");

fn decode_corpus() -> Vec<Event> {
    CORPUS
        .lines()
        .enumerate()
        .map(|(i, line)| {
            serde_json::from_str(line)
                .unwrap_or_else(|e| panic!("corpus line {} no longer decodes: {e}", i + 1))
        })
        .collect()
}

/// Which variant an event is; exhaustive, so a new kind fails to compile here until the
/// corpus gets a line for it.
fn variant(kind: &EventKind) -> usize {
    match kind {
        EventKind::RunCreated(_) => 0,
        EventKind::ModelResponded(_) => 1,
        EventKind::ApprovalRequested(_) => 2,
        EventKind::ApprovalDecided(_) => 3,
        EventKind::ToolStarted(_) => 4,
        EventKind::ToolCompleted(_) => 5,
        EventKind::SandboxProvisioned(_) => 6,
        EventKind::RunCompleted(_) => 7,
        EventKind::RunFailed(_) => 8,
        EventKind::RunCancelled(_) => 9,
        EventKind::ContextCompacted(_) => 10,
        EventKind::MessageDelivered(_) => 11,
        EventKind::Rewound(_) => 12,
        EventKind::HostApprovalRequested(_) => 13,
        EventKind::EgressConnections(_) => 14,
        EventKind::BudgetReached(_) => 15,
        EventKind::BudgetRaised(_) => 16,
    }
}
const VARIANTS: usize = 17;

#[test]
fn every_kind_is_in_the_corpus() {
    let mut seen = [false; VARIANTS];
    for event in decode_corpus() {
        assert_eq!(event.v, 1, "the v1 corpus holds v1 events only");
        seen[variant(&event.kind)] = true;
    }
    assert_eq!(
        seen, [true; VARIANTS],
        "each event kind needs a line in the corpus"
    );
}

#[test]
fn v1_events_decode_to_the_same_meaning() {
    assert_eq!(decode_corpus(), expected());
}

#[tokio::test]
async fn the_store_serves_v1_events_written_by_an_older_build() {
    let (_dir, store) = super::common::temp_store().await;
    let mut conn = super::common::raw(store.path()).await;
    let events = expected();
    for event in events.iter().filter(|e| e.seq == 1) {
        sqlx::query(
            "INSERT INTO runs (id, agent, status, created_at, updated_at, last_seq)
             VALUES (?, 'old', 'running', '2026-03-14T09:26:53.589793238Z',
                     '2026-03-14T09:26:53.589793238Z', 0)",
        )
        .bind(event.run_id.as_str())
        .execute(&mut conn)
        .await
        .unwrap();
    }
    for (line, event) in CORPUS.lines().zip(&events) {
        sqlx::query(
            "INSERT INTO events (run_id, seq, kind, v, at, payload) VALUES (?, ?, ?, 1, ?, ?)",
        )
        .bind(event.run_id.as_str())
        .bind(i64::try_from(event.seq).unwrap())
        .bind(event.kind.name())
        .bind(event.at.to_string())
        .bind(line)
        .execute(&mut conn)
        .await
        .unwrap();
    }
    for run_id in [RUN_A, RUN_B, RUN_C, RUN_D, RUN_E, RUN_F, RUN_G] {
        let run_id: RunId = run_id.parse().unwrap();
        let want: Vec<Event> = events
            .iter()
            .filter(|e| e.run_id == run_id)
            .cloned()
            .collect();
        assert_eq!(store.read(&run_id, 0).await.unwrap(), want);
    }
}

const RUN_A: &str = "run_01jqz5m3k8v7c2x9n4b6t0r1ya";
const RUN_B: &str = "run_01jqz6a0f3h5k7m9p1r3t5v7x9";
const RUN_C: &str = "run_01jqz6c8w2y4a6c8e0g2j4l6n8";
const RUN_D: &str = "run_01jqz7d4e6g8j0m2p4r6t8w0y2";
const RUN_E: &str = "run_01jqz8f2h4k6m8p0r2t4v6x8z0";
const RUN_F: &str = "run_01jqz8a1b2c3d4e5f6g7h8j9k0";
const RUN_G: &str = "run_01jqz8b1b2c3d4e5f6g7h8j9k0";

fn event(run: &str, seq: u64, at: &str, kind: EventKind) -> Event {
    Event {
        run_id: run.parse().unwrap(),
        seq,
        at: at.parse().unwrap(),
        v: 1,
        kind,
    }
}

fn s(text: &str) -> String {
    text.to_owned()
}

fn expected() -> Vec<Event> {
    let find = "find . -name '*.rs' | wc -l";
    let call = "toolu_01A9xQ7sLmN3pR";
    let docker = ResolvedPolicy {
        checkpoints: Default::default(),
        backend: s("docker"),
        image: Some(s("toren/sandbox:latest")),
        network: false,
        egress: None,
        approval: ApprovalPolicy::Always,
        env: vec![s("GITHUB_TOKEN")],
        limits: Default::default(),
        workspace: None,
        on_interrupt: Default::default(),
        sandbox_key: None,
        volume: None,
    };
    let answer = "There are 42 Rust files in the project.";
    vec![
        event(
            RUN_A,
            1,
            "2026-03-14T09:26:53.589793238Z",
            EventKind::RunCreated(RunCreated {
                agent: AgentSpec {
                    budget: None,
                    name: s("repo-helper"),
                    model: s("anthropic/claude-sonnet-4-5"),
                    instructions: Some(s(
                        "You help maintain the repository in your workspace. Say what you run and why.",
                    )),
                    sandbox: Some(SandboxSpec {
                        checkpoints: Default::default(),
                        image: Some(s("toren/sandbox:latest")),
                        network: false,
                        egress: None,
                        approval: ApprovalPolicy::Always,
                        env: vec![s("GITHUB_TOKEN")],
                        limits: Default::default(),
                        on_interrupt: Default::default(),
                    }),
                    max_turns: 50,
                    context_tokens: None,
                    source: Some(s("/home/ana/agents/repo-helper.yaml")),
                },
                policy: Some(docker),
                input: s("How many Rust files are in the project?"),
                session: None,
                channel: None,
                start: None,
            }),
        ),
        event(
            RUN_A,
            2,
            "2026-03-14T09:26:54.112Z",
            EventKind::SandboxProvisioned(SandboxProvisioned {
                backend: s("docker"),
                instance: s("5f2c9a1b7e3d"),
                workspace: s("/home/ana/.toren/sandboxes/run_01jqz5m3k8v7c2x9n4b6t0r1ya"),
                envd_version: None,
                origin: None,
            }),
        ),
        event(
            RUN_A,
            3,
            "2026-03-14T09:26:56.402917Z",
            EventKind::ModelResponded(ModelResponded {
                message: AssistantMessage {
                    text: s("I'll count them with find."),
                    tool_calls: vec![ToolCall {
                        id: s(call),
                        name: s("bash"),
                        arguments: json!({ "command": find }),
                        wire_id: None,
                    }],
                },
                stop_reason: s("tool_use"),
                usage: Usage::new(1832, 64),
                model: s("claude-sonnet-4-5-20250929"),
            }),
        ),
        event(
            RUN_A,
            4,
            "2026-03-14T09:26:56.403001Z",
            EventKind::ApprovalRequested(ApprovalRequested {
                call_id: s(call),
                tool: s("bash"),
                command: s(find),
                attempt: 1,
            }),
        ),
        event(
            RUN_A,
            5,
            "2026-03-14T09:27:41.77Z",
            EventKind::ApprovalDecided(ApprovalDecided {
                call_id: s(call),
                approved: true,
                by: s("ana"),
                via: s("terminal"),
                reason: None,
            }),
        ),
        event(
            RUN_A,
            6,
            "2026-03-14T09:27:41.780514Z",
            EventKind::ToolStarted(ToolStarted {
                call_id: s(call),
                tool: s("bash"),
                attempt: 1,
                checkpoint: None,
            }),
        ),
        event(
            RUN_A,
            7,
            "2026-03-14T09:27:41.861207Z",
            EventKind::ToolCompleted(ToolCompleted {
                call_id: s(call),
                output: s("42\n"),
                is_error: false,
                exit_code: Some(0),
                truncated: false,
            }),
        ),
        event(
            RUN_A,
            8,
            "2026-03-14T09:27:43.5Z",
            EventKind::ModelResponded(ModelResponded {
                message: AssistantMessage {
                    text: s(answer),
                    tool_calls: vec![],
                },
                stop_reason: s("end_turn"),
                usage: Usage::new(1921, 12),
                model: s("claude-sonnet-4-5-20250929"),
            }),
        ),
        event(
            RUN_A,
            9,
            "2026-03-14T09:27:43.500113Z",
            EventKind::RunCompleted(RunCompleted { output: s(answer) }),
        ),
        event(
            RUN_B,
            1,
            "2026-03-14T10:02:11Z",
            EventKind::RunCreated(RunCreated {
                agent: AgentSpec {
                    budget: None,
                    name: s("summarizer"),
                    model: s("openai/gpt-4.1-mini"),
                    instructions: None,
                    sandbox: None,
                    max_turns: 10,
                    context_tokens: None,
                    source: None,
                },
                policy: None,
                input: s("Summarize yesterday's notes."),
                session: None,
                channel: None,
                start: None,
            }),
        ),
        event(
            RUN_B,
            2,
            "2026-03-14T10:02:12.004Z",
            EventKind::RunFailed(RunFailed {
                error: s("the model provider answered 401 Unauthorized: check OPENAI_API_KEY"),
            }),
        ),
        event(
            RUN_C,
            1,
            "2026-03-14T11:45:00.000000001Z",
            EventKind::RunCreated(RunCreated {
                agent: AgentSpec {
                    budget: None,
                    name: s("cleaner"),
                    model: s("ollama/qwen3:8b"),
                    instructions: None,
                    sandbox: Some(SandboxSpec {
                        checkpoints: Default::default(),
                        image: None,
                        network: true,
                        egress: None,
                        approval: ApprovalPolicy::Always,
                        env: vec![],
                        limits: Default::default(),
                        on_interrupt: Default::default(),
                    }),
                    max_turns: 50,
                    context_tokens: None,
                    source: None,
                },
                policy: Some(ResolvedPolicy {
                    checkpoints: Default::default(),
                    backend: s("local"),
                    image: None,
                    network: true,
                    egress: None,
                    approval: ApprovalPolicy::Always,
                    env: vec![],
                    limits: Default::default(),
                    workspace: None,
                    on_interrupt: Default::default(),
                    sandbox_key: None,
                    volume: None,
                }),
                input: s("Free some disk space."),
                session: None,
                channel: None,
                start: None,
            }),
        ),
        event(
            RUN_C,
            2,
            "2026-03-14T11:45:03.25Z",
            EventKind::ModelResponded(ModelResponded {
                message: AssistantMessage {
                    text: s(""),
                    tool_calls: vec![ToolCall {
                        id: s("call_7Hq2"),
                        name: s("bash"),
                        arguments: json!({ "command": "rm -rf ~/*", "timeout_secs": 60 }),
                        wire_id: None,
                    }],
                },
                stop_reason: s("tool_calls"),
                usage: Usage::new(640, 31),
                model: s("qwen3:8b"),
            }),
        ),
        event(
            RUN_C,
            3,
            "2026-03-14T11:45:03.250042Z",
            EventKind::ApprovalRequested(ApprovalRequested {
                call_id: s("call_7Hq2"),
                tool: s("bash"),
                command: s("rm -rf ~/*"),
                attempt: 1,
            }),
        ),
        event(
            RUN_C,
            4,
            "2026-03-14T11:46:20.9Z",
            EventKind::ApprovalDecided(ApprovalDecided {
                call_id: s("call_7Hq2"),
                approved: false,
                by: s("ana"),
                via: s("telegram"),
                reason: Some(s("never delete the home directory")),
            }),
        ),
        event(
            RUN_C,
            5,
            "2026-03-14T11:46:20.900310Z",
            EventKind::ToolCompleted(ToolCompleted {
                call_id: s("call_7Hq2"),
                output: s("The user denied this command: never delete the home directory"),
                is_error: true,
                exit_code: None,
                truncated: false,
            }),
        ),
        event(
            RUN_C,
            6,
            "2026-03-14T11:47:02.33Z",
            EventKind::RunCancelled(RunCancelled {
                reason: s("cancelled from the CLI"),
                by: None,
                via: None,
            }),
        ),
    ]
    .into_iter()
    .chain(compacted_run())
    .chain(delivering_run())
    .chain(refused_compaction())
    .chain(budget_pause())
    .chain(rewound())
    .chain(network_records())
    .chain(session_rewind())
    .collect()
}

/// A session's turn with the checkpoint taken before it began, and the rewind turn that
/// took the session back to before it (`toren rewind notes --to 1`, `/undo`).
fn session_rewind() -> Vec<Event> {
    let created = |input: &str, turn: u32, start: TurnStart| {
        EventKind::RunCreated(RunCreated {
            agent: AgentSpec {
                budget: None,
                name: s("coder"),
                model: s("anthropic/claude-sonnet-4-5"),
                instructions: None,
                sandbox: None,
                max_turns: 50,
                context_tokens: None,
                source: None,
            },
            policy: None,
            input: s(input),
            session: Some(SessionTurn {
                id: s("ses_01jqz8a0c2e4g6j8m0p2r4t6w8"),
                name: s("notes"),
                turn,
            }),
            channel: None,
            start: Some(start),
        })
    };
    vec![
        event(
            RUN_F,
            1,
            "2026-03-16T08:00:00Z",
            created(
                "Add a README.",
                1,
                TurnStart {
                    checkpoint: Some(s("01jqz8a0a2c4e6g8j0m2p4r6t8")),
                    rewound: None,
                    forked: None,
                    seeded: None,
                },
            ),
        ),
        event(
            RUN_G,
            1,
            "2026-03-16T08:05:00Z",
            created(
                "",
                2,
                TurnStart {
                    checkpoint: Some(s("01jqz8b0a2c4e6g8j0m2p4r6t8")),
                    rewound: Some(toren_protocol::Rewound {
                        to: 0,
                        checkpoint: Some(s("01jqz8a0a2c4e6g8j0m2p4r6t8")),
                        by: Some(s("ana via chat")),
                        turn: Some(1),
                    }),
                    forked: None,
                    seeded: None,
                },
            ),
        ),
    ]
}

/// A run whose conversation outgrew an 8,000-token window: usage with cache counts, then a
/// compaction that stubs an output and leaves out the first exchange.
fn compacted_run() -> Vec<Event> {
    let bash = |id: &str, command: &str, usage: Usage| {
        EventKind::ModelResponded(ModelResponded {
            message: AssistantMessage {
                text: s(""),
                tool_calls: vec![ToolCall {
                    id: s(id),
                    name: s("bash"),
                    arguments: json!({ "command": command }),
                    wire_id: None,
                }],
            },
            stop_reason: s("tool_use"),
            usage,
            model: s("claude-haiku-4-5"),
        })
    };
    let started = |id: &str| {
        EventKind::ToolStarted(ToolStarted {
            call_id: s(id),
            tool: s("bash"),
            attempt: 1,
            checkpoint: None,
        })
    };
    let completed = |id: &str, output: &str| {
        EventKind::ToolCompleted(ToolCompleted {
            call_id: s(id),
            output: s(output),
            is_error: false,
            exit_code: Some(0),
            truncated: true,
        })
    };
    vec![
        event(
            RUN_D,
            1,
            "2026-03-15T08:00:00Z",
            EventKind::RunCreated(RunCreated {
                agent: AgentSpec {
                    budget: None,
                    name: s("log-reader"),
                    model: s("anthropic/claude-haiku-4-5"),
                    instructions: None,
                    sandbox: Some(SandboxSpec {
                        checkpoints: Default::default(),
                        approval: ApprovalPolicy::Never,
                        ..Default::default()
                    }),
                    max_turns: 300,
                    context_tokens: Some(8000),
                    source: None,
                },
                policy: Some(ResolvedPolicy {
                    checkpoints: Default::default(),
                    backend: s("local"),
                    image: None,
                    network: false,
                    egress: None,
                    approval: ApprovalPolicy::Never,
                    env: vec![],
                    limits: Default::default(),
                    workspace: None,
                    on_interrupt: Default::default(),
                    sandbox_key: None,
                    volume: None,
                }),
                input: s("Summarise the build logs."),
                session: None,
                channel: None,
                start: None,
            }),
        ),
        event(
            RUN_D,
            2,
            "2026-03-15T08:00:02.5Z",
            bash(
                "toolu_01Log1",
                "cat build-1.log",
                Usage {
                    cache_read_input_tokens: 1800,
                    cache_creation_input_tokens: 250,
                    ..Usage::new(2100, 40)
                },
            ),
        ),
        event(RUN_D, 3, "2026-03-15T08:00:02.6Z", started("toolu_01Log1")),
        event(
            RUN_D,
            4,
            "2026-03-15T08:00:03Z",
            completed("toolu_01Log1", "error[E0308]: mismatched types\n"),
        ),
        event(
            RUN_D,
            5,
            "2026-03-15T08:00:05Z",
            bash("toolu_01Log2", "cat build-2.log", Usage::new(7400, 38)),
        ),
        event(RUN_D, 6, "2026-03-15T08:00:05.1Z", started("toolu_01Log2")),
        event(
            RUN_D,
            7,
            "2026-03-15T08:00:05.9Z",
            completed("toolu_01Log2", "warning: unused variable\n"),
        ),
        event(
            RUN_D,
            8,
            "2026-03-15T08:00:06Z",
            EventKind::ContextCompacted(ContextCompacted {
                stubbed: vec![s("toolu_01Log2")],
                dropped: vec![MessageRange { start: 1, end: 3 }],
                context_tokens: 8000,
                estimated_before: 7950,
                estimated_after: 2300,
                refused: None,
            }),
        ),
    ]
}

/// A run bound to the terminal channel that sent two files: a document with a caption, and
/// an image whose call was interrupted after its delivery and, run again, was recognised by
/// the channel (`repeated`) instead of being delivered twice.
fn delivering_run() -> Vec<Event> {
    let send = |id: &str, arguments: serde_json::Value, text: &str, usage: Usage| {
        EventKind::ModelResponded(ModelResponded {
            message: AssistantMessage {
                text: s(text),
                tool_calls: vec![ToolCall {
                    id: s(id),
                    name: s("send_to_channel"),
                    arguments,
                    wire_id: None,
                }],
            },
            stop_reason: s("tool_use"),
            usage,
            model: s("claude-sonnet-5"),
        })
    };
    let started = |id: &str, attempt: u32| {
        EventKind::ToolStarted(ToolStarted {
            call_id: s(id),
            tool: s("send_to_channel"),
            attempt,
            checkpoint: None,
        })
    };
    vec![
        event(
            RUN_E,
            1,
            "2026-03-16T18:20:00Z",
            EventKind::RunCreated(RunCreated {
                agent: AgentSpec {
                    budget: None,
                    name: s("reporter"),
                    model: s("anthropic/claude-sonnet-5"),
                    instructions: None,
                    sandbox: Some(SandboxSpec {
                        checkpoints: Default::default(),
                        approval: ApprovalPolicy::Never,
                        ..Default::default()
                    }),
                    max_turns: 50,
                    context_tokens: None,
                    source: None,
                },
                policy: Some(ResolvedPolicy {
                    checkpoints: Default::default(),
                    backend: s("local"),
                    image: None,
                    network: false,
                    egress: None,
                    approval: ApprovalPolicy::Never,
                    env: vec![],
                    limits: Default::default(),
                    workspace: None,
                    on_interrupt: Default::default(),
                    sandbox_key: None,
                    volume: None,
                }),
                input: s("Send me this week's report."),
                session: None,
                channel: Some(ChannelBinding {
                    kind: s("terminal"),
                    address: s("weekly"),
                }),
                start: None,
            }),
        ),
        event(
            RUN_E,
            2,
            "2026-03-16T18:20:04Z",
            send(
                "toolu_01Send1",
                json!({ "path": "out/report.pdf", "caption": "Week 11" }),
                "Here it is.",
                Usage::new(3100, 52),
            ),
        ),
        event(
            RUN_E,
            3,
            "2026-03-16T18:20:04.1Z",
            started("toolu_01Send1", 1),
        ),
        event(
            RUN_E,
            4,
            "2026-03-16T18:20:04.3Z",
            EventKind::MessageDelivered(MessageDelivered {
                call_id: s("toolu_01Send1"),
                channel: s("terminal"),
                path: s("out/report.pdf"),
                bytes: 48213,
                sha256: s("0f4a6cfa5c2b24d3a1d5b0e0c3c6d0a8e76bb7e4a1a5fe4fa8a5a2cbb3f0c911"),
                kind: s("document"),
                caption: Some(s("Week 11")),
                receipt: s("/home/ana/Downloads/toren/weekly/report-1.pdf"),
                repeated: false,
            }),
        ),
        event(
            RUN_E,
            5,
            "2026-03-16T18:20:04.3Z",
            EventKind::ToolCompleted(ToolCompleted {
                call_id: s("toolu_01Send1"),
                output: s(
                    "sent `out/report.pdf` (48213 bytes, document) to the person through \
                           the terminal channel: saved as `report-1.pdf` in the person's \
                           downloads folder.",
                ),
                is_error: false,
                exit_code: None,
                truncated: false,
            }),
        ),
        event(
            RUN_E,
            6,
            "2026-03-16T18:20:09Z",
            send(
                "toolu_01Send2",
                json!({ "path": "plot.png" }),
                "",
                Usage::new(3300, 30),
            ),
        ),
        event(
            RUN_E,
            7,
            "2026-03-16T18:20:09.1Z",
            started("toolu_01Send2", 1),
        ),
        event(
            RUN_E,
            8,
            "2026-03-16T18:31:40Z",
            started("toolu_01Send2", 2),
        ),
        event(
            RUN_E,
            9,
            "2026-03-16T18:31:40.2Z",
            EventKind::MessageDelivered(MessageDelivered {
                call_id: s("toolu_01Send2"),
                channel: s("terminal"),
                path: s("plot.png"),
                bytes: 20480,
                sha256: s("9d377b10ce778c4938b3c7e2c63a229a8c8a5e28b16ad41c5d6d1e0a7f3b2c44"),
                kind: s("image"),
                caption: None,
                receipt: s("/home/ana/Downloads/toren/weekly/plot.png"),
                repeated: true,
            }),
        ),
    ]
}

/// Later in the compacted run: a provider refused a request as too large, and the
/// compaction that answered it only learnt the window (the answer's room was the trouble).
fn refused_compaction() -> Vec<Event> {
    vec![event(
        RUN_D,
        9,
        "2026-03-15T08:00:09Z",
        EventKind::ContextCompacted(ContextCompacted {
            stubbed: vec![],
            dropped: vec![],
            context_tokens: 6000,
            estimated_before: 2300,
            estimated_after: 2300,
            refused: Some(SizeRefusal {
                input_tokens: Some(2650),
                limit_tokens: Some(6000),
                message: s(
                    "input length and `max_tokens` exceed context limit: 2650 + 4096 > 6000, \
                         decrease input length or `max_tokens` and try again",
                ),
            }),
        }),
    )]
}

/// Later still in the compacted run: it reached its token and dollar limits before a model
/// call and paused, and a person raised both from the CLI.
fn budget_pause() -> Vec<Event> {
    vec![
        event(
            RUN_D,
            10,
            "2026-03-15T08:00:10Z",
            EventKind::BudgetReached(BudgetReached {
                reached: vec![BudgetLimit::Tokens, BudgetLimit::Usd],
                spent: Spending {
                    tokens: 12_000,
                    usd: Some(Usd(13_500)),
                    wall_secs: 10,
                },
                limits: BudgetLimits {
                    tokens: Some(10_000),
                    usd: Some(Usd(10_000)),
                    wall_secs: None,
                },
            }),
        ),
        event(
            RUN_D,
            11,
            "2026-03-15T09:12:00Z",
            EventKind::BudgetRaised(BudgetRaised {
                tokens: 50_000,
                usd: Usd(500_000),
                wall_secs: 0,
                by: s("ana"),
                via: s("cli"),
            }),
        ),
    ]
}

/// A run taken back to step 4 (`toren rewind`), its workspace restored to a checkpoint.
fn rewound() -> Vec<Event> {
    vec![event(
        "run_01jqz7d4e6g8j0m2p4r6t8w0y2",
        20,
        "2026-03-15T09:30:00Z",
        EventKind::Rewound(toren_protocol::Rewound {
            to: 4,
            checkpoint: Some(s("01jqz7f0a2c4e6g8j0m2p4r6t8")),
            by: Some(s("ana via cli")),
            turn: None,
        }),
    )]
}

/// Network access by host: a host outside the list asked about while a bash
/// call ran, and the connections the egress proxy journaled.
fn network_records() -> Vec<Event> {
    use toren_protocol::{
        ConnectionOutcome, EgressConnection, EgressConnections, HostApprovalRequested,
    };
    vec![
        event(
            RUN_D,
            30,
            "2026-03-15T10:00:00Z",
            EventKind::HostApprovalRequested(HostApprovalRequested::new(
                "pypi.org",
                443,
                Some((s("toolu_9"), s("pip install requests"))),
            )),
        ),
        event(
            RUN_D,
            31,
            "2026-03-15T10:00:05Z",
            EventKind::EgressConnections(EgressConnections {
                connections: vec![
                    EgressConnection {
                        host: s("pypi.org"),
                        port: 443,
                        method: s("CONNECT"),
                        outcome: ConnectionOutcome::Approved,
                        reason: None,
                        address: Some(s("151.101.0.223:443")),
                        bytes_up: 1200,
                        bytes_down: 30000,
                        call_id: Some(s("toolu_9")),
                    },
                    EgressConnection {
                        host: s("evil.example"),
                        port: 443,
                        method: s("CONNECT"),
                        outcome: ConnectionOutcome::Denied,
                        reason: Some(s("this host is not in the agent's network list")),
                        address: None,
                        bytes_up: 0,
                        bytes_down: 0,
                        call_id: None,
                    },
                ],
            }),
        ),
    ]
}
