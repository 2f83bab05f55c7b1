//! The fleet under chaos: three `toren worker` processes, each in its own
//! network namespace ("machine", `fleet_netns.rs`) reaching one throwaway Postgres over its
//! veth pair, with distinct `TOREN_WORKER_ID`s and one shared `TOREN_SANDBOX_ROOT` declared
//! as one workspace volume, drive 60 runs of scripted agents created through
//! `toren serve --workers 0`'s API. Meanwhile the test SIGKILLs random workers at random
//! moments and restarts them, and cuts one worker's link to the database for longer than
//! the lease TTL while it runs a slow command. Then, from what Postgres recorded and from
//! the marker files the commands wrote in the workspaces, it checks:
//!
//! - every run completed;
//! - every tool call ran as often as its `tool_started` events allow: once when it was
//!   started once, at most once more per interrupted attempt;
//! - no event was appended by a worker that did not hold the run's lease at that moment
//!   (a trigger the test installs records, for every inserted event, the inserting
//!   connection's client address — which namespace, so which worker — and the run's lease
//!   holder as the append transaction saw it);
//! - no run was driven by two workers at once: every lease was granted only once the
//!   previous one had been released, had expired, or its holder had been SIGKILLed (a
//!   second trigger records every change of a run's lease), and the partitioned worker's
//!   command was killed (its end marker never written) and it said it lost the lease.
//!
//! `TOREN_FLEET_SEED` replays a sequence of kills (the seed is printed); `TOREN_FLEET_KILLS`
//! sets how many (default 12). Needs root (namespaces), `ip`, `nft` and Postgres:
//! `scripts/setup` and `scripts/install-postgres` install them.

use std::collections::BTreeSet;
use std::process::Command;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use serde_json::{Value, json};
use toren_protocol::{Event, EventKind};
use toren_test_support::postgres::Cluster;

use super::common::Toren;
use super::fleet_netns::Namespaces;

mod checks;
mod fleet;
use checks::{check_appends, check_leases, check_partition, check_run, check_worker_logs};
use fleet::{Fleet, Worker, free_port, front, now_us, psql, rows};

const WORKERS: usize = 3;
const RUNS: usize = 60;
/// Runs whose first call sleeps long enough to be caught by the partition.
const SLOW_RUNS: usize = 4;
const CONCURRENCY: &str = "4";
const LEASE_TTL: Duration = Duration::from_secs(3);
/// How long the partitioned worker is cut off: well over the lease TTL.
const CUT_FOR: Duration = Duration::from_secs(8);
/// The slow call's sleep, in seconds: it would finish inside the cut if nobody killed it.
const SLOW_SLEEP: u32 = 6;
const TOKEN: &str = "fleet-chaos-token";
const VOLUME: &str = "fleet";
const DEADLINE: Duration = Duration::from_secs(170);

/// A small deterministic generator (xorshift64*), seeded and printed for replay.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_F491_4F6C_DD1D)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn millis(&mut self, from: u64, to: u64) -> Duration {
        Duration::from_millis(from + self.below(to - from))
    }
}

/// A bash call that marks its start and end in `calls.log` of the workspace, by `label`.
fn marked(label: &str, sleep: &str) -> String {
    format!(
        "bash: {{command: \"echo start-{label} >> calls.log; sleep {sleep}; echo end-{label} >> calls.log\"}}"
    )
}

fn fast_script() -> String {
    format!(
        "turns:\n  - tool_calls:\n      - {}\n  - tool_calls:\n      - {}\n  - tool_calls:\n      - {}\n  - text: fast done\n",
        marked("a", "0.3"),
        marked("b", "0.6"),
        marked("c", "0.2"),
    )
}

fn slow_script() -> String {
    format!(
        "turns:\n  - tool_calls:\n      - {}\n  - tool_calls:\n      - {}\n  - text: slow done\n",
        marked("slow", &SLOW_SLEEP.to_string()),
        marked("after", "0.2"),
    )
}

/// The audit the test installs in the database once the schema exists: one row per
/// inserted event (who inserted it, and the lease the run had in that transaction), one per
/// change of a run's lease.
const AUDIT: &str = r"
CREATE TABLE fleet_audit_events (
    id BIGSERIAL PRIMARY KEY, run_id TEXT, seq BIGINT, kind TEXT, client TEXT,
    lease_token BIGINT, lease_holder TEXT, at_us BIGINT);
CREATE FUNCTION fleet_audit_event() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  INSERT INTO fleet_audit_events (run_id, seq, kind, client, lease_token, lease_holder, at_us)
  SELECT NEW.run_id, NEW.seq, NEW.kind, host(inet_client_addr()), r.lease_token,
         r.lease_holder, (extract(epoch FROM clock_timestamp()) * 1000000)::bigint
  FROM runs r WHERE r.id = NEW.run_id;
  RETURN NEW;
END $$;
CREATE TRIGGER fleet_audit_event AFTER INSERT ON events
  FOR EACH ROW EXECUTE FUNCTION fleet_audit_event();
CREATE TABLE fleet_audit_leases (
    id BIGSERIAL PRIMARY KEY, run_id TEXT, lease_token BIGINT, lease_holder TEXT,
    lease_expires_at BIGINT, client TEXT, at_us BIGINT);
CREATE FUNCTION fleet_audit_lease() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
  IF TG_OP = 'INSERT' OR OLD.lease_token IS DISTINCT FROM NEW.lease_token
     OR OLD.lease_holder IS DISTINCT FROM NEW.lease_holder
     OR OLD.lease_expires_at IS DISTINCT FROM NEW.lease_expires_at THEN
    INSERT INTO fleet_audit_leases (run_id, lease_token, lease_holder, lease_expires_at, client, at_us)
    VALUES (NEW.id, NEW.lease_token, NEW.lease_holder, NEW.lease_expires_at,
            host(inet_client_addr()), (extract(epoch FROM clock_timestamp()) * 1000000)::bigint);
  END IF;
  RETURN NEW;
END $$;
CREATE TRIGGER fleet_audit_lease AFTER INSERT OR UPDATE ON runs
  FOR EACH ROW EXECUTE FUNCTION fleet_audit_lease();
";

#[test]
fn a_fleet_of_workers_killed_and_partitioned_completes_every_run_exactly_once() {
    let kills_wanted: u32 = std::env::var("TOREN_FLEET_KILLS")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(12);
    let seed: u64 = std::env::var("TOREN_FLEET_SEED")
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or_else(|| {
            SystemTime::now()
                .duration_since(UNIX_EPOCH)
                .unwrap()
                .as_nanos() as u64
                | 1
        });
    println!("fleet chaos: seed {seed} (TOREN_FLEET_SEED={seed} replays it), {kills_wanted} kills");
    let mut rng = Rng(seed);
    let started = Instant::now();

    let namespaces = Namespaces::create(WORKERS);
    let port = free_port();
    let addrs: Vec<String> = namespaces
        .links()
        .iter()
        .map(|l| l.host_addr.to_string())
        .collect();
    // The server drops a dead peer's connection within seconds (keepalives), so a
    // partitioned worker's session cannot hold locks for long.
    let cluster = Cluster::builder()
        .listen(addrs.join(","), port)
        .setting("tcp_keepalives_idle", "1")
        .setting("tcp_keepalives_interval", "1")
        .setting("tcp_keepalives_count", "3")
        .start()
        .unwrap();
    let db = cluster.url();

    let toren = Toren::new()
        .env("TOREN_DATABASE_URL", &db)
        .env("TOREN_QUEUE", "postgres")
        .env("TOREN_WORKSPACE_VOLUME", VOLUME)
        .env("TOREN_LEASE_TTL", &format!("{}s", LEASE_TTL.as_secs()))
        .env("TOREN_API_ADDR", "127.0.0.1:0")
        .env("TOREN_API_TOKEN", TOKEN);
    let sandbox_root = toren.sandbox_root();
    let toren = toren.env("TOREN_SANDBOX_ROOT", &sandbox_root.display().to_string());
    toren.file("fast.script.yaml", &fast_script());
    toren.file("slow.script.yaml", &slow_script());
    let agent = |name: &str| {
        format!(
            "name: {name}\nmodel: scripted/{name}.script.yaml\nsandbox:\n  approval: never\nmax_turns: 10\n"
        )
    };
    toren.agent("fast", &agent("fast"));
    toren.agent("slow", &agent("slow"));

    // The front migrates the schema; then the audit goes in, before any run exists.
    let (mut front_child, base) = front(&toren);
    psql(&db, AUDIT);

    let workers = (0..WORKERS)
        .map(|k| {
            let home = toren.dir.path().join(format!("worker-{k}"));
            std::fs::create_dir_all(&home).unwrap();
            Worker {
                k,
                home,
                child: None,
                generations: Vec::new(),
            }
        })
        .collect();
    let mut fleet = Fleet {
        toren,
        namespaces,
        port,
        workers,
    };
    for k in 0..WORKERS {
        fleet.spawn(k);
    }

    // The runs, slow ones first so the partition finds one in its slow call early.
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .unwrap();
    let _ = rustls::crypto::ring::default_provider().install_default();
    let client = reqwest::Client::new();
    let mut runs: Vec<(String, &str)> = Vec::new();
    for i in 0..RUNS {
        let agent = if i < SLOW_RUNS { "slow" } else { "fast" };
        let (status, body) = runtime.block_on(async {
            let r = client
                .post(format!("{base}/runs"))
                .bearer_auth(TOKEN)
                .json(&json!({"agent": agent, "input": format!("run {i}")}))
                .send()
                .await
                .unwrap();
            (r.status().as_u16(), r.json::<Value>().await.unwrap())
        });
        assert_eq!(status, 202, "{body}");
        runs.push((body["id"].as_str().unwrap().to_owned(), agent));
    }
    let slow_runs: BTreeSet<&str> = runs
        .iter()
        .filter(|(_, a)| *a == "slow")
        .map(|(id, _)| id.as_str())
        .collect();

    // Chaos until every run completed.
    let mut kills = 0;
    let mut next_kill = Instant::now() + rng.millis(500, 2_000);
    let mut restarts: Vec<(usize, Instant)> = Vec::new();
    let mut partition: Option<Partition> = None;
    let deadline = Instant::now() + DEADLINE;
    loop {
        let completed: usize = psql(&db, "SELECT count(*) FROM runs WHERE status = 'completed'")
            .parse()
            .unwrap();
        if completed == RUNS && partition.as_ref().is_some_and(|p| p.restored_at.is_some()) {
            break;
        }
        let stuck = Instant::now() >= deadline
            || (completed == 0 && started.elapsed() > Duration::from_secs(40));
        assert!(
            !stuck,
            "only {completed} of {RUNS} runs completed after {:?}; statuses: {}; the workers' logs:\n{}",
            started.elapsed(),
            psql(
                &db,
                "SELECT string_agg(status || ':' || n, ' ') FROM (SELECT status, count(*) n FROM runs GROUP BY status) s"
            ),
            fleet.logs_tail()
        );
        fleet.check_alive();
        for (k, at) in std::mem::take(&mut restarts) {
            if Instant::now() >= at {
                fleet.spawn(k);
            } else {
                restarts.push((k, at));
            }
        }
        match &mut partition {
            None => {
                assert!(
                    started.elapsed() < Duration::from_secs(40),
                    "no slow run was seen in its slow call to cut its worker off; the workers' logs:\n{}",
                    fleet.logs_tail()
                );
                partition = find_victim(&fleet, &db, &slow_runs).map(|(k, run, call)| {
                    fleet.namespaces.link(k).cut();
                    println!("fleet chaos: cut worker {k} off while it runs {run}'s {call}");
                    Partition {
                        k,
                        run,
                        call,
                        cut_at: Instant::now(),
                        cut_at_us: now_us(),
                        restored_at: None,
                    }
                });
            }
            Some(p) if p.restored_at.is_none() && p.cut_at.elapsed() >= CUT_FOR => {
                fleet.namespaces.link(p.k).restore();
                p.restored_at = Some(Instant::now());
                println!("fleet chaos: restored worker {}'s link", p.k);
            }
            Some(_) => {}
        }
        if kills < kills_wanted && Instant::now() >= next_kill {
            let cut = partition
                .as_ref()
                .filter(|p| p.restored_at.is_none())
                .map(|p| p.k);
            // Nor the worker that took the partitioned run over, until that run ends: its
            // slow call then ends exactly once, unless the cut-off attempt was not stopped.
            let successor = partition
                .as_ref()
                .and_then(|p| driver_of(&fleet, &db, &p.run));
            let live: Vec<usize> = (0..WORKERS)
                .filter(|k| {
                    fleet.workers[*k].child.is_some() && Some(*k) != cut && Some(*k) != successor
                })
                .collect();
            if !live.is_empty() {
                let k = live[rng.below(live.len() as u64) as usize];
                fleet.kill(k);
                kills += 1;
                restarts.push((k, Instant::now() + rng.millis(200, 1_500)));
            }
            next_kill = Instant::now() + rng.millis(500, 2_000);
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    let partition = partition.expect("the partition happened");
    println!(
        "fleet chaos: {RUNS} runs completed after {:?}, {kills} workers killed and restarted",
        started.elapsed()
    );

    // Let the workers go before reading everything back, so nothing moves any more.
    for worker in &mut fleet.workers {
        if let Some(mut child) = worker.child.take() {
            let _ = Command::new("kill")
                .args(["-TERM", &child.id().to_string()])
                .status();
            let _ = child.wait();
        }
    }
    let _ = front_child.kill();
    let _ = front_child.wait();

    let mut retried = 0;
    for (run, agent) in &runs {
        retried += check_run(&fleet, run, agent);
    }
    let appended = check_appends(&fleet, &db);
    let handovers = check_leases(&fleet, &db);
    check_partition(&fleet, &partition);
    check_worker_logs(&fleet, &db);
    println!(
        "fleet chaos: every run checked ({retried} calls re-run after an interruption, \
         {appended} events appended by workers each under its own lease, {handovers} leases \
         taken over before release); took {:?}",
        started.elapsed()
    );
    drop(cluster);
}

struct Partition {
    k: usize,
    run: String,
    /// The slow call that was running when the link was cut.
    call: String,
    cut_at: Instant,
    cut_at_us: i64,
    restored_at: Option<Instant>,
}

/// The worker holding `run`'s lease now, if the run has not ended.
fn driver_of(fleet: &Fleet, db: &str, run: &str) -> Option<usize> {
    let holder = psql(
        db,
        &format!("SELECT lease_holder FROM runs WHERE id = '{run}' AND status <> 'completed'"),
    );
    fleet.holder(&holder).map(|(k, _)| k)
}

/// A live worker that is running a slow run's slow call now: (worker, run, call id).
fn find_victim(fleet: &Fleet, db: &str, slow: &BTreeSet<&str>) -> Option<(usize, String, String)> {
    // The newest event of each slow run, with who wrote it.
    let newest = rows(
        db,
        "SELECT DISTINCT ON (a.run_id) a.run_id, a.kind, a.client, e.payload \
         FROM fleet_audit_events a JOIN events e ON e.run_id = a.run_id AND e.seq = a.seq \
         ORDER BY a.run_id, a.seq DESC",
    );
    newest.iter().find_map(|row| {
        let run = row["run_id"].as_str()?;
        if !slow.contains(run) || row["kind"] != "tool_started" {
            return None;
        }
        let k = fleet.worker_at(row["client"].as_str()?)?;
        fleet.workers[k].child.as_ref()?;
        let event: Event = serde_json::from_str(row["payload"].as_str()?).ok()?;
        match event.kind {
            EventKind::ToolStarted(t) if t.attempt == 1 => Some((k, run.to_owned(), t.call_id)),
            _ => None,
        }
    })
}
