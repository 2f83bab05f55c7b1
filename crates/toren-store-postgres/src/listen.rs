//! The `LISTEN` task: one connection of its own (a pool of one, so sqlx reconnects it and
//! listens again after a loss) waiting for the notices every write queues with
//! `pg_notify` (`store.rs`), turned into a [`broadcast`] of the runs they name. When the
//! server goes away the task retries with backoff (100 ms doubling to 2 s) until it is
//! back; notices sent meanwhile are lost, which is why pools keep a slow poll beside it.

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
    /// Starts the task on a connection made with `connect`.
    pub(crate) fn start(connect: PgConnectOptions, acquire_timeout: Duration) -> Self {
        let (sender, _) = broadcast::channel(CAPACITY);
        let pool = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(acquire_timeout)
            .max_lifetime(None)
            .idle_timeout(None)
            .connect_lazy_with(connect);
        let task = tokio::spawn(
            listen(pool, sender.clone()).instrument(tracing::info_span!("postgres-listen")),
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

async fn listen(pool: sqlx::PgPool, sender: broadcast::Sender<RunId>) {
    let mut backoff = FIRST_BACKOFF;
    let mut listener = loop {
        match connect(&pool).await {
            Ok(listener) => break listener,
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?backoff, "cannot LISTEN for other processes' writes yet");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    };
    backoff = FIRST_BACKOFF;
    loop {
        match listener.try_recv().await {
            Ok(Some(notice)) => {
                backoff = FIRST_BACKOFF;
                match notice.payload().parse::<RunId>() {
                    // No receivers is fine: nobody subscribed yet.
                    Ok(run_id) => drop(sender.send(run_id)),
                    Err(e) => {
                        tracing::debug!(payload = notice.payload(), error = %e, "ignored a notice that names no run")
                    }
                }
            }
            // The connection was lost and made again (listening again): notices sent in
            // between are lost.
            Ok(None) => tracing::info!("the LISTEN connection was lost and is back"),
            Err(e) => {
                tracing::warn!(error = %e, retry_in = ?backoff, "the LISTEN connection failed; retrying");
                tokio::time::sleep(backoff).await;
                backoff = (backoff * 2).min(MAX_BACKOFF);
            }
        }
    }
}

async fn connect(pool: &sqlx::PgPool) -> Result<PgListener, sqlx::Error> {
    let mut listener = PgListener::connect_with(pool).await?;
    listener.listen(CHANNEL).await?;
    Ok(listener)
}
