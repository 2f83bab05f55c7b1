//! The `LISTEN` task: one connection of its own (a pool of one, so sqlx reconnects it and
//! listens again after a loss it notices) waiting for the notices every write queues with
//! `pg_notify` (`store.rs`), turned into a [`broadcast`] of the runs they name. When the
//! server goes away the task retries with backoff (100 ms doubling to 2 s) until it is
//! back. A connection that merely goes quiet may be dead without knowing it (a peer gone
//! without a reset): after [`Moves::start`]'s `quiet` without a notice the task asks the
//! server for a `SELECT 1`, and one that does not answer within the acquire timeout is
//! dropped and made anew. Notices sent while the task is not listening are lost, which
//! is why pools keep a slow poll beside it.

use std::time::Duration;

use sqlx::postgres::{PgConnectOptions, PgListener, PgPoolOptions};
use tokio::sync::broadcast;
use tokio::task::JoinHandle;
use toren_protocol::RunId;
use tracing::Instrument;

use crate::store::CHANNEL;

/// How many notices a slow receiver may fall behind before it sees `Lagged`.
const CAPACITY: usize = 1024;
const FIRST_BACKOFF: Duration = Duration::from_millis(100);
const MAX_BACKOFF: Duration = Duration::from_secs(2);

/// The broadcast and the task feeding it; dropping it stops the task.
pub(crate) struct Moves {
    sender: broadcast::Sender<RunId>,
    task: JoinHandle<()>,
}

impl Moves {
    /// Starts the task on connections made with `connect`, each waited for at most
    /// `timeout`, checked after `quiet` without a notice.
    pub(crate) fn start(connect: PgConnectOptions, timeout: Duration, quiet: Duration) -> Self {
        let (sender, _) = broadcast::channel(CAPACITY);
        let task = Task {
            connect,
            timeout,
            quiet,
            sender: sender.clone(),
        };
        let task = tokio::spawn(
            task.run()
                .instrument(tracing::info_span!("postgres-listen")),
        );
        Self { sender, task }
    }

    pub(crate) fn subscribe(&self) -> broadcast::Receiver<RunId> {
        self.sender.subscribe()
    }
}

impl Drop for Moves {
    fn drop(&mut self) {
        self.task.abort();
    }
}

struct Task {
    connect: PgConnectOptions,
    timeout: Duration,
    quiet: Duration,
    sender: broadcast::Sender<RunId>,
}

impl Task {
    async fn run(self) {
        loop {
            let listener = self.listener().await;
            self.serve(listener).await;
            tracing::warn!("the LISTEN connection stopped answering; making a new one");
        }
    }

    /// A listener on a new pool of one, retried with backoff until the server answers.
    async fn listener(&self) -> PgListener {
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(self.timeout)
            .max_lifetime(None)
            .idle_timeout(None)
            // A listener's connection is never reused: closed when let go, not pinged
            // (sqlx's ping has no deadline, and a dead one would never answer).
            .after_release(|_, _| Box::pin(async { Ok(false) }))
            .connect_lazy_with(self.connect.clone());
        let mut backoff = FIRST_BACKOFF;
        loop {
            let made = tokio::time::timeout(self.timeout, async {
                let mut listener = PgListener::connect_with(&pool).await?;
                listener.listen(CHANNEL).await?;
                Ok::<_, sqlx::Error>(listener)
            })
            .await;
            match made {
                Ok(Ok(listener)) => return listener,
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, retry_in = ?backoff, "cannot LISTEN for other processes' writes yet");
                }
                Err(_) => {
                    tracing::warn!(retry_in = ?backoff, "the server did not answer the LISTEN in time");
                }
            }
            tokio::time::sleep(backoff).await;
            backoff = (backoff * 2).min(MAX_BACKOFF);
        }
    }

    /// Forwards notices until the connection goes quiet and does not answer a check.
    async fn serve(&self, mut listener: PgListener) {
        let mut backoff = FIRST_BACKOFF;
        loop {
            match tokio::time::timeout(self.quiet, listener.try_recv()).await {
                Ok(Ok(Some(notice))) => {
                    backoff = FIRST_BACKOFF;
                    match notice.payload().parse::<RunId>() {
                        // No receivers is fine: nobody subscribed yet.
                        Ok(run_id) => drop(self.sender.send(run_id)),
                        Err(e) => {
                            tracing::debug!(payload = notice.payload(), error = %e, "ignored a notice that names no run")
                        }
                    }
                }
                // The connection was lost and made again (listening again): notices sent in
                // between are lost.
                Ok(Ok(None)) => tracing::info!("the LISTEN connection was lost and is back"),
                Ok(Err(e)) => {
                    tracing::warn!(error = %e, retry_in = ?backoff, "the LISTEN connection failed; retrying");
                    tokio::time::sleep(backoff).await;
                    backoff = (backoff * 2).min(MAX_BACKOFF);
                }
                Err(_) => {
                    let check = sqlx::query("SELECT 1").execute(&mut listener);
                    if !matches!(tokio::time::timeout(self.timeout, check).await, Ok(Ok(_))) {
                        return;
                    }
                }
            }
        }
    }
}
