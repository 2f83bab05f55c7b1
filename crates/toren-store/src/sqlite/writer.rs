//! The store's one writer: a thread that owns the only write connection and commits the
//! writes waiting for it together (group commit).
//!
//! Why: with writes spread over a pool, a connection that finds SQLite's write lock taken
//! sleeps in the busy handler (1, 2, 5, 10 … 100 ms) instead of being woken when the lock
//! frees, and every write pays its own fsync. Here a write is a job sent to one queue
//! (FIFO); the writer takes every job waiting, opens one `BEGIN IMMEDIATE` transaction,
//! runs each job inside its own `SAVEPOINT` (a job that fails is rolled back to it, alone,
//! so each stays all-or-nothing with its own checks and its own result), commits once,
//! and only then answers each caller. With `synchronous = FULL` the commit is durable
//! before any caller hears of it, and N concurrent writes cost one fsync instead of N.
//! Jobs waiting while a commit is under way form the next batch: nothing is delayed on
//! purpose. If the transaction cannot begin or commit, every job of the batch fails with
//! that error ([`Error::Batch`]) and nothing of it was written.
//!
//! The writer runs on its own thread with a current-thread Tokio runtime, so the store
//! works from any runtime (or several). It stops when the last handle is dropped or the
//! store is closed; jobs sent after that fail as a closed pool does. Readers use the
//! store's pool (WAL: they never wait for the writer). Other processes writing the same
//! file still meet this one at SQLite's lock, where `busy_timeout` applies.

use std::future::Future;
use std::pin::Pin;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};

use sqlx::{Connection, SqliteConnection};
use tokio::sync::{mpsc, oneshot};

use crate::{Error, Result};

/// What a write job returns: a future borrowing the writer's connection, already inside
/// the batch's transaction and the job's savepoint.
pub(super) type WriteFuture<'c, T> = Pin<Box<dyn Future<Output = Result<T>> + Send + 'c>>;

/// At most this many jobs share a transaction (a bound on how long one commit holds the
/// lock, and on how much a failed begin or commit takes down with it).
const MAX_BATCH: usize = 512;

/// How many commits and writes the writer has made since the store was opened: the
/// journal benchmark's measure of group commit (writes per commit).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct WriteStats {
    /// Transactions committed (each one fsync of the WAL under `synchronous = FULL`).
    pub commits: u64,
    /// Write calls carried out in them (succeeded or refused by their own checks).
    pub writes: u64,
}

/// A cheap handle on the writer thread.
#[derive(Clone, Debug)]
pub(super) struct Writer {
    queue: mpsc::UnboundedSender<Message>,
    counters: Arc<Counters>,
}

#[derive(Debug, Default)]
struct Counters {
    commits: AtomicU64,
    writes: AtomicU64,
}

enum Message {
    Job(Box<dyn Job>),
    /// Finish the jobs sent before, close the connection, then answer.
    Close(oneshot::Sender<()>),
}

impl Writer {
    /// Starts the writer thread, which owns `conn` from now on.
    pub(super) fn start(conn: SqliteConnection) -> std::io::Result<Self> {
        let (queue, jobs) = mpsc::unbounded_channel();
        let counters = Arc::new(Counters::default());
        let runtime = tokio::runtime::Builder::new_current_thread()
            .enable_all()
            .build()?;
        let theirs = Arc::clone(&counters);
        std::thread::Builder::new()
            .name("toren-store-writer".into())
            .spawn(move || runtime.block_on(serve(conn, jobs, &theirs)))?;
        Ok(Self { queue, counters })
    }

    /// Runs `work` inside a write transaction and returns its result once that
    /// transaction has committed. An error from `work` rolls back what it wrote, and only
    /// that.
    pub(super) async fn write<T, F>(&self, work: F) -> Result<T>
    where
        T: Send + 'static,
        F: for<'c> FnOnce(&'c mut SqliteConnection) -> WriteFuture<'c, T> + Send + 'static,
    {
        let (reply, answer) = oneshot::channel();
        self.queue
            .send(Message::Job(Box::new(Request { work, reply })))
            .map_err(|_| closed())?;
        answer.await.unwrap_or_else(|_| Err(closed()))
    }

    /// Waits for the jobs sent so far, then closes the write connection.
    pub(super) async fn close(&self) {
        let (ack, done) = oneshot::channel();
        if self.queue.send(Message::Close(ack)).is_ok() {
            let _ = done.await;
        }
    }

    pub(super) fn stats(&self) -> WriteStats {
        WriteStats {
            commits: self.counters.commits.load(Ordering::Relaxed),
            writes: self.counters.writes.load(Ordering::Relaxed),
        }
    }
}

/// The error of a call made after the store was closed.
fn closed() -> Error {
    Error::Database(sqlx::Error::PoolClosed)
}

/// The writer's loop: a batch of every job waiting, committed together, until closed.
async fn serve(
    mut conn: SqliteConnection,
    mut queue: mpsc::UnboundedReceiver<Message>,
    counters: &Counters,
) {
    let mut batch = Vec::new();
    while let Some(first) = queue.recv().await {
        let mut close = None;
        match first {
            Message::Job(job) => batch.push(job),
            Message::Close(ack) => close = Some(ack),
        }
        while close.is_none() && batch.len() < MAX_BATCH {
            match queue.try_recv() {
                Ok(Message::Job(job)) => batch.push(job),
                Ok(Message::Close(ack)) => close = Some(ack),
                Err(_) => break,
            }
        }
        // A caller that stopped waiting (its future was dropped) wants nothing written.
        batch.retain(|job| !job.abandoned());
        if !batch.is_empty() {
            commit(&mut conn, std::mem::take(&mut batch), counters).await;
        }
        if let Some(ack) = close {
            // Jobs still queued are dropped with the receiver: their callers get `closed`.
            queue.close();
            let _ = conn.close().await;
            let _ = ack.send(());
            return;
        }
    }
    let _ = conn.close().await;
}

/// Runs `jobs` in one transaction, each in its own savepoint, and answers each after the
/// commit.
async fn commit(conn: &mut SqliteConnection, jobs: Vec<Box<dyn Job>>, counters: &Counters) {
    if let Err(e) = execute(conn, "BEGIN IMMEDIATE").await {
        let shared = Arc::new(e);
        for job in jobs {
            job.fail(Error::Batch(Arc::clone(&shared)));
        }
        return;
    }
    let mut done: Vec<Box<dyn Done>> = Vec::with_capacity(jobs.len());
    let mut jobs = jobs.into_iter();
    let mut broken: Option<Arc<sqlx::Error>> = None;
    for job in jobs.by_ref() {
        if let Err(e) = execute(conn, "SAVEPOINT job").await {
            let shared = Arc::new(e);
            job.fail(Error::Batch(Arc::clone(&shared)));
            broken = Some(shared);
            break;
        }
        let outcome = job.run(conn).await;
        let end = if outcome.succeeded() {
            "RELEASE job"
        } else {
            "ROLLBACK TO job; RELEASE job"
        };
        done.push(outcome);
        if let Err(e) = execute(conn, end).await {
            // SQLite may have rolled the whole transaction back (e.g. a full disk):
            // nothing of the batch can be trusted to commit.
            broken = Some(Arc::new(e));
            break;
        }
    }
    let committed = match broken {
        Some(shared) => Err(shared),
        None => execute(conn, "COMMIT").await.map_err(Arc::new),
    };
    match committed {
        Ok(()) => {
            counters.commits.fetch_add(1, Ordering::Relaxed);
            counters
                .writes
                .fetch_add(u64::try_from(done.len()).unwrap_or(0), Ordering::Relaxed);
            for outcome in done {
                outcome.finish(None);
            }
        }
        Err(shared) => {
            let _ = execute(conn, "ROLLBACK").await;
            for outcome in done {
                outcome.finish(Some(Arc::clone(&shared)));
            }
            for job in jobs {
                job.fail(Error::Batch(Arc::clone(&shared)));
            }
        }
    }
}

async fn execute(conn: &mut SqliteConnection, sql: &'static str) -> sqlx::Result<()> {
    sqlx::raw_sql(sql).execute(&mut *conn).await.map(|_| ())
}

/// A write waiting in the queue, its result type erased.
trait Job: Send {
    /// Whether its caller stopped waiting.
    fn abandoned(&self) -> bool;
    /// Runs it inside the open transaction and savepoint.
    fn run<'c>(
        self: Box<Self>,
        conn: &'c mut SqliteConnection,
    ) -> Pin<Box<dyn Future<Output = Box<dyn Done>> + Send + 'c>>;
    /// Answers it with `error` without running it.
    fn fail(self: Box<Self>, error: Error);
}

/// A job that ran, its answer held until the commit.
trait Done: Send {
    fn succeeded(&self) -> bool;
    /// Answers the caller: its own result if the batch committed (`None`) or if it failed
    /// by itself, else the batch's error.
    fn finish(self: Box<Self>, batch_failed: Option<Arc<sqlx::Error>>);
}

struct Request<T, F> {
    work: F,
    reply: oneshot::Sender<Result<T>>,
}

impl<T, F> Job for Request<T, F>
where
    T: Send + 'static,
    F: for<'c> FnOnce(&'c mut SqliteConnection) -> WriteFuture<'c, T> + Send + 'static,
{
    fn abandoned(&self) -> bool {
        self.reply.is_closed()
    }

    fn run<'c>(
        self: Box<Self>,
        conn: &'c mut SqliteConnection,
    ) -> Pin<Box<dyn Future<Output = Box<dyn Done>> + Send + 'c>> {
        let Request { work, reply } = *self;
        Box::pin(async move {
            let result = work(conn).await;
            Box::new(Outcome { result, reply }) as Box<dyn Done>
        })
    }

    fn fail(self: Box<Self>, error: Error) {
        let _ = self.reply.send(Err(error));
    }
}

struct Outcome<T> {
    result: Result<T>,
    reply: oneshot::Sender<Result<T>>,
}

impl<T: Send> Done for Outcome<T> {
    fn succeeded(&self) -> bool {
        self.result.is_ok()
    }

    fn finish(self: Box<Self>, batch_failed: Option<Arc<sqlx::Error>>) {
        let answer = match (batch_failed, self.result) {
            (Some(shared), Ok(_)) => Err(Error::Batch(shared)),
            (_, result) => result,
        };
        let _ = self.reply.send(answer);
    }
}
