//! The fleet chaos test's processes and database access: each worker "machine" (its
//! namespace, home and every process it ran), spawning a `toren worker` inside its
//! namespace and SIGKILLing it, the API-only front, and `psql` on the cluster's socket.

use std::fs::File;
use std::io::{BufRead as _, BufReader};
use std::path::PathBuf;
use std::process::{Child, Command, Stdio};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use serde_json::Value;
use toren_test_support::postgres::{SUPERUSER, bindir};

use super::super::common::{Toren, text};
use super::super::fleet_netns::Namespaces;
use super::CONCURRENCY;

/// Wall-clock microseconds since the epoch (the clock Postgres and every worker read).
pub(super) fn now_us() -> i64 {
    i64::try_from(
        SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .unwrap()
            .as_micros(),
    )
    .unwrap()
}

/// `psql` on the cluster's socket: runs `sql`, returns its unaligned output.
pub(super) fn psql(url: &str, sql: &str) -> String {
    let out = Command::new(bindir().unwrap().join("psql"))
        .args(["-XAtq", "-v", "ON_ERROR_STOP=1", url, "-c", sql])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(out.status.success(), "psql {sql}: {}", text(&out.stderr));
    text(&out.stdout).trim().to_owned()
}

/// Rows of `sql` (a query) as JSON objects.
pub(super) fn rows(url: &str, sql: &str) -> Vec<Value> {
    let json = psql(
        url,
        &format!("SELECT coalesce(json_agg(q), '[]') FROM ({sql}) q"),
    );
    serde_json::from_str::<Vec<Value>>(&json).unwrap()
}

/// One worker "machine": its namespace index, home, the process now running and every
/// process it ever ran (pid, and when it was SIGKILLed if it was).
pub(super) struct Worker {
    pub(super) k: usize,
    pub(super) home: PathBuf,
    pub(super) child: Option<Child>,
    pub(super) generations: Vec<Generation>,
}

pub(super) struct Generation {
    pub(super) pid: u32,
    pub(super) log: PathBuf,
    pub(super) killed_at_us: Option<i64>,
}

pub(super) struct Fleet {
    pub(super) toren: Toren,
    pub(super) namespaces: Namespaces,
    pub(super) port: u16,
    pub(super) workers: Vec<Worker>,
}

impl Fleet {
    pub(super) fn spawn(&mut self, k: usize) {
        let link = self.namespaces.link(k);
        let worker = &mut self.workers[k];
        let n = worker.generations.len();
        let log = worker.home.join(format!("worker-{n}.log"));
        let mut cmd = link.command(env!("CARGO_BIN_EXE_toren"));
        cmd.args([
            "worker",
            "--concurrency",
            CONCURRENCY,
            "--log-format",
            "json",
        ])
        .env_clear()
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(File::create(&log).unwrap());
        for (name, value) in self.toren.vars() {
            cmd.env(name, value);
        }
        let url = format!(
            "postgres://{SUPERUSER}@{}:{}/{}",
            link.host_addr,
            self.port,
            toren_test_support::postgres::DATABASE
        );
        cmd.env("TOREN_DATABASE_URL", url)
            .env("TOREN_HOME", worker.home.join("toren"))
            .env("TOREN_WORKER_ID", format!("fleet-w{k}"))
            .env("TOREN_LOG", "info");
        let child = cmd.spawn().unwrap();
        worker.generations.push(Generation {
            pid: child.id(),
            log,
            killed_at_us: None,
        });
        worker.child = Some(child);
    }

    pub(super) fn kill(&mut self, k: usize) {
        let worker = &mut self.workers[k];
        let mut child = worker.child.take().expect("a live worker");
        child.kill().unwrap();
        let at = now_us();
        child.wait().unwrap();
        worker
            .generations
            .last_mut()
            .expect("a spawned worker")
            .killed_at_us = Some(at);
    }

    /// Panics, with its log, when a worker exited that the test did not kill.
    pub(super) fn check_alive(&mut self) {
        for worker in &mut self.workers {
            if let Some(child) = worker.child.as_mut()
                && let Some(status) = child.try_wait().unwrap()
            {
                let log = worker.generations.last().map(|g| g.log.clone()).unwrap();
                panic!(
                    "worker {} exited by itself ({status}): {}",
                    worker.k,
                    std::fs::read_to_string(log).unwrap_or_default()
                );
            }
        }
    }

    /// The last lines of each worker's current log.
    pub(super) fn logs_tail(&self) -> String {
        self.workers
            .iter()
            .filter_map(|w| w.generations.last())
            .map(|g| {
                let log = std::fs::read_to_string(&g.log).unwrap_or_default();
                let lines: Vec<&str> = log.lines().collect();
                format!(
                    "{}:\n{}\n",
                    g.log.display(),
                    lines[lines.len().saturating_sub(15)..].join("\n")
                )
            })
            .collect()
    }

    /// Which worker (namespace index) a client address belongs to.
    pub(super) fn worker_at(&self, client: &str) -> Option<usize> {
        self.namespaces
            .links()
            .iter()
            .position(|l| l.ns_addr.to_string() == client)
    }

    /// Which worker ran the process named in a lease holder (`host/pid/…`), and when that
    /// process was SIGKILLed, if it was.
    pub(super) fn holder(&self, holder: &str) -> Option<(usize, Option<i64>)> {
        let pid: u32 = holder.split('/').nth(1)?.parse().ok()?;
        self.workers.iter().find_map(|w| {
            w.generations
                .iter()
                .find(|g| g.pid == pid)
                .map(|g| (w.k, g.killed_at_us))
        })
    }
}

impl Drop for Fleet {
    fn drop(&mut self) {
        for worker in &mut self.workers {
            if let Some(mut child) = worker.child.take() {
                let _ = child.kill();
                let _ = child.wait();
            }
        }
    }
}

/// `toren serve --workers 0`: the API-only front on loopback; the address it listens on.
pub(super) fn front(toren: &Toren) -> (Child, String) {
    let mut child = toren.spawn(&["serve", "--workers", "0"]);
    let stderr = child.stderr.take().unwrap();
    let (tx, rx) = std::sync::mpsc::channel();
    std::thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            if let Some(rest) = line.split("listening on ").nth(1) {
                let _ = tx.send(
                    rest.split_whitespace()
                        .next()
                        .unwrap_or_default()
                        .to_owned(),
                );
            }
        }
    });
    let base = rx
        .recv_timeout(Duration::from_secs(30))
        .expect("toren serve --workers 0 says its address");
    (child, base)
}

pub(super) fn free_port() -> u16 {
    std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port()
}
