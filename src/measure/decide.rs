//! From an interval to points: the decision at a tier edge.
//!
//! A grade uses an estimate with a 95 % interval (criterion's rule: draw a verdict only where the
//! interval clears the threshold). Where the interval, widened by [`EDGE_MARGIN`] for the
//! variation between runs that one run's interval cannot see, contains a tier edge, the
//! result is "near the edge" and is decided the way the student would want: the upper end of
//! the widened interval is scored. A kernel whose speed sits at an edge therefore gets the same
//! points run after run instead of a coin toss.

use super::stats::{median, median_interval};
pub use crate::model::timing::Interval;
use crate::rubric::schema::Tier;

/// Variation between runs that one run's interval does not show (clock and thermal state,
/// other tenants of the machine), as a fraction. Measured on an H100: paired ratios moved by
/// less than this between gradings (docs/validation/measurement.md).
pub const EDGE_MARGIN: f64 = 0.01;

impl Interval {
    /// The median of `xs` and the distribution-free interval of that median.
    pub fn of_median(xs: &[f64]) -> Interval {
        let (lo, hi) = median_interval(xs);
        Interval {
            estimate: median(xs),
            lo,
            hi,
        }
    }

    /// Does the (unwidened) interval contain one of `edges`? More samples may settle it.
    pub fn straddles(&self, edges: &[f64]) -> bool {
        edges.iter().any(|&e| self.lo < e && e <= self.hi)
    }
}

/// What a performance check scores.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Decision {
    pub points: f64,
    pub passed: bool,
    /// The edge the widened interval contains, when it contains one.
    pub near_edge: Option<f64>,
    /// Whether the decision scored more than the estimate alone would have.
    pub favoured: bool,
}

/// Every threshold a rubric's performance check has: the pass bar and the tiers' minimums.
pub fn edges(bar: f64, tiers: &[Tier]) -> Vec<f64> {
    let mut e: Vec<f64> = tiers.iter().map(|t| t.min).collect();
    e.push(bar);
    e.sort_by(f64::total_cmp);
    e.dedup();
    e
}

/// Score an interval against a bar and tiers (higher is better).
pub fn decide(iv: &Interval, bar: f64, tiers: &[Tier], points: Option<f64>) -> Decision {
    let up = iv.hi.max(iv.estimate) * (1.0 + EDGE_MARGIN);
    let down = iv.lo.min(iv.estimate) * (1.0 - EDGE_MARGIN);
    let near_edge = edges(bar, tiers).into_iter().find(|&e| down < e && e <= up);
    let scored = tier_points(up, bar, tiers, points);
    let plain = tier_points(iv.estimate, bar, tiers, points);
    Decision {
        points: scored,
        passed: up >= bar,
        near_edge,
        favoured: scored > plain || (up >= bar && iv.estimate < bar),
    }
}

/// The points the highest tier reached gives; `None` tiers means all-or-nothing `points`.
pub fn tier_points(measured: f64, bar: f64, tiers: &[Tier], points: Option<f64>) -> f64 {
    if tiers.is_empty() {
        return if measured >= bar {
            points.unwrap_or(0.0)
        } else {
            0.0
        };
    }
    tiers
        .iter()
        .filter(|t| measured >= t.min)
        .map(|t| t.points)
        .fold(0.0, f64::max)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tiers_give_the_highest_reached() {
        let t = vec![
            Tier {
                min: 10.0,
                points: 2.0,
            },
            Tier {
                min: 100.0,
                points: 5.0,
            },
        ];
        assert_eq!(tier_points(50.0, 100.0, &t, None), 2.0);
        assert_eq!(tier_points(150.0, 100.0, &t, None), 5.0);
        assert_eq!(tier_points(5.0, 100.0, &t, None), 0.0);
        assert_eq!(tier_points(5.0, 2.0, &[], Some(3.0)), 3.0);
    }

    fn tiers() -> Vec<Tier> {
        vec![
            Tier {
                min: 0.125,
                points: 80.0,
            },
            Tier {
                min: 0.0625,
                points: 70.0,
            },
        ]
    }

    fn iv(estimate: f64, lo: f64, hi: f64) -> Interval {
        Interval { estimate, lo, hi }
    }

    #[test]
    fn clear_results_score_their_tier() {
        let d = decide(&iv(0.2, 0.199, 0.201), 0.0625, &tiers(), None);
        assert_eq!(
            (d.points, d.passed, d.near_edge, d.favoured),
            (80.0, true, None, false)
        );
        let d = decide(&iv(0.1, 0.099, 0.101), 0.0625, &tiers(), None);
        assert_eq!((d.points, d.near_edge), (70.0, None));
        let d = decide(&iv(0.03, 0.029, 0.031), 0.0625, &tiers(), None);
        assert_eq!((d.points, d.passed), (0.0, false));
    }

    #[test]
    fn the_same_points_on_either_side_of_an_edge() {
        // The SGEMM of issue 9: 0.1239x to 0.1259x against a 0.125x edge over ten gradings.
        for est in [0.1239, 0.1244, 0.1249, 0.1251, 0.1259] {
            let d = decide(&iv(est, est * 0.998, est * 1.002), 0.0625, &tiers(), None);
            assert_eq!(d.points, 80.0, "estimate {est}");
            assert_eq!(d.near_edge, Some(0.125), "estimate {est}");
        }
        let d = decide(&iv(0.1244, 0.1240, 0.1248), 0.0625, &tiers(), None);
        assert!(d.favoured);
    }

    #[test]
    fn straddling_is_about_the_raw_interval() {
        assert!(iv(0.125, 0.124, 0.126).straddles(&[0.125]));
        assert!(!iv(0.13, 0.126, 0.134).straddles(&[0.125]));
        assert_eq!(edges(0.1, &tiers()), vec![0.0625, 0.1, 0.125]);
    }

    #[test]
    fn pass_bar_without_tiers() {
        let d = decide(&iv(99.5, 99.2, 99.8), 100.0, &[], Some(10.0));
        assert_eq!((d.points, d.passed, d.near_edge), (10.0, true, Some(100.0)));
        let d = decide(&iv(90.0, 89.0, 91.0), 100.0, &[], Some(10.0));
        assert_eq!((d.points, d.passed), (0.0, false));
    }
}
