//! toren-sandbox-e2b's integration tests, against the local E2B server of
//! `toren-test-support` (its sandboxes are bubblewrap sandboxes that really run the
//! commands): exit codes, output capping, the environment and the credentials sent,
//! timeouts that kill whole process groups, reconnection by another backend, sandboxes
//! lost behind Toren's back, broken streams, session pause and resume, lifetime refresh,
//! retried and named errors.

#[cfg(test)] // helpers in the suite are test code too (unwrap allowed)
mod suite;
