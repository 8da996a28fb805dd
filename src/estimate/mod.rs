//! The speed estimate without a GPU (docs/estimate.md): a kernel's time on a named GPU from
//! what the emulator counts in a sample of its blocks (`sample`), priced by a cost model
//! (`model`) with each GPU's parameters (`gpu`, from `gpus.yaml`).
//!
//! On the emulator backend each performance check carries an [`Estimate`]: the kernel's
//! estimated time with its likely range, the same for its baseline where that is a kernel
//! (the reference, cuBLAS, a device copy; a CPU baseline only where it is pinned for the course
//! by `cugrade calibrate`, never timed here), the ratio the
//! rubric's bar is about, and what bounds the kernel. It is feedback, never a grade: the
//! check stays skipped and its points provisional.

pub mod gpu;
pub mod model;
pub mod sample;

pub use crate::model::estimate::{BaselineEstimate, Estimate};

/// The range an estimate of `ms` is likely in on `g`, widened by `notes`' caveats.
pub fn range(ms: f64, g: &gpu::Gpu, widen: f64) -> (f64, f64) {
    let lo = g.range_low.value.clamp(0.05, 1.0);
    let hi = g.range_high.value.max(1.0);
    (ms * lo / widen.max(1.0), ms * hi * widen.max(1.0))
}

/// A time for a sentence: "0.352 ms", "29.4 ms", "1.25 s".
pub fn fmt_ms(ms: f64) -> String {
    if ms >= 1000.0 {
        format!("{:.2} s", ms / 1000.0)
    } else if ms >= 10.0 {
        format!("{ms:.1} ms")
    } else if ms >= 1.0 {
        format!("{ms:.2} ms")
    } else {
        format!("{ms:.3} ms")
    }
}

fn fmt_ratio(r: f64) -> String {
    if r >= 100.0 {
        format!("{r:.0}")
    } else if r >= 10.0 {
        format!("{r:.1}")
    } else {
        format!("{r:.2}")
    }
}

/// What an estimate says of a check's bar: where its whole likely range lies.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Likely {
    /// Even the bottom of the likely range meets the bar.
    Pass,
    /// Even the top of the likely range is below the bar.
    Fail,
    /// The bar lies inside the likely range.
    Either,
}

/// A speed-up as a student reads it, in one direction: "3.40x faster", "9.09x slower", "as
/// fast as" (within half a percent).
fn speed(r: f64) -> String {
    if (r - 1.0).abs() < 0.005 {
        "as fast as".to_string()
    } else if r > 1.0 {
        format!("{}x faster than", fmt_ratio(r))
    } else {
        format!("{}x slower than", fmt_ratio(1.0 / r))
    }
}

/// A likely range of speed-ups in the same words: "2.43–4.86x faster", "1.6–2.5x slower",
/// "between 1.6x slower and 1.43x faster".
fn speed_range(lo: f64, hi: f64) -> String {
    if lo >= 1.0 {
        format!("{}–{}x faster", fmt_ratio(lo), fmt_ratio(hi))
    } else if hi <= 1.0 {
        format!("{}–{}x slower", fmt_ratio(1.0 / hi), fmt_ratio(1.0 / lo))
    } else {
        format!(
            "between {}x slower and {}x faster",
            fmt_ratio(1.0 / lo),
            fmt_ratio(hi)
        )
    }
}

/// A speed-up bar in the same words: "needs 10x faster", "may be at most 2x slower".
fn speed_bar(n: f64) -> String {
    if n >= 1.0 {
        format!("needs {}x faster", fmt_bar(n))
    } else {
        format!("may be at most {}x slower", fmt_bar(1.0 / n))
    }
}

/// A bar as the rubric writes it (`10`, `0.5`, `2.5`), without trailing zeros.
fn fmt_bar(n: f64) -> String {
    let s = format!("{n:.3}");
    s.trim_end_matches('0').trim_end_matches('.').to_string()
}

impl Estimate {
    /// Where the likely range lies against the bar; `None` without a ratio or a bar.
    pub fn likely(&self) -> Option<Likely> {
        let (lo, hi, n) = (self.ratio_low?, self.ratio_high?, self.needs?);
        Some(if lo >= n {
            Likely::Pass
        } else if hi < n {
            Likely::Fail
        } else {
            Likely::Either
        })
    }

    /// One sentence for every report format: "estimated on an H100: 0.352 ms (likely
    /// 0.246–0.493 ms), about 3.40x faster than the reference `reduce_naive` (likely
    /// 2.43–4.86x faster; needs 10x faster): likely to fail this bar on a GPU; bound by DRAM
    /// bandwidth; an estimate, not a grade". A speed-up is worded in one direction with its
    /// range and its bar ("22.2x slower ... may be at most 2x slower"), never "0.05x faster".
    pub fn sentence(&self) -> String {
        let article = if self
            .gpu
            .starts_with(['A', 'E', 'F', 'H', 'I', 'L', 'M', 'N', 'R', 'S', 'X'])
        {
            "an"
        } else {
            "a"
        };
        let (lo, hi) = (fmt_ms(self.low_ms), fmt_ms(self.high_ms));
        let lo = match (lo.strip_suffix(" ms"), hi.ends_with(" ms")) {
            (Some(l), true) => l.to_string(),
            _ => lo,
        };
        let mut s = format!(
            "estimated on {article} {}: {} (likely {lo}–{hi})",
            self.gpu,
            fmt_ms(self.ms),
        );
        let unit = if self.unit == "%" { " %" } else { "x" };
        let faster_than = self
            .against
            .strip_prefix("faster than ")
            .filter(|_| unit == "x");
        if let Some(r) = self.ratio {
            let mut paren = Vec::new();
            match faster_than.filter(|_| r > 0.0) {
                Some(what) => {
                    s.push_str(&format!(", about {} {what}", speed(r)));
                    if let (Some(l), Some(h)) = (self.ratio_low, self.ratio_high)
                        && l > 0.0
                    {
                        paren.push(format!("likely {}", speed_range(l, h)));
                    }
                }
                None => {
                    s.push_str(&format!(", about {}{unit} {}", fmt_ratio(r), self.against));
                    if let (Some(l), Some(h)) = (self.ratio_low, self.ratio_high) {
                        paren.push(format!("likely {}–{}{unit}", fmt_ratio(l), fmt_ratio(h)));
                    }
                }
            }
            if let Some(b) = self.baseline.as_ref().filter(|b| !b.estimated) {
                paren.push(format!(
                    "the CPU's {} pinned with `cugrade calibrate`",
                    fmt_ms(b.ms)
                ));
            }
            if let Some(n) = self.needs {
                paren.push(match faster_than {
                    Some(_) if n > 0.0 => speed_bar(n),
                    _ => format!("needs {}{unit}", fmt_bar(n)),
                });
            }
            if !paren.is_empty() {
                s.push_str(&format!(" ({})", paren.join("; ")));
            }
            match self.likely() {
                Some(Likely::Fail) => s.push_str(
                    ": likely to fail this bar on a GPU (even the top of the likely range is below it)",
                ),
                Some(Likely::Pass) => s.push_str(": likely to meet this bar on a GPU"),
                Some(Likely::Either) => {
                    s.push_str(": the bar is inside the likely range (could go either way)")
                }
                None => {}
            }
        } else if let (Some(n), Some(why)) = (self.needs, &self.no_ratio) {
            let bar = match faster_than {
                Some(what) if n > 0.0 => format!("{} than {what}", speed_bar(n)),
                _ => format!("needs {}{unit} {}", fmt_bar(n), self.against),
            };
            s.push_str(&format!("; {bar} (no ratio: {why})"));
        }
        s.push_str(&format!(
            "; bound by {}",
            model::limiter_words(&self.limiter)
        ));
        s.push_str("; an estimate, not a grade");
        s
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Estimate {
        Estimate {
            gpu: "H100".into(),
            gpu_id: "h100".into(),
            ms: 0.352,
            low_ms: 0.246,
            high_ms: 0.493,
            ratio: Some(3.4),
            ratio_low: Some(2.43),
            ratio_high: Some(4.86),
            needs: Some(10.0),
            unit: "x".into(),
            against: "faster than the reference `reduce_naive`".into(),
            baseline: None,
            no_ratio: None,
            limiter: "dram".into(),
            bounds: vec![],
            blocks_per_sm: 8,
            occupancy_limiter: "the block size".into(),
            notes: vec![],
            seconds: 1.0,
            profile: model::KernelProfile::default(),
        }
    }

    #[test]
    fn a_kernel_slower_than_its_baseline_is_said_to_be_slower() {
        let mut e = sample();
        (e.ratio, e.ratio_low, e.ratio_high) = (Some(0.11), Some(0.08), Some(0.16));
        let t = e.sentence();
        assert!(
            t.contains(
                "about 9.09x slower than the reference `reduce_naive` (likely 6.25–12.5x \
                 slower; needs 10x faster): likely to fail this bar on a GPU"
            ),
            "{t}"
        );
    }

    /// Ratio, range and bar in one direction (issue 32: "22.2x slower than the reference
    /// (needs 0.5x)").
    #[test]
    fn ratio_range_and_bar_read_in_one_direction() {
        let mut e = sample();
        e.against = "faster than the reference `softmax_rows`".into();
        (e.ratio, e.ratio_low, e.ratio_high, e.needs) =
            (Some(0.045), Some(0.028), Some(0.064), Some(0.5));
        let t = e.sentence();
        assert!(
            t.contains(
                "about 22.2x slower than the reference `softmax_rows` (likely 15.6–35.7x \
                 slower; may be at most 2x slower): likely to fail this bar on a GPU"
            ),
            "{t}"
        );
        (e.ratio, e.ratio_low, e.ratio_high) = (Some(1.0), Some(0.625), Some(1.43));
        let t = e.sentence();
        assert!(
            t.contains(
                "about as fast as the reference `softmax_rows` (likely between 1.60x slower \
                 and 1.43x faster; may be at most 2x slower): likely to meet this bar"
            ),
            "{t}"
        );
        e.needs = Some(1.2);
        assert!(
            e.sentence()
                .contains("needs 1.2x faster): the bar is inside the likely range"),
            "{}",
            e.sentence()
        );
    }

    #[test]
    fn the_sentence_names_gpu_time_range_ratio_bar_and_says_it_is_no_grade() {
        let s = sample().sentence();
        assert_eq!(
            s,
            "estimated on an H100: 0.352 ms (likely 0.246–0.493 ms), about 3.40x faster than \
             the reference `reduce_naive` (likely 2.43–4.86x faster; needs 10x faster): likely \
             to fail this bar on a GPU (even the top of the likely range is below it); bound by \
             DRAM bandwidth; an estimate, not a grade"
        );
        let mut e = sample();
        e.unit = "%".into();
        e.ratio = Some(55.3);
        e.ratio_low = Some(40.0);
        e.ratio_high = Some(61.0);
        e.needs = Some(40.0);
        e.against = "of the device-to-device copy bandwidth".into();
        assert!(
            e.sentence().contains(
                "about 55.3 % of the device-to-device copy bandwidth (likely 40.0–61.0 %; \
                 needs 40 %): likely to meet this bar on a GPU"
            ),
            "{}",
            e.sentence()
        );
        let mut e = sample();
        e.baseline = Some(BaselineEstimate {
            kind: "cpu".into(),
            ms: 14.34,
            estimated: false,
            bytes: None,
            profile: None,
        });
        e.against = "faster than the single-threaded CPU".into();
        assert!(
            e.sentence().contains(
                "about 3.40x faster than the single-threaded CPU (likely 2.43–4.86x faster; \
                 the CPU's 14.3 ms pinned with `cugrade calibrate`; needs 10x faster)"
            ),
            "{}",
            e.sentence()
        );
        let mut e = sample();
        (e.ratio, e.ratio_low, e.ratio_high, e.baseline) = (None, None, None, None);
        e.against = "faster than the single-threaded CPU".into();
        e.no_ratio = Some("why".into());
        assert!(
            e.sentence().contains(
                "; needs 10x faster than the single-threaded CPU (no ratio: why); bound by"
            ),
            "{}",
            e.sentence()
        );
        assert_eq!(e.likely(), None);
    }

    #[test]
    fn times_read_well() {
        assert_eq!(fmt_ms(0.1194), "0.119 ms");
        assert_eq!(fmt_ms(4.4), "4.40 ms");
        assert_eq!(fmt_ms(275.8), "275.8 ms");
        assert_eq!(fmt_ms(1250.0), "1.25 s");
    }

    #[test]
    fn the_range_brackets_the_estimate() {
        let g = gpu::named("h100").unwrap();
        let (lo, hi) = range(1.0, &g, 1.0);
        assert!(lo < 1.0 && hi > 1.0);
        let (lo2, hi2) = range(1.0, &g, 2.0);
        assert!(lo2 < lo && hi2 > hi);
    }
}
