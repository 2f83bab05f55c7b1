//! toren-channel's integration tests: file kinds, the terminal channel's downloads
//! directory (byte for byte, numbered names, modes, re-run calls) and channel lookup.

#[cfg(test)] // helpers in the suite are test code too (unwrap allowed)
mod suite;
