//! toren-config's integration tests: agent files (valid ones, and every class of error with
//! its exact `file:line:col`), finding agents by path and by name, and settings resolved
//! from a map of variables.

// `cfg(test)` lets clippy treat the helpers in `suite` as test code (expect allowed).
#[cfg(test)]
mod suite;
