//! toren-exec's integration tests: the helper binary run directly on the host, driven over
//! its stdin and stdout like the docker backend drives it.

#[cfg(test)] // helpers in the suite are test code too (unwrap allowed)
mod suite;
