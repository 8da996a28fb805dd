//! The measurement stage: how a kernel's speed is measured, and how a speed becomes points.
//!
//! After nvbench: measuring is separate from what is measured. This module holds the pure parts
//! (statistics, the stopping rule, ratios with confidence intervals, the decision at a tier
//! edge) and the records written to result.json; the timing loop that drives a backend lives in
//! [`session`], and [`lock`] keeps timed sections on one GPU from overlapping. The protocol is
//! described for users in docs/measurement.md.

pub mod calibration;
pub mod clocks;
pub mod decide;
pub mod lock;
pub mod session;
pub mod stats;
pub mod stopping;

pub use stats::{median, relative_spread};

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
    pub ratio: Option<decide::Interval>,
    /// Whether the interval straddled a tier edge and was decided in the student's favour.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub near_edge: Option<f64>,
    /// SM clocks and throttling around the measurement, where NVML could read them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clocks: Option<clocks::ClockRecord>,
    /// How long this check had the GPU to itself, and how long it waited for it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gpu: Option<GpuHold>,
    /// The fastest time the device could possibly reach on this case (bytes / peak bandwidth,
    /// flops / peak), in ms.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub lower_bound_ms: Option<f64>,
    /// The GPU that timed this check (the student's kernel and a paired baseline alike).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub device: Option<crate::backend::GpuRecord>,
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
