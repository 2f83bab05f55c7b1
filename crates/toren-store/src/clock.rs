//! Where a store gets the time: the `at` of the events it writes and the expiry of leases.
//!
//! A store reads its [`Clock`] once per call, so one batch shares one instant and a lease
//! acquired with `create_run` expires exactly `ttl` after the run's `run_created`. Production
//! stores use [`SystemClock`]; tests give the store a [`TestClock`] and jump past a lease's
//! expiry instead of sleeping. Safety never rests on clocks: fencing compares lease tokens,
//! and time only decides when a silent holder's run may be taken over.

use std::fmt;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::Duration;

use jiff::Timestamp;

/// A source of the current time.
pub trait Clock: Send + Sync + fmt::Debug {
    fn now(&self) -> Timestamp;
}

/// The operating system's wall clock.
#[derive(Clone, Copy, Debug, Default)]
pub struct SystemClock;

impl Clock for SystemClock {
    fn now(&self) -> Timestamp {
        Timestamp::now()
    }
}

/// The system clock plus an offset that only grows: time flows as usual (so events written
/// one after another keep distinct, ordered times) and [`TestClock::advance`] jumps ahead,
/// e.g. past a lease's expiry. Share one `Arc<TestClock>` between the store and the test.
#[derive(Debug, Default)]
pub struct TestClock {
    ahead_nanos: AtomicU64,
}

impl TestClock {
    pub fn new() -> Self {
        Self::default()
    }

    /// Moves this clock `by` further ahead of the system clock.
    pub fn advance(&self, by: Duration) {
        let nanos = u64::try_from(by.as_nanos()).unwrap_or(u64::MAX);
        // fetch_update only fails if the closure returns None, and it never does.
        let _ = self
            .ahead_nanos
            .fetch_update(Ordering::SeqCst, Ordering::SeqCst, |ahead| {
                Some(ahead.saturating_add(nanos))
            });
    }
}

impl Clock for TestClock {
    fn now(&self) -> Timestamp {
        let ahead = Duration::from_nanos(self.ahead_nanos.load(Ordering::SeqCst));
        Timestamp::now()
            .saturating_add(ahead)
            .unwrap_or(Timestamp::MAX)
    }
}

/// `at + ttl`, or the end of time if that overflows.
pub(crate) fn after(at: Timestamp, ttl: Duration) -> Timestamp {
    at.saturating_add(ttl).unwrap_or(Timestamp::MAX)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_test_clock_jumps_ahead_of_the_system_clock() {
        let clock = TestClock::new();
        let before = Timestamp::now();
        assert!(clock.now() >= before);
        clock.advance(Duration::from_secs(3600));
        clock.advance(Duration::from_secs(60));
        let jumped = clock.now();
        assert!(
            jumped >= after(before, Duration::from_secs(3660)),
            "{jumped}"
        );
        assert!(jumped < after(Timestamp::now(), Duration::from_secs(3661)));
    }

    #[test]
    fn huge_ttls_saturate() {
        assert_eq!(after(Timestamp::now(), Duration::MAX), Timestamp::MAX);
    }
}
