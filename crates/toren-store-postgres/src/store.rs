//! Opening a [`PostgresStore`]: the URL, the pool, the deadlines, the migrations and the
//! `LISTEN` task; and the two helpers every call goes through (a deadline, a transaction).
//!
//! Deadlines, so that a database that goes away makes calls fail promptly instead of
//! hanging (a worker's heartbeat and retries depend on it): connecting at open
//! ([`PostgresOptions::connect_timeout`]), taking a connection from the pool
//! ([`PostgresOptions::acquire_timeout`]), every statement on the server
//! (`statement_timeout`, `lock_timeout`, `idle_in_transaction_session_timeout`), and every
//! call as a whole on the client ([`PostgresOptions::call_timeout`]: a server cut off
//! mid-call never answers, and only the client can stop waiting). A call that runs out of
//! time fails with a retryable I/O error; if it was a commit in flight, the write may have
//! landed, which the caller finds out as a `Conflict` when it appends again after the same
//! seq (the log moved on) and re-reads.

use std::fmt;
use std::future::Future;
use std::str::FromStr;
use std::sync::Arc;
use std::time::Duration;

use sqlx::migrate::Migrator;
use sqlx::postgres::{PgConnectOptions, PgPool, PgPoolOptions};
use sqlx::{ConnectOptions, Connection, PgConnection, Postgres, Transaction};
use toren_protocol::RunId;
use toren_store::{Clock, Result, SystemClock};

use crate::error::OpenError;
use crate::listen::Moves;

static MIGRATOR: Migrator = sqlx::migrate!("./migrations");

/// How a [`PostgresStore`] connects, and how long it waits.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PostgresOptions {
    /// At most this many connections to the server (the `LISTEN` task holds one more).
    pub pool_size: u32,
    /// How long opening the store waits for the server to answer.
    pub connect_timeout: Duration,
    /// How long a call waits for a connection from the pool (all busy, or the server
    /// unreachable so none can be made).
    pub acquire_timeout: Duration,
    /// The server-side limit on one statement, and on waiting for a row lock.
    pub statement_timeout: Duration,
    /// The client-side limit on one call of the store, connection included.
    pub call_timeout: Duration,
    /// How long the `LISTEN` connection may stay without a notice before the store checks
    /// that the server still answers on it (a connection can die without a reset).
    pub listen_check: Duration,
}

impl Default for PostgresOptions {
    fn default() -> Self {
        Self {
            pool_size: 10,
            connect_timeout: Duration::from_secs(5),
            acquire_timeout: Duration::from_secs(3),
            statement_timeout: Duration::from_secs(5),
            call_timeout: Duration::from_secs(8),
            listen_check: Duration::from_secs(30),
        }
    }
}

/// The event log and the session store in one Postgres database. Cheap to clone (a pool
/// and a handle on the `LISTEN` task, which stops when the last clone is dropped).
#[derive(Clone)]
pub struct PostgresStore {
    pub(crate) pool: PgPool,
    pub(crate) clock: Arc<dyn Clock>,
    moves: Arc<Moves>,
    call_timeout: Duration,
    server: Arc<str>,
}

impl fmt::Debug for PostgresStore {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("PostgresStore")
            .field("server", &self.server)
            .field("clock", &self.clock)
            .finish_non_exhaustive()
    }
}

impl PostgresStore {
    /// Opens the database at a `postgres://` (or `postgresql://`) URL, brings its schema up
    /// to date, and starts listening for other processes' writes. A server that does not
    /// answer within `options.connect_timeout` is [`OpenError::Unreachable`], naming its
    /// host and port. Several processes may open one new database at once: the migrator
    /// takes an advisory lock and they take turns. The store reads the [`SystemClock`];
    /// see [`PostgresStore::with_clock`].
    pub async fn open(url: &str, options: &PostgresOptions) -> Result<Self, OpenError> {
        let base = connect_options(url)?;
        let server = describe(&base);
        let connect = with_limits(base.clone(), options);
        let conn = tokio::time::timeout(options.connect_timeout, connect.connect())
            .await
            .map_err(|_| OpenError::Unreachable {
                server: server.clone(),
                timeout: options.connect_timeout,
                reason: "no answer".to_owned(),
            })?
            .map_err(|source| match source {
                sqlx::Error::Database(_) | sqlx::Error::Tls(_) | sqlx::Error::Configuration(_) => {
                    OpenError::Refused {
                        server: server.clone(),
                        source,
                    }
                }
                other => OpenError::Unreachable {
                    server: server.clone(),
                    timeout: options.connect_timeout,
                    reason: other.to_string(),
                },
            })?;
        // Closing politely is best effort: the server answered, which is what this was for.
        let _ = conn.close().await;
        let check = options.acquire_timeout;
        let pool = PgPoolOptions::new()
            .max_connections(options.pool_size.max(1))
            .min_connections(0)
            .acquire_timeout(options.acquire_timeout)
            .after_release(move |conn, _| {
                // sqlx pings a released connection without a deadline; one left
                // mid-exchange by a call that ran out of time, on a link that lost its
                // bytes, would never answer and hold its pool slot for good. One that does
                // not answer in time is closed instead.
                Box::pin(async move {
                    match tokio::time::timeout(check, conn.ping()).await {
                        Ok(Ok(())) => Ok(true),
                        Ok(Err(e)) => Err(e),
                        Err(_) => Err(sqlx::Error::Io(std::io::Error::new(
                            std::io::ErrorKind::TimedOut,
                            "a released connection did not answer a ping",
                        ))),
                    }
                })
            })
            .connect_lazy_with(connect.clone());
        // Migrations run without the statement and lock limits meant for the store's calls:
        // one that rewrites a large table may take minutes, and must not be cut short.
        let migrating = PgPoolOptions::new()
            .max_connections(1)
            .acquire_timeout(options.connect_timeout)
            .connect_lazy_with(base);
        let migrated = MIGRATOR.run(&migrating).await;
        migrating.close().await;
        migrated.map_err(|source| OpenError::Migrate {
            server: server.clone(),
            source,
        })?;
        let moves = Moves::start(connect, options.acquire_timeout, options.listen_check);
        tracing::debug!(server = %server, "opened the Postgres event store");
        Ok(Self {
            pool,
            clock: Arc::new(SystemClock),
            moves: Arc::new(moves),
            call_timeout: options.call_timeout,
            server: server.into(),
        })
    }

    /// The same store reading `clock` instead: tests pass a
    /// [`TestClock`](toren_store::TestClock) to move past lease expiries without sleeping.
    /// Every store writing one database should read the same clock.
    pub fn with_clock(self, clock: Arc<dyn Clock>) -> Self {
        Self { clock, ..self }
    }

    /// The server as messages name it: `host:port` or the socket directory and port.
    pub fn server(&self) -> &str {
        &self.server
    }

    /// Closes every connection, waiting for in-flight calls to finish. Calls made after
    /// this fail.
    pub async fn close(&self) {
        self.pool.close().await;
    }

    /// A receiver of the runs moved by any process's writes (this one's included).
    pub(crate) fn subscribe(&self) -> tokio::sync::broadcast::Receiver<RunId> {
        self.moves.subscribe()
    }

    /// `work` under the store's call deadline: past it, a retryable I/O error.
    pub(crate) async fn bounded<T>(&self, work: impl Future<Output = Result<T>>) -> Result<T> {
        match tokio::time::timeout(self.call_timeout, work).await {
            Ok(result) => result,
            Err(_) => Err(toren_store::Error::Database(sqlx::Error::Io(
                std::io::Error::new(
                    std::io::ErrorKind::TimedOut,
                    format!(
                        "the Postgres server at {} did not answer within {:?}",
                        self.server, self.call_timeout
                    ),
                ),
            ))),
        }
    }

    /// Begins a transaction (read committed: every statement sees the latest commits, and
    /// the row locks taken first keep writers of one run apart).
    pub(crate) async fn begin(&self) -> Result<Transaction<'static, Postgres>> {
        Ok(self.pool.begin().await?)
    }
}

/// Ends `tx` as `result` says: committed with a value, rolled back (and awaited) with an
/// error. A transaction merely dropped is rolled back only when its connection is next
/// used, and until then it keeps its row locks: a claim would skip a run a refused call
/// left locked, and a writer of that run would wait.
pub(crate) async fn finish<T>(tx: Transaction<'static, Postgres>, result: Result<T>) -> Result<T> {
    match result {
        Ok(value) => {
            tx.commit().await?;
            Ok(value)
        }
        Err(e) => {
            // The call's own error says more than a failed rollback would; the connection
            // goes back to the pool, which rolls back or closes it.
            let _ = tx.rollback().await;
            Err(e)
        }
    }
}

/// The channel every notice goes to; its payload is the run's id.
pub(crate) const CHANNEL: &str = "toren_moves";

/// Queues a notice that `run_id` moved, delivered to every listener when `tx` commits
/// (and never if it rolls back).
pub(crate) async fn notify(tx: &mut PgConnection, run_id: &RunId) -> Result<()> {
    sqlx::query("SELECT pg_notify($1, $2)")
        .bind(CHANNEL)
        .bind(run_id.as_str())
        .execute(tx)
        .await?;
    Ok(())
}

/// The connect options of `url`.
fn connect_options(url: &str) -> Result<PgConnectOptions, OpenError> {
    if !(url.starts_with("postgres://") || url.starts_with("postgresql://")) {
        return Err(OpenError::BadUrl {
            reason: "expected `postgres://USER:PASSWORD@HOST:PORT/DATABASE`".to_owned(),
        });
    }
    // sqlx's parse errors may quote the URL; never repeat them, since it may hold a password.
    let parsed = PgConnectOptions::from_str(url).map_err(|_| OpenError::BadUrl {
        reason: "it does not parse; expected `postgres://USER:PASSWORD@HOST:PORT/DATABASE` \
                 (percent-encode special characters in the password)"
            .to_owned(),
    })?;
    Ok(parsed.application_name("toren"))
}

/// `connect` with the server-side limits of `options` on every statement of a session.
fn with_limits(connect: PgConnectOptions, options: &PostgresOptions) -> PgConnectOptions {
    let millis = |d: Duration| format!("{}ms", d.as_millis());
    connect.options([
        ("statement_timeout", millis(options.statement_timeout)),
        ("lock_timeout", millis(options.statement_timeout)),
        (
            "idle_in_transaction_session_timeout",
            millis(options.call_timeout * 2),
        ),
    ])
}

/// `host:port`, or `socket DIR port N`: where the store connects, without user or password.
fn describe(options: &PgConnectOptions) -> String {
    match options.get_socket() {
        Some(dir) => format!(
            "the socket in {} (port {})",
            dir.display(),
            options.get_port()
        ),
        None => format!("{}:{}", options.get_host(), options.get_port()),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn urls_are_postgres_urls_and_never_repeated() {
        for bad in [
            "sqlite:///tmp/x.db",
            "mysql://u:secret@h/db",
            "postgres://u:secret@h:notaport/db",
        ] {
            let err = connect_options(bad).unwrap_err();
            assert!(matches!(err, OpenError::BadUrl { .. }), "{bad}: {err}");
            assert!(!err.to_string().contains("secret"), "{err}");
        }
        let ok = connect_options("postgresql://u:secret@db.example:6543/toren").unwrap();
        assert_eq!(describe(&ok), "db.example:6543");
        let socket = connect_options("postgres://u@localhost:5433/toren?host=/tmp/pg").unwrap();
        assert_eq!(describe(&socket), "the socket in /tmp/pg (port 5433)");
    }
}
