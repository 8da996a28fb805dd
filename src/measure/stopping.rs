//! When to stop sampling: nvbench's `stdrel` idea with a distribution-free noise estimate.
//!
//! Sampling stops when the relative noise of the estimate (half the 95 % interval of the
//! median, over the median) is under the target after a minimum number of samples, when one
//! more sample would overrun the case's time budget, or at a sample cap. The budget is a
//! ceiling rather than the norm: a 0.1 ms kernel meets a 0.5 % target in a small fraction of
//! it. The first launch (the probe) always happens and sizes the rest.

use super::StopReason;
use super::stats::noise;
use std::time::Duration;

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct StoppingRule {
    /// Relative noise target, e.g. 0.005 for ±0.5 %.
    pub max_noise: f64,
    pub min_samples: usize,
    pub max_samples: usize,
    /// Wall-clock ceiling of the whole measurement, probe included.
    pub budget: Duration,
}

impl StoppingRule {
    pub const DEFAULT_NOISE: f64 = 0.005;
    pub const DEFAULT_MIN_SAMPLES: usize = 10;
    pub const MAX_SAMPLES: usize = 2000;

    pub fn new(budget: Duration) -> Self {
        StoppingRule {
            max_noise: Self::DEFAULT_NOISE,
            min_samples: Self::DEFAULT_MIN_SAMPLES,
            max_samples: Self::MAX_SAMPLES,
            budget,
        }
    }

    /// Decide after a sample. `estimates` are the values the grade uses (ratios, or times when
    /// there is no baseline); `elapsed` is the time spent so far; `next` what one more sample
    /// is expected to cost; `straddles` whether the current interval straddles a tier edge
    /// (then the noise target alone does not stop: more samples may settle it).
    pub fn decide(
        &self,
        estimates: &[f64],
        elapsed: Duration,
        next: Duration,
        straddles: bool,
    ) -> Option<StopReason> {
        let n = estimates.len();
        if n >= self.max_samples {
            return Some(StopReason::MaxSamples);
        }
        if n >= 1 && elapsed + next > self.budget {
            return Some(StopReason::Budget);
        }
        if n >= self.min_samples && !straddles && noise(estimates) <= self.max_noise {
            return Some(StopReason::NoiseTarget);
        }
        None
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rule() -> StoppingRule {
        StoppingRule::new(Duration::from_secs(2))
    }

    #[test]
    fn stops_at_the_noise_target_only_after_the_minimum() {
        let steady = vec![1.0; 9];
        let ms = Duration::from_millis(1);
        assert_eq!(rule().decide(&steady, ms, ms, false), None);
        let steady = vec![1.0; 10];
        assert_eq!(
            rule().decide(&steady, ms, ms, false),
            Some(StopReason::NoiseTarget)
        );
        // At a tier edge the target alone does not stop the sampling.
        assert_eq!(rule().decide(&steady, ms, ms, true), None);
    }

    #[test]
    fn noisy_samples_run_until_the_budget_and_never_past_it() {
        let noisy: Vec<f64> = (0..50).map(|i| 1.0 + (i % 5) as f64 * 0.1).collect();
        let r = rule();
        assert_eq!(
            r.decide(
                &noisy,
                Duration::from_millis(500),
                Duration::from_millis(10),
                false
            ),
            None
        );
        // One more sample would overrun the 2 s budget.
        assert_eq!(
            r.decide(
                &noisy,
                Duration::from_millis(1995),
                Duration::from_millis(10),
                false
            ),
            Some(StopReason::Budget)
        );
    }

    #[test]
    fn a_slow_probe_is_the_only_sample() {
        // The probe alone took 1.5 s of a 2 s budget: no second launch.
        assert_eq!(
            rule().decide(
                &[1500.0],
                Duration::from_millis(1500),
                Duration::from_millis(1500),
                false
            ),
            Some(StopReason::Budget)
        );
    }

    #[test]
    fn the_cap_stops_everything() {
        let mut r = rule();
        r.max_samples = 3;
        let noisy = [1.0, 2.0, 3.0];
        assert_eq!(
            r.decide(&noisy, Duration::ZERO, Duration::ZERO, true),
            Some(StopReason::MaxSamples)
        );
    }
}
