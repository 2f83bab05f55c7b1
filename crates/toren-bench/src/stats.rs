//! Percentiles of measured durations (nearest rank: a reported p99 is a latency some
//! request really had, never an interpolation).

use std::time::Duration;

/// p50, p99 and the maximum of a set of durations, in milliseconds.
#[derive(Clone, Copy, Debug, PartialEq, serde::Serialize)]
pub(crate) struct Spread {
    pub(crate) p50_ms: f64,
    pub(crate) p99_ms: f64,
    pub(crate) max_ms: f64,
}

impl Spread {
    /// `None` for no samples.
    pub(crate) fn of(samples: &[Duration]) -> Option<Self> {
        let mut sorted = samples.to_vec();
        sorted.sort_unstable();
        Some(Self {
            p50_ms: millis(percentile(&sorted, 50)?),
            p99_ms: millis(percentile(&sorted, 99)?),
            max_ms: millis(*sorted.last()?),
        })
    }
}

/// The nearest-rank `pct`th percentile of `sorted` (ascending): the smallest sample with
/// at least `pct`% of the samples at or below it.
pub(crate) fn percentile(sorted: &[Duration], pct: usize) -> Option<Duration> {
    if sorted.is_empty() {
        return None;
    }
    let rank = (pct * sorted.len()).div_ceil(100).max(1);
    sorted.get(rank - 1).copied()
}

pub(crate) fn millis(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

/// The CPU time this process has spent so far, user and system, all its threads: what the
/// machine's load does not change, unlike the wall time.
pub(crate) fn cpu_time() -> Duration {
    use nix::sys::resource::{UsageWho, getrusage};
    getrusage(UsageWho::RUSAGE_SELF).map_or(Duration::ZERO, |usage| {
        let micros = |t: nix::sys::time::TimeVal| {
            Duration::from_secs(t.tv_sec().unsigned_abs())
                + Duration::from_micros(t.tv_usec().unsigned_abs())
        };
        micros(usage.user_time()) + micros(usage.system_time())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ms(n: u64) -> Duration {
        Duration::from_millis(n)
    }

    #[test]
    fn nearest_rank_percentiles() {
        let hundred: Vec<Duration> = (1..=100).map(ms).collect();
        assert_eq!(percentile(&hundred, 50), Some(ms(50)));
        assert_eq!(percentile(&hundred, 99), Some(ms(99)));
        assert_eq!(percentile(&hundred, 100), Some(ms(100)));
        // Ten samples: the p99 is the slowest one, not a value between the last two.
        let ten: Vec<Duration> = (1..=10).map(ms).collect();
        assert_eq!(percentile(&ten, 99), Some(ms(10)));
        assert_eq!(percentile(&ten, 50), Some(ms(5)));
        assert_eq!(percentile(&[ms(7)], 50), Some(ms(7)));
        assert_eq!(percentile(&[], 50), None);
    }

    #[test]
    fn spread_sorts_its_samples() {
        let samples = [ms(30), ms(10), ms(20)];
        assert_eq!(
            Spread::of(&samples),
            Some(Spread {
                p50_ms: 20.0,
                p99_ms: 30.0,
                max_ms: 30.0
            })
        );
        assert_eq!(Spread::of(&[]), None);
    }
}
