//! `api-load`: a load of many runs on one `toren serve`. It creates N runs of a scripted
//! agent through `POST /runs` from C concurrent clients, timing each request; polls the
//! run list until every run has ended (or the deadline passes, when the stuck runs are
//! listed); reads every run's log and checks it ([`check`]); samples the server's memory,
//! threads and descriptors throughout (`/proc`), and its peak resident memory (VmHWM) at
//! the end; then stops the server with SIGTERM and expects exit 0.
//!
//! Neighbours: [`server`] owns the process and its home, [`client`] the HTTP calls,
//! [`figures`] turns what was measured into the table and the JSON document.

mod agent;
mod check;
mod client;
mod figures;
mod server;

use std::collections::HashSet;
use std::sync::Arc;
use std::sync::atomic::{AtomicUsize, Ordering};
use std::time::{Duration, Instant};

use jiff::Timestamp;
use tokio::sync::oneshot;
use toren_protocol::RunStatus;

use crate::cli::ApiLoad;
use crate::toren_bin;

use agent::Agent;
use client::Api;
use figures::{Measured, RunTimes};
use server::{Home, Sample, Server, TOKEN};

/// Whether everything measured went right.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(crate) enum Verdict {
    Correct,
    Wrong,
}

/// How often the server's memory, threads and descriptors are sampled.
const SAMPLE_EVERY: Duration = Duration::from_millis(100);
/// How long the server may take to exit after SIGTERM.
const STOP: Duration = Duration::from_secs(30);
/// How often progress is said while waiting.
const PROGRESS: Duration = Duration::from_secs(5);

pub(crate) async fn run(args: ApiLoad) -> anyhow::Result<Verdict> {
    let toren = toren_bin::toren(args.toren.as_deref())?;
    let agent = Agent::new(args.sandbox);
    let home = Home::new(&agent)?;
    say(&format!(
        "api-load: {} runs from {} clients on toren serve --workers {} (TOREN_SANDBOX={}, {} build {})",
        args.runs,
        args.concurrency,
        args.workers,
        args.sandbox.as_str(),
        toren_bin::profile(&toren),
        toren.display()
    ));
    let mut server = Server::start(&toren, &home, args.sandbox, args.workers).await?;
    let api = Api::new(&server.base, TOKEN)?;
    let (stop_sampling, sampler) = sample_until_stopped(server.pid());

    let wall = Timestamp::now();
    let started = Instant::now();
    let created = create_all(&api, &args).await;
    let post_phase = started.elapsed();
    let ids: Vec<String> = created
        .iter()
        .filter_map(|c| c.as_ref().ok().map(|(id, _)| id.clone()))
        .collect();
    say(&format!(
        "api-load: created {} runs in {:.2} s; waiting for them to end",
        ids.len(),
        post_phase.as_secs_f64()
    ));
    let waited = wait_all(&api, &ids, started + args.timeout, args.poll).await;
    let observed_all = started.elapsed();
    let checked = check_all(&api, &agent, &created, args.concurrency).await;

    let _ = stop_sampling.send(());
    let sampled = sampler.await.unwrap_or_default();
    let last = server.sample().unwrap_or_default();
    let startup = server.startup;
    let exit = server.stop(STOP).await;
    let warnings = server.warnings();
    let tail = server.tail();

    let measured = Measured {
        args: &args,
        toren: &toren,
        wall,
        post_phase,
        observed_all,
        created: &created,
        waited: &waited,
        checked: &checked,
        sampled,
        last,
        startup,
        warnings,
        exit: &exit,
    };
    let (outcome, table) = figures::report(&measured);
    table.print("toren-bench api-load");
    let path = args.json.clone().unwrap_or_else(|| {
        // A quick run must not overwrite the figures of a real one.
        toren_bin::default_output(if args.quick {
            "api-load-quick.json"
        } else {
            "api-load.json"
        })
    });
    crate::report::write_json(&path, &outcome)?;
    say(&format!("api-load: figures written to {}", path.display()));
    if !outcome.correctness.all_correct {
        for problem in &outcome.correctness.problems {
            say(&format!("api-load: wrong: {problem}"));
        }
        say(&format!(
            "api-load: the server's last stderr lines:\n{tail}"
        ));
    }
    if args.keep_home {
        say(&format!(
            "api-load: TOREN_HOME kept in {}",
            home.keep().display()
        ));
    }
    Ok(if outcome.correctness.all_correct {
        Verdict::Correct
    } else {
        Verdict::Wrong
    })
}

/// Run `index` of the load: its id and `POST /runs` latency, or why it was not created.
pub(crate) type Creation = Result<(String, Duration), String>;

/// Creates `args.runs` runs from `args.concurrency` clients, in index order.
async fn create_all(api: &Api, args: &ApiLoad) -> Vec<Creation> {
    in_parallel(args.runs, args.concurrency, {
        let api = api.clone();
        move |index| {
            let api = api.clone();
            async move {
                api.create(agent::NAME, &Agent::input(index))
                    .await
                    .map_err(|e| format!("run {index}: {e:#}"))
            }
        }
    })
    .await
}

/// What polling the unfinished runs found.
#[derive(Debug, Default)]
pub(crate) struct Waited {
    /// Runs that had not ended at the deadline: `id (status, last seq)`.
    pub(crate) stuck: Vec<String>,
    /// How long each `GET /runs?status=…` (all pages) took.
    pub(crate) polls: Vec<Duration>,
    pub(crate) poll_errors: Vec<String>,
}

/// Polls the runs that have not ended until none of `ids` is among them or `deadline`
/// passes. (How each ended is read from its log afterwards.)
async fn wait_all(api: &Api, ids: &[String], deadline: Instant, every: Duration) -> Waited {
    let mut waited = Waited::default();
    let mut said = Instant::now();
    loop {
        let asked = Instant::now();
        match api.unfinished().await {
            Ok(runs) => {
                waited.polls.push(asked.elapsed());
                let ours: HashSet<&str> = ids.iter().map(String::as_str).collect();
                let pending: Vec<String> = runs
                    .iter()
                    .filter(|run| ours.contains(run.id.as_str()))
                    .map(|run| format!("{} ({}, last seq {})", run.id, run.status, run.last_seq))
                    .collect();
                if pending.is_empty() {
                    return waited;
                }
                if Instant::now() >= deadline {
                    waited.stuck = pending;
                    return waited;
                }
                if said.elapsed() >= PROGRESS {
                    said = Instant::now();
                    say(&format!(
                        "api-load: {} of {} runs ended",
                        ids.len() - pending.len(),
                        ids.len()
                    ));
                }
            }
            Err(e) => {
                waited.poll_errors.push(format!("{e:#}"));
                if Instant::now() >= deadline {
                    waited.stuck = ids.to_vec();
                    return waited;
                }
            }
        }
        tokio::time::sleep(every).await;
    }
}

/// One run's log, checked: what is wrong with it and when its steps happened.
#[derive(Debug, Default)]
pub(crate) struct Checked {
    /// How the run ended, by its final event; `None` if it has not.
    pub(crate) ended: Option<RunStatus>,
    pub(crate) problems: Vec<String>,
    pub(crate) times: Option<RunTimes>,
}

/// Reads and checks the log of every created run, `concurrency` at a time.
async fn check_all(
    api: &Api,
    agent: &Agent,
    created: &[Creation],
    concurrency: usize,
) -> Vec<Checked> {
    let runs: Arc<Vec<Option<String>>> = Arc::new(
        created
            .iter()
            .map(|c| c.as_ref().ok().map(|(id, _)| id.clone()))
            .collect(),
    );
    let expected_inputs: Arc<Vec<String>> =
        Arc::new((0..created.len()).map(Agent::input).collect());
    let agent = *agent;
    in_parallel(created.len(), concurrency, {
        let api = api.clone();
        move |index| {
            let (api, runs, inputs) =
                (api.clone(), Arc::clone(&runs), Arc::clone(&expected_inputs));
            async move {
                let Some(Some(id)) = runs.get(index) else {
                    return Checked::default();
                };
                let input = inputs.get(index).map_or("", String::as_str);
                match api.events(id).await {
                    Ok(events) => Checked {
                        ended: events
                            .last()
                            .and_then(|e| e.kind.status_after())
                            .filter(|s| s.is_terminal()),
                        problems: check::problems(id, &events, &agent.expected(input))
                            .into_iter()
                            .map(|p| format!("{id} (run {index}): {p}"))
                            .collect(),
                        times: RunTimes::of(&events),
                    },
                    Err(e) => Checked {
                        ended: None,
                        problems: vec![format!("{id} (run {index}): {e:#}")],
                        times: None,
                    },
                }
            }
        }
    })
    .await
}

/// Runs `task(0..n)` on `concurrency` tasks, each taking the next index when it is free;
/// the results in index order.
async fn in_parallel<T, F, Fut>(n: usize, concurrency: usize, task: F) -> Vec<T>
where
    T: Send + 'static,
    F: Fn(usize) -> Fut + Clone + Send + 'static,
    Fut: Future<Output = T> + Send,
{
    let next = Arc::new(AtomicUsize::new(0));
    let mut workers = tokio::task::JoinSet::new();
    for _ in 0..concurrency.min(n).max(1) {
        let (next, task) = (Arc::clone(&next), task.clone());
        workers.spawn(async move {
            let mut done = Vec::new();
            loop {
                let index = next.fetch_add(1, Ordering::Relaxed);
                if index >= n {
                    return done;
                }
                done.push((index, task(index).await));
            }
        });
    }
    let mut all = Vec::with_capacity(n);
    while let Some(done) = workers.join_next().await {
        // A panicking task loses its results; the caller sees fewer than `n`.
        all.extend(done.unwrap_or_default());
    }
    all.sort_by_key(|(index, _)| *index);
    all.into_iter().map(|(_, result)| result).collect()
}

/// Samples the server every [`SAMPLE_EVERY`] until told to stop; the peak of each figure.
fn sample_until_stopped(pid: u32) -> (oneshot::Sender<()>, tokio::task::JoinHandle<Sample>) {
    let (stop, mut stopped) = oneshot::channel::<()>();
    let task = tokio::spawn(async move {
        let mut peak = Sample::default();
        loop {
            if let Some(sample) = server::sample(pid) {
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
fn say(message: &str) {
    eprintln!("{message}");
}
