//! Latency samples and their summary (p50, p99, mean), as every measurement here reports
//! them. Percentiles are nearest-rank over the sorted samples.

use std::fmt;
use std::time::Duration;

/// A measurement and the host floor (`bash -c true`) measured alternately with it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Paired {
    pub(crate) it: Summary,
    pub(crate) host: Summary,
}

impl Paired {
    /// How many times the host floor's p50 this measurement's p50 is.
    pub(crate) fn ratio(&self) -> f64 {
        self.it.ratio_to(&self.host)
    }
}

/// What one measurement found.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Summary {
    pub(crate) iterations: usize,
    pub(crate) p50: Duration,
    pub(crate) p99: Duration,
    pub(crate) mean: Duration,
}

impl Summary {
    /// Summarises `samples` (which it sorts); `None` when there are none.
    pub(crate) fn of(mut samples: Vec<Duration>) -> Option<Self> {
        if samples.is_empty() {
            return None;
        }
        samples.sort_unstable();
        let rank = |p: f64| {
            let at = (p * samples.len() as f64).ceil() as usize;
            samples[at.clamp(1, samples.len()) - 1]
        };
        let total: Duration = samples.iter().sum();
        Some(Self {
            iterations: samples.len(),
            p50: rank(0.50),
            p99: rank(0.99),
            mean: total / u32::try_from(samples.len()).unwrap_or(u32::MAX),
        })
    }

    /// How many times `reference`'s p50 this one's p50 is.
    pub(crate) fn ratio_to(&self, reference: &Self) -> f64 {
        self.p50.as_secs_f64() / reference.p50.as_secs_f64()
    }
}

impl fmt::Display for Summary {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "p50 {:>8.3} ms  p99 {:>8.3} ms  mean {:>8.3} ms  (n={})",
            ms(self.p50),
            ms(self.p99),
            ms(self.mean),
            self.iterations
        )
    }
}

fn ms(d: Duration) -> f64 {
    d.as_secs_f64() * 1000.0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn nearest_rank_percentiles() {
        let samples = (1..=100).map(Duration::from_millis).collect();
        let s = Summary::of(samples).unwrap();
        assert_eq!(s.p50, Duration::from_millis(50));
        assert_eq!(s.p99, Duration::from_millis(99));
        assert_eq!(s.iterations, 100);
        assert_eq!(Summary::of(Vec::new()), None);
    }
}
