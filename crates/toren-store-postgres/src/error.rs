//! Why a Postgres store could not be opened. Once open, its calls fail with
//! [`toren_store::Error`] like any store's. Messages name the server by host and port
//! (or socket directory), never the URL: it may carry a password.

use std::time::Duration;

#[derive(Debug, thiserror::Error)]
pub enum OpenError {
    #[error("the database URL is not a Postgres URL this store can open: {reason}")]
    BadUrl { reason: String },

    #[error(
        "cannot reach the Postgres server at {server} within {}: {reason}; check that the \
         server is running and that this machine can reach it at that address",
        seconds(*timeout)
    )]
    Unreachable {
        /// `host:port`, or the socket directory and port.
        server: String,
        timeout: Duration,
        reason: String,
    },

    #[error(
        "the Postgres server at {server} refused the connection: {source}; check the user, \
         password and database name in the URL"
    )]
    Refused {
        server: String,
        #[source]
        source: sqlx::Error,
    },

    #[error(
        "cannot bring the database schema on {server} up to date: {source}; if a newer \
         Toren used this database, use that version"
    )]
    Migrate {
        server: String,
        #[source]
        source: sqlx::migrate::MigrateError,
    },
}

fn seconds(d: Duration) -> String {
    format!("{} s", d.as_secs_f64())
}
