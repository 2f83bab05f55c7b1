//! End-to-end tests of the `toren` binary: real SQLite, real bubblewrap, real HTTP on
//! loopback against fake model servers.

mod suite;
