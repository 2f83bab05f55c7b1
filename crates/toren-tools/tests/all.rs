//! toren-tools' integration tests: each tool's semantics and each class of error message,
//! against real workspaces and real bubblewrap sandboxes.

#[cfg(test)] // helpers in the suite are test code too (unwrap allowed)
mod suite;
