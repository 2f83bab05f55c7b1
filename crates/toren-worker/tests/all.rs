//! Integration tests of the worker: runs driven against a real SQLite store and the real
//! bubblewrap sandbox, with the store wrapped where a test needs it to fail.

#[cfg(test)] // helpers in the suite are test code too (unwrap allowed)
mod suite;
