//! `sse`: the API under load from a second process — this one; the
//! server is its own `toren serve` process. First `POST /runs` throughput and latency:
//! R runs of an agent that only answers, from C concurrent clients. Then SSE fan-out: one
//! run whose first bash call waits for approval; F clients follow its `GET
//! /runs/{id}/events` (each has read the backlog before the approval is given), then the
//! run makes its file-tool calls and ends. Each client's stream must hold every journaled
//! event exactly once and in order; the delivery delay of an event is the moment a client
//! read it minus its journaled `at` (same host, same clock). The server's memory, threads
//! and descriptors are read while the F follow. Exit 1 when anything was wrong.
//!
//! Neighbours: [`follow`] one client's stream, [`figures`] the report; the server
//! process and the HTTP calls are `concurrency`'s.

mod args;
mod figures;
mod follow;

use std::time::{Duration, Instant};

use anyhow::bail;
use futures::StreamExt as _;
use tokio::sync::mpsc;
use toren_protocol::EventKind;

use crate::concurrency::api::Api;
use crate::concurrency::serve::{self, Home, Server};
use crate::concurrency::{Creation, sample_until_stopped, say, wait_ended};
use crate::toren_bin;
pub(crate) use args::{Sse, SseArgs};
use figures::Measured;
use follow::Received;

/// The agent that only answers (the POST load).
const POST: &str = "post";
/// The agent of the followed run.
const FANOUT: &str = "fanout";
/// Its final answer.
const ANSWER: &str = "fan-out done";
/// How long the whole benchmark may take.
const DEADLINE: Duration = Duration::from_secs(600);

fn files() -> Vec<(String, String)> {
    let mut script =
        String::from("turns:\n  - tool_calls:\n      - bash: {command: \"echo gate\"}\n");
    for n in 1..=4 {
        script.push_str(&format!(
            "  - tool_calls:\n      - write_file: {{path: \"f{n}.txt\", content: \"file {n}\"}}\n      - read_file: {{path: \"f{n}.txt\"}}\n"
        ));
    }
    script.push_str(&format!("  - text: \"{ANSWER}\"\n"));
    vec![
        (
            format!("{POST}.script.yaml"),
            "turns:\n  - text: \"posted\"\n".to_owned(),
        ),
        (
            format!("{POST}.yaml"),
            format!("name: {POST}\nmodel: scripted/{POST}.script.yaml\n"),
        ),
        (format!("{FANOUT}.script.yaml"), script),
        (
            format!("{FANOUT}.yaml"),
            format!("name: {FANOUT}\nmodel: scripted/{FANOUT}.script.yaml\nsandbox: true\n"),
        ),
    ]
}

pub(crate) async fn run(args: Sse) -> anyhow::Result<bool> {
    let toren = toren_bin::toren(args.toren.as_deref())?;
    let home = Home::new(&files())?;
    say(&format!(
        "sse: {} POST /runs from {} clients, then {} clients following one run (toren serve \
         --workers {}, {} build)",
        args.runs,
        args.concurrency,
        args.followers,
        args.workers,
        toren_bin::profile(&toren)
    ));
    let server = Server::start(&toren, &home, "local", args.workers).await?;
    let api = Api::new(&server.base)?;
    let pid = server.pid();
    let deadline = Instant::now() + DEADLINE;
    let mut problems = Vec::new();

    // POST /runs from this process.
    let started = Instant::now();
    let posted: Vec<Creation> = futures::stream::iter(0..args.runs)
        .map(|n| {
            let api = api.clone();
            async move {
                api.create(POST, &format!("post {n}"))
                    .await
                    .map_err(|e| format!("{e:#}"))
            }
        })
        .buffer_unordered(args.concurrency)
        .collect()
        .await;
    let post_phase = started.elapsed();
    problems.extend(posted.iter().filter_map(|c| c.as_ref().err().cloned()));
    let post_ids: Vec<String> = posted
        .iter()
        .filter_map(|c| c.as_ref().ok().map(|c| c.0.clone()))
        .collect();
    wait_ended(&api, &post_ids, deadline).await?;
    let ended = Instant::now() - started;
    let completed = api.listed("completed").await?.len();
    if completed != post_ids.len() {
        problems.push(format!(
            "{completed} of {} posted runs completed",
            post_ids.len()
        ));
    }

    // SSE fan-out.
    let (run, _) = api.create(FANOUT, "fan out").await?;
    wait_awaiting(&api, &run, deadline).await?;
    let before = serve::sample(pid).unwrap_or_default();
    let client = Api::streaming()?;
    let (following, mut followed) = mpsc::unbounded_channel();
    let mut clients = tokio::task::JoinSet::new();
    for _ in 0..args.followers {
        let (client, base, run, following) = (
            client.clone(),
            server.base.clone(),
            run.clone(),
            following.clone(),
        );
        clients.spawn(follow::follow(client, base, run, following, DEADLINE));
    }
    drop(following);
    let connecting = Instant::now();
    for _ in 0..args.followers {
        if followed.recv().await.is_none() {
            break;
        }
    }
    let connected = connecting.elapsed();
    let (stop, sampler) = sample_until_stopped(pid);
    let following_all = serve::sample(pid).unwrap_or_default();
    for call in api.pending(&run).await? {
        api.approve(&run, &call).await?;
    }
    let mut streams: Vec<Result<Vec<Received>, String>> = Vec::new();
    while let Some(done) = clients.join_next().await {
        streams.push(match done {
            Ok(result) => result.map_err(|e| format!("{e:#}")),
            Err(e) => Err(format!("a client task failed: {e}")),
        });
    }
    let _ = stop.send(());
    let peak = sampler.await.unwrap_or_default();
    let log = api.events(&run).await?;
    match log.last().map(|e| &e.kind) {
        Some(EventKind::RunCompleted(done)) if done.output == ANSWER => {}
        other => problems.push(format!(
            "the followed run ended with {:?}, not run_completed({ANSWER:?})",
            other.map(EventKind::name)
        )),
    }
    let expected: Vec<u64> = log.iter().map(|e| e.seq).collect();
    for (n, stream) in streams.iter().enumerate() {
        match stream {
            Err(e) => problems.push(format!("client {n}: {e}")),
            Ok(got) => {
                let seqs: Vec<u64> = got.iter().map(|r| r.seq).collect();
                if seqs != expected {
                    problems.push(format!(
                        "client {n} got seqs {seqs:?}, the log has {expected:?}"
                    ));
                }
            }
        }
    }
    let hwm_kib = serve::sample(pid).unwrap_or_default().hwm_kib;
    let exit = server.stop(Duration::from_secs(30)).await;
    let measured = Measured {
        args: &args,
        toren: &toren,
        posted: &posted,
        post_phase,
        posts_ended: ended,
        log: &log,
        streams: &streams,
        connected,
        before,
        following_all,
        peak,
        hwm_kib,
        problems,
        exit: &exit,
    };
    let (outcome, table) = figures::report(measured);
    table.print("toren-bench sse");
    let path = args.json.clone().unwrap_or_else(|| {
        toren_bin::default_output(if args.quick {
            "sse-quick.json"
        } else {
            "sse.json"
        })
    });
    crate::report::write_json(&path, &outcome)?;
    say(&format!("sse: figures written to {}", path.display()));
    for problem in outcome.problems() {
        say(&format!("sse: wrong: {problem}"));
    }
    Ok(outcome.correct())
}

/// Waits until `run` waits for its approval.
async fn wait_awaiting(api: &Api, run: &str, deadline: Instant) -> anyhow::Result<()> {
    loop {
        if api
            .listed("awaiting_approval")
            .await?
            .iter()
            .any(|r| r.id == run)
        {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!("the followed run never waited for its approval");
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
}
