//! Library-level tests of the run service and the worker, with no binary: a real SQLite
//! store in a temp dir, scripted models (`toren_model::scripted`) and the real `local`
//! bubblewrap backend. `suite/support.rs` builds a home (store, sandbox root, service,
//! worker) so that a test can create a run, drive it and check its log in a few lines.

#[cfg(test)] // helpers in the suite are test code too (unwrap allowed)
mod suite;
