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

use model::KernelProfile;
use serde::{Deserialize, Serialize};

/// What a speed estimate found for one performance check (result.json's `estimate`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The modelled GPU's short name ("H100") and its data file id ("h100").
    pub gpu: String,
    pub gpu_id: String,
    /// The kernel's estimated time and its likely range, ms.
    pub ms: f64,
    pub low_ms: f64,
    pub high_ms: f64,
    /// The bar's quantity (a speed-up, a percent of copy bandwidth) and its likely range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_low: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_high: Option<f64>,
    /// The bar (`min`) and its unit (`x`, `%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs: Option<f64>,
    pub unit: String,
    /// What the ratio is taken against, in words ("the reference `reduce_naive`").
    pub against: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineEstimate>,
    /// Why there is no ratio although the bar has one (a CPU baseline that is not pinned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_ratio: Option<String>,
    /// The bound that dominates: `compute`, `l1`, `latency`, `l2`, `dram`, `atomics`.
    pub limiter: String,
    /// Every bound, ms.
    pub bounds: Vec<(String, f64)>,
    /// Resident blocks per SM on the modelled GPU, and what limits them.
    pub blocks_per_sm: u32,
    pub occupancy_limiter: String,
    /// Caveats that widen the range or qualify the number.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Seconds the estimate took (emulation included).
    pub seconds: f64,
    /// The model's inputs, kept so that the model can be re-fitted without emulating again.
    pub profile: KernelProfile,
}

/// The baseline side of an estimated ratio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineEstimate {
    /// `cpu`, `cpu_parallel`, `reference:<kernel>`, `cublas`, `copy`.
    pub kind: String,
    pub ms: f64,
    /// Whether `ms` is the model's (a GPU baseline) or pinned for the course (the CPU).
    pub estimated: bool,
    /// A device copy's bytes (read once and written once), for `copy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<KernelProfile>,
}

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

impl Estimate {
    /// One sentence for every report format: "estimated on an H100: 0.352 ms (likely
    /// 0.246–0.493 ms), about 3.40x faster than the reference `reduce_naive` (needs 10x);
    /// bound by DRAM bandwidth; an estimate, not a grade".
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
        if let Some(r) = self.ratio {
            let unit = if self.unit == "%" { " %" } else { "x" };
            // "about 0.11x faster than" reads as a speed-up: say how many times slower.
            match self.against.strip_prefix("faster than ") {
                Some(what) if unit == "x" && r > 0.0 && r < 1.0 => s.push_str(&format!(
                    ", about {}x slower than {what}",
                    fmt_ratio(1.0 / r)
                )),
                _ => s.push_str(&format!(", about {}{unit} {}", fmt_ratio(r), self.against)),
            }
            let mut paren = Vec::new();
            if let Some(b) = self.baseline.as_ref().filter(|b| !b.estimated) {
                paren.push(format!("the CPU's {} pinned for the course", fmt_ms(b.ms)));
            }
            if let Some(n) = self.needs {
                paren.push(format!("needs {n}{unit}"));
            }
            if !paren.is_empty() {
                s.push_str(&format!(" ({})", paren.join("; ")));
            }
        } else if let (Some(n), Some(why)) = (self.needs, &self.no_ratio) {
            let unit = if self.unit == "%" { " %" } else { "x" };
            s.push_str(&format!(
                "; needs {n}{unit} {} (no ratio: {why})",
                self.against
            ));
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
            profile: KernelProfile::default(),
        }
    }

    #[test]
    fn a_kernel_slower_than_its_baseline_is_said_to_be_slower() {
        let mut e = sample();
        e.ratio = Some(0.11);
        let t = e.sentence();
        assert!(
            t.contains("about 9.09x slower than the reference `reduce_naive` (needs 10x)"),
            "{t}"
        );
    }

    #[test]
    fn the_sentence_names_gpu_time_range_ratio_bar_and_says_it_is_no_grade() {
        let s = sample().sentence();
        assert_eq!(
            s,
            "estimated on an H100: 0.352 ms (likely 0.246–0.493 ms), about 3.40x faster than the reference `reduce_naive` (needs 10x); bound by DRAM bandwidth; an estimate, not a grade"
        );
        let mut e = sample();
        e.unit = "%".into();
        e.ratio = Some(55.3);
        e.ratio_low = Some(40.0);
        e.ratio_high = Some(61.0);
        e.needs = Some(40.0);
        e.against = "of the device-to-device copy bandwidth".into();
        assert!(
            e.sentence()
                .contains("about 55.3 % of the device-to-device copy bandwidth (needs 40 %)")
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
                "about 3.40x faster than the single-threaded CPU (the CPU's 14.3 ms pinned for the course; needs 10x)"
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
