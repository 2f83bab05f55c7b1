//! toren-egress's integration tests: the proxy against real listeners on loopback (an
//! origin server playing the allowed host) and a real unix socket.

// `cfg(test)` lets clippy treat the helpers in `suite` as test code (unwrap allowed).
#[cfg(test)]
mod suite;
