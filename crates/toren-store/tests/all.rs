//! toren-store's integration tests: the conformance suite against real SQLite files in
//! temporary directories, SQLite-specific behaviour (durability, migrations, WAL, crashes),
//! and the corpus of v1 events.

#[cfg(test)] // helpers in the suite are test code too (unwrap allowed)
mod suite;
