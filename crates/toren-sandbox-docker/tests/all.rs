//! toren-sandbox-docker's integration tests, against the machine's real Docker daemon:
//! container lifecycle, commands through the helper, isolation, file ownership, recovery
//! from a removed container, missing images, the reaper's rules, and the container
//! specification as a snapshot. The images they need are built by `scripts/` (fast, and
//! skipped when present); a daemon that cannot be reached fails the tests, naming the fix.

#[cfg(test)] // helpers in the suite are test code too (unwrap allowed)
mod suite;
