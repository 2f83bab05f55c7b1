//! The Postgres backend of Toren's store: [`PostgresStore`] implements
//! [`toren_store::EventLog`], [`toren_store::SessionStore`] and
//! [`toren_store::WorkerRegistry`] with the semantics those
//! traits document, so that any number of processes on any hosts can share one database.
//!
//! It uses Postgres as the proven job engines on it do (River, Oban, graphile-worker,
//! DBOS): every write is one transaction that first locks the run's row
//! (`SELECT … FOR UPDATE`), so the fencing-token and seq checks and the write they guard
//! are atomic across processes; `pg_notify` in the same transaction as each write that
//! should wake a worker (a run created, an approval decided, a run cancelled, a lease
//! released, events appended), delivered once the write commits; a `LISTEN` task that
//! reconnects with backoff turns those notices into [`EventLog::moves`]. Times come from
//! the store's [`Clock`](toren_store::Clock), never from the server's `now()`, so lease
//! expiry means the same as on SQLite and the conformance suite's `TestClock` works.
//!
//! `store.rs` opens the pool (sized by [`PostgresOptions::pool_size`], fail-fast
//! connecting, client-side deadlines on every call) and runs the embedded migrations
//! (`migrations/`; sqlx's migrator holds an advisory lock, so concurrent opens take
//! turns); `log.rs` implements the event log on `state.rs` (the locked run row and the
//! lease rules) and `rows.rs` (column forms); `queries.rs` the queries over many runs;
//! `claim.rs` claims (`FOR UPDATE SKIP LOCKED`); `sessions.rs` the session store;
//! `workers.rs` the worker registry; `listen.rs` the notices.
//!
//! [`EventLog::moves`]: toren_store::EventLog::moves

mod chats;
mod claim;
mod error;
mod listen;
mod log;
mod queries;
mod rows;
mod sessions;
mod state;
mod store;
mod workers;

pub use error::OpenError;
pub use store::{PostgresOptions, PostgresStore};
