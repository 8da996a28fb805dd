//! Statistics of repeated timings: medians, spread and the confidence interval of a median.
//!
//! Grades compare medians (robust to the odd slow launch). The interval of a median comes from
//! order statistics, so it assumes nothing about the shape of the timing distribution (GPU
//! timings are skewed: a floor set by the hardware and a tail of interruptions).

/// Median of the finite values of `xs`; 0 when there are none.
pub fn median(xs: &[f64]) -> f64 {
    let v = sorted(xs);
    if v.is_empty() {
        return 0.0;
    }
    let m = v.len() / 2;
    if v.len() % 2 == 1 {
        v[m]
    } else {
        0.5 * (v[m - 1] + v[m])
    }
}

/// Smallest finite value; 0 when there is none.
pub fn min(xs: &[f64]) -> f64 {
    sorted(xs).first().copied().unwrap_or(0.0)
}

/// Median absolute deviation relative to the median, as a fraction (0.05 = 5 %).
pub fn relative_spread(xs: &[f64]) -> f64 {
    let med = median(xs);
    if med <= 0.0 {
        return 0.0;
    }
    let dev: Vec<f64> = xs.iter().map(|x| (x - med).abs()).collect();
    median(&dev) / med
}

/// Distribution-free 95 % confidence interval of the median: the order statistics at ranks
/// `n/2 ± 1.96·√n/2` (normal approximation to the binomial; exact enough from ~10 samples).
/// With fewer than 6 samples it is the whole range.
pub fn median_interval(xs: &[f64]) -> (f64, f64) {
    let v = sorted(xs);
    let n = v.len();
    if n == 0 {
        return (0.0, 0.0);
    }
    if n < 6 {
        return (v[0], v[n - 1]);
    }
    let half = 1.96 * (n as f64).sqrt() / 2.0;
    let centre = n as f64 / 2.0;
    let lo = ((centre - half).floor().max(0.0)) as usize;
    let hi = ((centre + half).ceil() as usize).min(n - 1);
    (v[lo], v[hi])
}

/// Relative noise of the median estimate: half the width of its 95 % interval divided by the
/// median (0.005 = ±0.5 %). Infinite when there is nothing to estimate from.
pub fn noise(xs: &[f64]) -> f64 {
    let med = median(xs);
    if med <= 0.0 || xs.len() < 2 {
        return f64::INFINITY;
    }
    let (lo, hi) = median_interval(xs);
    (hi - lo) / (2.0 * med)
}

/// Coefficient of variation (standard deviation / mean) of the finite values.
pub fn cv(xs: &[f64]) -> f64 {
    let v = sorted(xs);
    if v.len() < 2 {
        return 0.0;
    }
    let mean = v.iter().sum::<f64>() / v.len() as f64;
    if mean <= 0.0 {
        return 0.0;
    }
    let var = v.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / (v.len() - 1) as f64;
    var.sqrt() / mean
}

fn sorted(xs: &[f64]) -> Vec<f64> {
    let mut v: Vec<f64> = xs.iter().copied().filter(|x| x.is_finite()).collect();
    v.sort_by(f64::total_cmp);
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn median_and_spread() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
        assert_eq!(median(&[f64::NAN, 1.0]), 1.0);
        assert_eq!(min(&[f64::NAN, 3.0, 2.0]), 2.0);
        assert!((relative_spread(&[1.0, 1.1, 0.9, 1.0, 5.0]) - 0.1).abs() < 1e-12);
    }

    #[test]
    fn interval_of_the_median_narrows_with_samples_and_ignores_outliers() {
        // 1.00, 1.01, ..., 1.99 in a scrambled order: the interval brackets the median.
        let few: Vec<f64> = (0..20)
            .map(|i| 1.0 + ((i * 7) % 20) as f64 / 20.0)
            .collect();
        let many: Vec<f64> = (0..2000)
            .map(|i| 1.0 + ((i * 7) % 2000) as f64 / 2000.0)
            .collect();
        let (lo, hi) = median_interval(&few);
        assert!(lo < median(&few) && median(&few) < hi);
        assert!(noise(&many) < noise(&few) / 5.0);
        // One huge outlier does not move the interval of 100 tight samples.
        let mut tight: Vec<f64> = (0..100).map(|i| 1.0 + (i % 10) as f64 * 1e-4).collect();
        let before = noise(&tight);
        tight[3] = 1e6;
        assert!((noise(&tight) - before).abs() < 2e-4);
        assert!(noise(&[1.0]).is_infinite());
        assert_eq!(median_interval(&[2.0, 1.0, 3.0]), (1.0, 3.0));
    }

    #[test]
    fn coefficient_of_variation() {
        assert_eq!(cv(&[2.0, 2.0, 2.0]), 0.0);
        assert!((cv(&[1.0, 3.0]) - 2f64.sqrt() / 2.0).abs() < 1e-12);
    }
}
