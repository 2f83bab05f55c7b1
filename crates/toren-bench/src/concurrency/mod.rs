//! `concurrency`: many runs live at once in one `toren serve` on the
//! local backend. After a warm-up it creates W runs of an agent that asks for approval and
//! waits until all of them wait (memory per waiting run: RSS then minus RSS before, over
//! W); then T runs that make a tool call at once, timed until all have ended while the W
//! still wait (the server sampled for its peak); then, with only waiting runs left, it
//! checks that they hold no sandbox process (descendants of the server in `/proc`), no
//! thread and no open file (threads and descriptors against the baseline, and no
//! descriptor into the runs' directories). Finally it approves every waiting run over the
//! API and checks every log. Exit 1 when a run did not complete correctly.
//!
//! Neighbours: [`serve`] the server process and `/proc`, [`api`] the HTTP calls,
//! [`check`] the agents and their logs, [`figures`] the report. `sse` reuses the first two.

pub(crate) mod api;
mod args;
mod check;
mod figures;
pub(crate) mod serve;

use std::collections::HashSet;
use std::sync::Arc;
use std::time::{Duration, Instant};

use anyhow::bail;
use futures::StreamExt as _;
use jiff::Timestamp;
use tokio::sync::oneshot;
use toren_protocol::Event;

use crate::toren_bin;
use api::Api;
pub(crate) use args::{Concurrency, ConcurrencyArgs};
use figures::{Measured, Phase};
use serve::{Home, Proc, Server};

/// How often the server is sampled for its peak.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// How often the run list is polled.
const POLL: Duration = Duration::from_millis(250);
/// How many runs of each agent the warm-up makes.
const WARM_UP: usize = 4;

pub(crate) async fn run(args: Concurrency) -> anyhow::Result<bool> {
    let toren = toren_bin::toren(args.toren.as_deref())?;
    let home = Home::new(&check::files())?;
    say(&format!(
        "concurrency: {} waiting + {} tool-call runs on toren serve --workers {} (local, {} build)",
        args.waiting,
        args.tools,
        args.workers,
        toren_bin::profile(&toren)
    ));
    let server = Server::start(&toren, &home, "local", args.workers).await?;
    let api = Api::new(&server.base)?;
    let pid = server.pid();
    let deadline = Instant::now() + args.timeout;
    let mut problems = Vec::new();

    // Warm-up: pools, SQLite's cache and the allocator see the same work first.
    let warm_tools = create(&api, check::TOOL, 1_000_000, WARM_UP, args.clients).await;
    let warm_asks = create(&api, check::ASK, 1_000_000, WARM_UP, args.clients).await;
    wait_for(&api, &ids(&warm_asks), "awaiting_approval", deadline).await?;
    approve_all(&api, &ids(&warm_asks), args.clients).await;
    let warm: Vec<String> = ids(&warm_tools)
        .into_iter()
        .chain(ids(&warm_asks))
        .collect();
    wait_ended(&api, &warm, deadline).await?;
    let baseline = settled(pid).await;

    // W runs that wait for a person.
    let asks = create(&api, check::ASK, 0, args.waiting, args.clients).await;
    let ask_ids = ids(&asks);
    wait_for(&api, &ask_ids, "awaiting_approval", deadline).await?;
    let waiting_only = settled(pid).await;

    // T runs that make their call at once, beside the W waiting ones.
    let (stop, sampler) = sample_until_stopped(pid);
    let tools_wall = Timestamp::now();
    let tools_started = Instant::now();
    let tools = create(&api, check::TOOL, 0, args.tools, args.clients).await;
    let tool_ids = ids(&tools);
    wait_ended(&api, &tool_ids, deadline).await?;
    let tools_observed = tools_started.elapsed();
    let _ = stop.send(());
    let peak = sampler.await.unwrap_or_default();
    // Only the waiting runs are left: what do they hold?
    let after_tools = serve::sample(pid).unwrap_or_default();
    let open_in_runs = open_in_runs(pid, &home);
    let still_waiting = api.listed("awaiting_approval").await?.len();

    let approving_wall = Timestamp::now();
    let approving = Instant::now();
    let failed_approvals = approve_all(&api, &ask_ids, args.clients).await;
    problems.extend(failed_approvals);
    wait_ended(&api, &ask_ids, deadline).await?;
    let approved_all = approving.elapsed();

    let tool_logs = logs(&api, &tools, args.clients).await;
    let ask_logs = logs(&api, &asks, args.clients).await;
    for (agent, created, logs) in [
        (check::TOOL, &tools, &tool_logs),
        (check::ASK, &asks, &ask_logs),
    ] {
        for (index, (made, log)) in created.iter().zip(logs).enumerate() {
            match (made, log) {
                (Err(e), _) => problems.push(format!("{agent} run {index}: {e}")),
                (Ok((id, _)), Err(e)) => problems.push(format!("{id}: {e}")),
                (Ok((id, _)), Ok(events)) => problems.extend(
                    check::problems(id, agent, &check::input(agent, index), events)
                        .into_iter()
                        .map(|p| format!("{id} ({agent} run {index}): {p}")),
                ),
            }
        }
    }
    let hwm = serve::sample(pid).unwrap_or_default().hwm_kib;
    let exit = server.stop(Duration::from_secs(30)).await;
    let measured = Measured {
        args: &args,
        toren: &toren,
        baseline,
        waiting_only,
        after_tools,
        peak,
        hwm_kib: hwm,
        open_in_runs,
        still_waiting,
        tools: Phase::of(
            tools_wall,
            tools_observed,
            &tool_logs,
            figures::Since::Created,
        ),
        approved_all,
        asks: Phase::of(
            approving_wall,
            approved_all,
            &ask_logs,
            figures::Since::Approved,
        ),
        problems: &problems,
        exit: &exit,
    };
    let (outcome, table) = figures::report(&measured);
    table.print("toren-bench concurrency");
    let path = args.json.clone().unwrap_or_else(|| {
        toren_bin::default_output(if args.quick {
            "concurrency-quick.json"
        } else {
            "concurrency.json"
        })
    });
    crate::report::write_json(&path, &outcome)?;
    say(&format!(
        "concurrency: figures written to {}",
        path.display()
    ));
    for problem in outcome.problems() {
        say(&format!("concurrency: wrong: {problem}"));
    }
    Ok(outcome.correct())
}

/// Run `index` (from `first`) of an agent: its id and `POST /runs` latency, or the error.
pub(crate) type Creation = Result<(String, Duration), String>;

fn ids(created: &[Creation]) -> Vec<String> {
    created
        .iter()
        .filter_map(|c| c.as_ref().ok().map(|(id, _)| id.clone()))
        .collect()
}

/// Creates `n` runs of `agent` (inputs numbered from `first`) from `clients` clients, in
/// index order.
async fn create(api: &Api, agent: &str, first: usize, n: usize, clients: usize) -> Vec<Creation> {
    futures::stream::iter(0..n)
        .map(|index| {
            let api = api.clone();
            async move {
                api.create(agent, &check::input(agent, first + index))
                    .await
                    .map_err(|e| format!("{e:#}"))
            }
        })
        .buffered(clients.max(1))
        .collect()
        .await
}

/// Approves every pending approval of `runs`; what went wrong.
async fn approve_all(api: &Api, runs: &[String], clients: usize) -> Vec<String> {
    let failed: Vec<Option<String>> = futures::stream::iter(runs.iter().cloned())
        .map(|run| {
            let api = api.clone();
            async move {
                let calls = match api.pending(&run).await {
                    Ok(calls) if !calls.is_empty() => calls,
                    Ok(_) => return Some(format!("{run}: no approval pending")),
                    Err(e) => return Some(format!("{run}: {e:#}")),
                };
                for call in calls {
                    if let Err(e) = api.approve(&run, &call).await {
                        return Some(format!("{run}: {e:#}"));
                    }
                }
                None
            }
        })
        .buffer_unordered(clients.max(1))
        .collect()
        .await;
    failed.into_iter().flatten().collect()
}

/// Waits until every one of `runs` is listed with `status`.
async fn wait_for(
    api: &Api,
    runs: &[String],
    status: &str,
    deadline: Instant,
) -> anyhow::Result<()> {
    let ours: HashSet<&str> = runs.iter().map(String::as_str).collect();
    loop {
        let listed = api.listed(status).await?;
        let there = listed
            .iter()
            .filter(|r| ours.contains(r.id.as_str()))
            .count();
        if there == ours.len() {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "only {there} of {} runs became {status} before the deadline",
                ours.len()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// Waits until none of `runs` is queued or running (an ended run is read from its log).
pub(crate) async fn wait_ended(
    api: &Api,
    runs: &[String],
    deadline: Instant,
) -> anyhow::Result<()> {
    let ours: HashSet<&str> = runs.iter().map(String::as_str).collect();
    loop {
        let listed = api.listed("queued,running,awaiting_approval").await?;
        let left = listed
            .iter()
            .filter(|r| ours.contains(r.id.as_str()))
            .count();
        if left == 0 {
            return Ok(());
        }
        if Instant::now() >= deadline {
            bail!(
                "{left} of {} runs had not ended at the deadline",
                ours.len()
            );
        }
        tokio::time::sleep(POLL).await;
    }
}

/// The server's figures once its last sandbox processes have gone (a run's end may race
/// bubblewrap's exit by a moment), at most a few seconds later.
async fn settled(pid: u32) -> Proc {
    let until = Instant::now() + Duration::from_secs(5);
    loop {
        let sample = serve::sample(pid).unwrap_or_default();
        if sample.descendants == 0 || Instant::now() >= until {
            return sample;
        }
        tokio::time::sleep(Duration::from_millis(20)).await;
    }
}

/// The server's descriptors that point into the runs' directories (anything under
/// TOREN_HOME but the database and its journal files).
fn open_in_runs(pid: u32, home: &Home) -> Vec<String> {
    let toren_home = home.toren_home().display().to_string();
    serve::fd_targets(pid)
        .into_iter()
        .filter(|t| t.starts_with(&toren_home) && !t.contains("toren.db"))
        .collect()
}

/// Every created run's journaled events, in index order.
async fn logs(api: &Api, created: &[Creation], clients: usize) -> Vec<Result<Vec<Event>, String>> {
    let created = Arc::new(created.to_vec());
    futures::stream::iter(0..created.len())
        .map(|index| {
            let (api, created) = (api.clone(), Arc::clone(&created));
            async move {
                match created.get(index) {
                    Some(Ok((id, _))) => api.events(id).await.map_err(|e| format!("{e:#}")),
                    _ => Err("not created".to_owned()),
                }
            }
        })
        .buffered(clients.max(1))
        .collect()
        .await
}

/// Samples the server until told to stop; the peak of each figure.
pub(crate) fn sample_until_stopped(
    pid: u32,
) -> (oneshot::Sender<()>, tokio::task::JoinHandle<Proc>) {
    let (stop, mut stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut peak = Proc::default();
        loop {
            if let Some(sample) = serve::sample(pid) {
                peak = peak.max(sample);
            }
            tokio::select! {
                _ = &mut stopped => return peak,
                () = tokio::time::sleep(SAMPLE_EVERY) => {}
            }
        }
    });
    (stop, task)
}

#[expect(clippy::print_stderr, reason = "progress is for the person watching")]
pub(crate) fn say(message: &str) {
    eprintln!("{message}");
}

/// A benchmark's "everything measured went right" as `main`'s verdict.
pub(crate) fn verdict(correct: bool) -> crate::api_load::Verdict {
    if correct {
        crate::api_load::Verdict::Correct
    } else {
        crate::api_load::Verdict::Wrong
    }
}
