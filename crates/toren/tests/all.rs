//! End-to-end tests of the `toren` binary: real SQLite, real bubblewrap, real HTTP on
//! loopback against fake model servers.

#[cfg(test)] // helpers in the suite are test code too (unwrap allowed)
mod suite;
