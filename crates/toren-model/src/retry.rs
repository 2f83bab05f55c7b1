//! Retrying transient failures: a bounded number of attempts with exponential backoff and
//! jitter, honouring the wait a server asks for. The HTTP clients (`anthropic`, `openai`)
//! wrap one whole call — request and stream — in [`with_retries`].

use std::collections::hash_map::RandomState;
use std::future::Future;
use std::hash::{BuildHasher, Hasher};
use std::time::Duration;

use crate::error::{Error, Result};

/// How often and how patiently a client retries a retryable [`Error`].
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RetryPolicy {
    /// Attempts in total, the first included. `1` disables retries.
    pub max_attempts: u32,
    /// The wait before the second attempt; doubled for each further attempt.
    pub base_delay: Duration,
    /// No computed wait is longer than this.
    pub max_delay: Duration,
    /// A server-requested wait (`retry-after`) longer than this is cut to this.
    pub max_retry_after: Duration,
}

impl Default for RetryPolicy {
    fn default() -> Self {
        RetryPolicy {
            max_attempts: 4,
            base_delay: Duration::from_millis(500),
            max_delay: Duration::from_secs(8),
            max_retry_after: Duration::from_secs(60),
        }
    }
}

impl RetryPolicy {
    /// The computed wait after failed attempt number `attempt` (1-based): exponential,
    /// capped, plus up to 25% jitter so that many clients do not retry in lockstep.
    pub fn backoff(&self, attempt: u32) -> Duration {
        let exp = self
            .base_delay
            .saturating_mul(1u32 << attempt.saturating_sub(1).min(16));
        let capped = exp.min(self.max_delay);
        let jitter_permille = RandomState::new().build_hasher().finish() % 250;
        capped + capped.mul_f64(jitter_permille as f64 / 1000.0)
    }

    fn delay_for(&self, error: &Error, attempt: u32) -> Duration {
        match error.retry_after() {
            Some(wait) => wait.min(self.max_retry_after),
            None => self.backoff(attempt),
        }
    }
}

/// Runs `attempt` until it succeeds, fails with a non-retryable error, or the policy's
/// attempts are used up; the last error is returned as is.
pub(crate) async fn with_retries<T, F, Fut>(policy: &RetryPolicy, mut attempt: F) -> Result<T>
where
    F: FnMut() -> Fut,
    Fut: Future<Output = Result<T>>,
{
    let mut number = 1;
    loop {
        match attempt().await {
            Ok(value) => return Ok(value),
            Err(error) if error.is_retryable() && number < policy.max_attempts => {
                let delay = policy.delay_for(&error, number);
                tracing::warn!(
                    attempt = number,
                    max_attempts = policy.max_attempts,
                    delay_ms = delay.as_millis() as u64,
                    %error,
                    "model call failed, retrying"
                );
                tokio::time::sleep(delay).await;
                number += 1;
            }
            Err(error) => return Err(error),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_doubles_and_is_capped() {
        let policy = RetryPolicy {
            base_delay: Duration::from_millis(100),
            max_delay: Duration::from_millis(350),
            ..RetryPolicy::default()
        };
        let within = |d: Duration, low: u64| {
            d >= Duration::from_millis(low) && d <= Duration::from_millis(low * 125 / 100)
        };
        assert!(within(policy.backoff(1), 100));
        assert!(within(policy.backoff(2), 200));
        assert!(within(policy.backoff(3), 350));
        assert!(within(policy.backoff(30), 350));
    }

    #[test]
    fn server_wait_wins_but_is_capped() {
        let policy = RetryPolicy {
            max_retry_after: Duration::from_secs(5),
            ..RetryPolicy::default()
        };
        let api = |secs| Error::Api {
            provider: "anthropic",
            status: 429,
            message: String::new(),
            retry_after: Some(Duration::from_secs(secs)),
        };
        assert_eq!(policy.delay_for(&api(2), 1), Duration::from_secs(2));
        assert_eq!(policy.delay_for(&api(600), 1), Duration::from_secs(5));
    }
}
