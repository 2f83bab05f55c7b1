//! How the pool waits while claims fail (the database is unreachable or refuses): each
//! failure doubles the wait, from [`FIRST`] up to [`CAP`]; the first failure and the first
//! success after failures are logged, the retries in between only at debug level, so an
//! outage is two log lines, not one per try.

use std::time::Duration;

use tokio::time::Instant;

/// The wait after the first failed claim.
const FIRST: Duration = Duration::from_millis(100);
/// The longest wait between tries.
const CAP: Duration = Duration::from_secs(5);

/// Whether claims are failing, and until when the pool waits.
#[derive(Debug, Default)]
pub(crate) struct Backoff {
    failing: Option<Failing>,
}

#[derive(Debug)]
struct Failing {
    wait: Duration,
    until: Instant,
    since: Instant,
    tries: u32,
}

impl Backoff {
    pub(crate) fn new() -> Self {
        Self::default()
    }

    /// How long the pool still waits before it may try to claim again; `None`: it may now.
    pub(crate) fn delay(&self) -> Option<Duration> {
        let failing = self.failing.as_ref()?;
        let left = failing.until.saturating_duration_since(Instant::now());
        (!left.is_zero()).then_some(left)
    }

    /// A claim failed with `error`.
    pub(crate) fn failed(&mut self, error: &dyn std::fmt::Display) {
        let now = Instant::now();
        match &mut self.failing {
            None => {
                tracing::warn!(
                    "cannot claim runs: {error}; trying again with backoff (up to every {} s) \
                     until the database answers",
                    CAP.as_secs()
                );
                self.failing = Some(Failing {
                    wait: FIRST,
                    until: now + FIRST,
                    since: now,
                    tries: 1,
                });
            }
            Some(failing) => {
                failing.wait = (failing.wait * 2).min(CAP);
                failing.until = now + failing.wait;
                failing.tries += 1;
                tracing::debug!(tries = failing.tries, "claiming still fails: {error}");
            }
        }
    }

    /// A claim was answered (with a run or without).
    pub(crate) fn succeeded(&mut self) {
        if let Some(failing) = self.failing.take() {
            tracing::info!(
                "claiming runs again: the database answers (after {} failed tries over {} ms)",
                failing.tries,
                failing.since.elapsed().as_millis()
            );
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn failures_double_the_wait_up_to_the_cap_and_a_success_clears_it() {
        let mut backoff = Backoff::new();
        assert_eq!(backoff.delay(), None);
        let mut waits = Vec::new();
        for _ in 0..8 {
            backoff.failed(&"refused");
            waits.push(backoff.failing.as_ref().map_or(0, |f| f.wait.as_millis()));
            assert!(backoff.delay().is_some(), "it waits after a failure");
        }
        assert_eq!(waits, [100, 200, 400, 800, 1600, 3200, 5000, 5000]);
        backoff.succeeded();
        assert_eq!(backoff.delay(), None, "a success ends the wait");
        backoff.failed(&"refused");
        assert_eq!(
            backoff.failing.as_ref().map(|f| f.wait),
            Some(FIRST),
            "a new outage starts from the first wait"
        );
    }
}
