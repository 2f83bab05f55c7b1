//! toren-sandbox's integration tests: workspace access through the capability handle (every
//! kind of escape), the bubblewrap argv as a snapshot, and real bubblewrap sandboxes
//! (confinement, environment, network, timeouts, process cleanup, output capture).

#[cfg(test)] // helpers in the suite are test code too (unwrap allowed)
mod suite;
