//! How a speed was measured on a GPU: the records a performance check carries into result.json
//! (the protocol that fills them is `measure`).

use crate::rubric::schema::CacheMode;
use serde::{Deserialize, Serialize};

/// Why sampling stopped.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StopReason {
    /// The relative noise of the estimate fell under the target (after the minimum samples).
    NoiseTarget,
    /// The case's time budget would be overrun by one more sample.
    Budget,
    /// The sample cap was reached.
    MaxSamples,
}

impl StopReason {
    pub fn describe(self) -> &'static str {
        match self {
            StopReason::NoiseTarget => "noise target met",
            StopReason::Budget => "time budget spent",
            StopReason::MaxSamples => "sample cap reached",
        }
    }
}

/// How a performance check was measured: written into the check in result.json.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Measurement {
    /// Timed launches of the student's kernel (the probe excluded unless it is the only one).
    pub samples: usize,
    pub median_ms: f64,
    pub min_ms: f64,
    /// Relative half-width of the 95 % interval of the estimate the grade uses (the ratio when
    /// there is a baseline, else the kernel's median time).
    pub noise: f64,
    pub noise_target: f64,
    /// Whether `noise <= noise_target`.
    pub target_met: bool,
    pub stop: StopReason,
    pub budget_s: f64,
    pub cache: CacheMode,
    /// The first (probe) launch, which sized the rest.
    pub probe_ms: f64,
    /// Timed launches whose outputs were checked against the reference on the device.
    pub launches_verified: u32,
    /// Every timed launch of the student's kernel, in order (ms).
    pub samples_ms: Vec<f64>,
    /// The baseline the ratio is taken against, when there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineRecord>,
    /// The ratio (or percent) the grade uses, with its interval.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<Interval>,
    /// Whether the interval straddled a tier edge and was decided in the student's favour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub near_edge: Option<f64>,
    /// SM clocks and throttling around the measurement, where NVML could read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clocks: Option<ClockRecord>,
    /// How long this check had the GPU to itself, and how long it waited for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuHold>,
    /// The fastest time the device could possibly reach on this case (bytes / peak bandwidth,
    /// flops / peak), in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_bound_ms: Option<f64>,
    /// The GPU that timed this check (the student's kernel and a paired baseline alike).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<super::launch::GpuRecord>,
}

/// A timed section's share of the GPU: every other job's work on the GPU waits while it runs
/// (`measure::lock`), so these add up to the part of a cohort's wall time that one GPU
/// serialises.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GpuHold {
    /// Waiting for the GPU's timing lock (other timed sections, correctness runs in flight).
    pub waited_s: f64,
    /// Holding it: the timed launches.
    pub held_s: f64,
    /// The worker's setup before the lock was taken (allocations, uploads, input tables),
    /// alongside other jobs' correctness runs.
    pub setup_s: f64,
}

/// The baseline side of a ratio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineRecord {
    /// `cpu`, `cpu_parallel`, `reference:<kernel>`, `cublas`, `copy`.
    pub kind: String,
    pub median_ms: f64,
    /// Measured in the same window as the student's kernel, launch for launch.
    pub paired: bool,
    /// Where a constant baseline came from (`measured now`, `cache FILE`, `calibration FILE`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub source: Option<String>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub cpu: Option<String>,
}

/// An estimate with its 95 % interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub estimate: f64,
    pub lo: f64,
    pub hi: f64,
}

/// One reading of the GPU's state.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockReading {
    pub sm_mhz: u32,
    pub max_sm_mhz: u32,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub temperature_c: Option<u32>,
    /// Throttle reasons that slow a kernel down (idle and application-clock settings are
    /// not listed).
    pub throttle: Vec<String>,
}

/// Readings before and after a measurement.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct ClockRecord {
    pub before: ClockReading,
    pub after: ClockReading,
    /// Whether either reading shows throttling: the measurement may be slow through no fault
    /// of the kernel.
    pub throttled: bool,
}

impl ClockRecord {
    pub fn new(before: ClockReading, after: ClockReading) -> ClockRecord {
        let throttled = !before.throttle.is_empty() || !after.throttle.is_empty();
        ClockRecord {
            before,
            after,
            throttled,
        }
    }

    /// One line for a report, e.g. `SM 1980 → 1755 MHz (max 1980), throttled: sw_power_cap`.
    pub fn describe(&self) -> String {
        let mut s = format!(
            "SM clock {} → {} MHz (max {})",
            self.before.sm_mhz, self.after.sm_mhz, self.after.max_sm_mhz
        );
        if self.throttled {
            let mut r: Vec<&str> = self
                .before
                .throttle
                .iter()
                .chain(&self.after.throttle)
                .map(String::as_str)
                .collect();
            r.sort_unstable();
            r.dedup();
            s.push_str(&format!("; throttled ({})", r.join(", ")));
        }
        s
    }
}
