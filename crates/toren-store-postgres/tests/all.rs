//! toren-store-postgres's integration tests, every one against a real Postgres: a
//! throwaway cluster (`toren_test_support::postgres::Cluster`: initdb in a temp dir) per
//! test. Without the server binaries they fail, naming `scripts/install-postgres`.

#[cfg(test)] // helpers in the suite are test code too (unwrap allowed)
mod suite;
