//! One worker process drives 50 runs of three different agents at once, each from its own
//! pinned `run_created`: file tools (`files`), bash without approval (`shell`), and bash
//! under `approval: always` (`guarded`), whose requests are answered through
//! `service.decide` by a task that follows each run. Every run completes, and every log is
//! checked: its policy, its tool results, its seqs, and for `guarded` one decision per call
//! with the command started only after it was approved.

use std::sync::Arc;
use std::time::Instant;

use serde_json::json;
use tokio_util::sync::CancellationToken;
use toren_protocol::{AgentSpec, ApprovalPolicy, Event, EventKind, RunId, SandboxSpec};
use toren_runtime::{Followed, RunService};

use super::support::{
    Home, actor, assert_gap_free, bash, calls, completed, position, results, sandbox, say, tool,
    types, within,
};

const RUNS: usize = 50;

/// `sandbox(approval)` granting the operator's variable `var`.
fn granting(approval: ApprovalPolicy, var: &str) -> SandboxSpec {
    SandboxSpec {
        checkpoints: Default::default(),
        env: vec![var.to_owned()],
        ..sandbox(approval)
    }
}

/// The three agents.
fn agents(home: &Home) -> [AgentSpec; 3] {
    let files = home.agent(
        "files",
        Some(granting(ApprovalPolicy::Never, "ALPHA")),
        &[
            calls(vec![tool(
                "write_file",
                json!({"path": "note.txt", "content": "from files\n"}),
            )]),
            calls(vec![tool("read_file", json!({"path": "note.txt"}))]),
            say("files done"),
        ],
    );
    let shell = home.agent(
        "shell",
        Some(granting(ApprovalPolicy::Never, "BETA")),
        &[
            calls(vec![bash(
                "echo \"shell:$ALPHA:$BETA:$GAMMA\" | tee out.txt",
            )]),
            say("shell done"),
        ],
    );
    let guarded = home.agent(
        "guarded",
        Some(granting(ApprovalPolicy::Always, "GAMMA")),
        &[
            calls(vec![
                bash("echo \"guarded:$ALPHA:$BETA:$GAMMA\" | tee out.txt"),
                bash("touch denied"),
            ]),
            say("guarded done"),
        ],
    );
    [files, shell, guarded]
}

/// Follows `run` to its end, approving its `call_1` and denying anything else; returns
/// the events it saw.
async fn answer(service: RunService, run: RunId) -> Vec<Event> {
    let mut follow = service.follow(&run, 0);
    let mut seen = Vec::new();
    while let Some(item) = follow.next().await.unwrap() {
        let Followed::Event(event) = item else {
            continue;
        };
        if let EventKind::ApprovalRequested(request) = &event.kind {
            let approve = request.call_id == "call_1";
            let reason = (!approve).then(|| "not this one".to_owned());
            service
                .decide(&run, &request.call_id, approve, reason, &actor())
                .await
                .unwrap();
        }
        seen.push(*event);
    }
    seen
}

#[tokio::test(flavor = "multi_thread")]
async fn one_worker_drives_fifty_runs_of_three_agents_at_once() {
    let home = Home::new().await;
    let agents = agents(&home);
    let began = Instant::now();
    let mut runs = Vec::new();
    for i in 0..RUNS {
        let agent = &agents[i % agents.len()];
        let created = home.create(agent.clone(), &format!("run {i}")).await;
        let followed = (agent.name == "guarded")
            .then(|| tokio::spawn(answer(home.service.clone(), created.run_id.clone())));
        let worker = Arc::clone(&home.worker);
        let lease = created.lease;
        let driving =
            tokio::spawn(async move { worker.drive(lease, &CancellationToken::new()).await });
        runs.push((agent, created.run_id, driving, followed));
    }
    let mut outcomes = Vec::new();
    for (agent, run, driving, followed) in runs {
        let outcome = within("a run's driver", driving).await.unwrap().unwrap();
        let followed = match followed {
            Some(task) => Some(within("a run's follower", task).await.unwrap()),
            None => None,
        };
        outcomes.push((agent, run, outcome, followed));
    }
    let took = began.elapsed();
    eprintln!("{RUNS} concurrent runs of 3 agents driven by one worker in {took:?}");

    for (agent, run, outcome, followed) in &outcomes {
        let events = home.events(run).await;
        assert_eq!(
            *outcome,
            completed(&format!("{} done", agent.name)),
            "{run}: {:?}",
            types(&events)
        );
        check_log(&home, agent, run, &events);
        if let Some(followed) = followed {
            assert_eq!(followed, &events, "{run}: the follower saw another log");
        }
    }
    // Every answer in the logs was asked for once.
    let logs =
        futures::future::join_all(outcomes.iter().map(|(_, run, _, _)| home.events(run))).await;
    let answers = logs
        .iter()
        .flatten()
        .filter(|e| matches!(e.kind, EventKind::ModelResponded(_)))
        .count();
    assert_eq!(home.requests.lock().unwrap().len(), answers);
}

/// Everything a run's log must show for its agent.
fn check_log(home: &Home, agent: &AgentSpec, run: &RunId, events: &[Event]) {
    assert_gap_free(events);
    let EventKind::RunCreated(created) = &events[0].kind else {
        panic!("{run}: {:?}", types(events));
    };
    assert_eq!(&created.agent, agent);
    let policy = created.policy.as_ref().unwrap();
    let spec = agent.sandbox.as_ref().unwrap();
    assert_eq!(
        (&policy.backend, policy.approval, &policy.env),
        (&"local".to_owned(), spec.approval, &spec.env),
        "{run}"
    );
    let workspace = home.workspace(run);
    assert_eq!(
        policy.workspace.as_deref(),
        Some(workspace.display().to_string().as_str())
    );
    let results = results(events);
    let file = |name: &str| std::fs::read_to_string(workspace.join(name)).unwrap();
    let approvals = events
        .iter()
        .filter(|e| {
            matches!(
                e.kind,
                EventKind::ApprovalRequested(_) | EventKind::ApprovalDecided(_)
            )
        })
        .count();
    match agent.name.as_str() {
        "files" => {
            assert_eq!(results.len(), 2, "{run}");
            assert!(!results["call_1"].is_error, "{:?}", results["call_1"]);
            assert!(
                !results["call_2"].is_error && results["call_2"].output.contains("from files"),
                "{:?}",
                results["call_2"]
            );
            assert_eq!(file("note.txt"), "from files\n");
            assert_eq!(approvals, 0, "{run}");
        }
        "shell" => {
            // Only its own grant reaches its sandbox (the file shows it), and what the
            // command printed of it is journaled redacted.
            assert_eq!(
                results["call_1"].output,
                "shell::[redacted:BETA]:\n[exit code: 0]"
            );
            assert_eq!(file("out.txt"), "shell::beta:\n");
            assert_eq!(approvals, 0, "{run}");
        }
        "guarded" => {
            check_guarded(run, events, &results);
            assert_eq!(file("out.txt"), "guarded:::gamma\n");
            assert!(
                !workspace.join("denied").exists(),
                "{run}: the denied command ran"
            );
        }
        other => panic!("unexpected agent {other}"),
    }
}

fn check_guarded(
    run: &RunId,
    events: &[Event],
    results: &std::collections::BTreeMap<String, toren_protocol::ToolCompleted>,
) {
    assert_eq!(
        results["call_1"].output,
        "guarded:::[redacted:GAMMA]\n[exit code: 0]"
    );
    assert!(results["call_2"].is_error);
    assert!(
        results["call_2"].output.starts_with(
            "The human denied this command; it did not run. Their reason: not this one"
        ),
        "{:?}",
        results["call_2"]
    );
    for call in ["call_1", "call_2"] {
        let decisions: Vec<usize> = events
            .iter()
            .enumerate()
            .filter(|(_, e)| matches!(&e.kind, EventKind::ApprovalDecided(d) if d.call_id == call))
            .map(|(i, _)| i)
            .collect();
        assert_eq!(decisions.len(), 1, "{run} {call}: {:?}", types(events));
        let requested = position(
            events,
            |k| matches!(k, EventKind::ApprovalRequested(r) if r.call_id == call),
        )
        .unwrap();
        assert!(requested < decisions[0], "{run} {call}");
        let started = position(
            events,
            |k| matches!(k, EventKind::ToolStarted(s) if s.call_id == call),
        );
        match call {
            "call_1" => assert!(
                started.unwrap() > decisions[0],
                "{run}: {:?}",
                types(events)
            ),
            _ => assert_eq!(started, None, "{run}: a denied call started"),
        }
    }
}
