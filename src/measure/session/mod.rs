//! The timed section on a device: nvbench's cold measurement plus cugrade's anti-cheat rules.
//!
//! Runs inside the student's worker, in one call, for one performance check. Per iteration:
//! 1. fresh inputs: every input buffer is regenerated on the device from a Philox seed unique
//!    to this launch (a pool of input sets, larger in total than L2, used in turn), outputs are
//!    re-poisoned (back to their initial contents), the student's `__device__` globals reset;
//! 2. L2 flushed (unless the case says `cache: warm`), the student's kernel timed alone
//!    between two timestamps;
//! 3. the baseline, if it is a GPU one, timed the same way in the same window on the same
//!    inputs (paired samples: clock and thermal drift affect both alike);
//! 4. outside the timed windows, the inputs regenerated once more (undoing anything the kernel
//!    wrote to them), the reference kernel run on them, and every output compared with the
//!    reference's on the device, guard bytes included: one wrong launch ends the check and
//!    names the launch.
//!
//! The probe and the seven launches after it run without resetting the `__device__` variables
//! in between (after one reset at the start), so a kernel whose results depend on what an
//! earlier launch left behind fails there; every later launch starts from the reset values.
//!
//! The first iteration is the probe: its time sizes the rest through the stopping rule, so a
//! slow kernel gets fewer samples and never more than its budget. Expected outputs exist on
//! the device only after the student's launch of that iteration has finished, and the inputs
//! they belong to are replaced before the next launch, so no launch can use them.

use super::stopping::StoppingRule;
use super::{StopReason, decide::Interval};
use crate::backend::{
    Arg, BackendError, BufferSpec, DeviceFacts, LaunchDims, ParamValue, Slot, Timer,
};
use crate::rubric::schema::CacheMode;
use serde::{Deserialize, Serialize};
use std::time::{Duration, Instant};

mod device;
mod setup;
mod timed;

use timed::time_launches;

/// cugrade's device kernels (compiled with NVRTC by the parent, loaded into `Slot::Harness`).
pub const HARNESS_SOURCE: &str = include_str!("../harness.cu");

/// Element types as the harness kernels number them.
pub fn elem_code(e: crate::rubric::schema::ScalarType) -> u32 {
    use crate::rubric::schema::ScalarType as T;
    match e {
        T::F32 => 0,
        T::F64 => 1,
        T::I32 => 2,
        T::U32 => 3,
        T::I64 => 4,
        T::U64 => 5,
        T::U8 => 6,
        T::I8 => 7,
        T::U16 => 8,
        T::I16 => 9,
        T::F16 => 10,
        T::BF16 => 11,
    }
}

/// How a buffer's contents are drawn on the device (see `cugrade_generate`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct GenPlan {
    pub kind: DrawKind,
    pub a: f64,
    pub b: f64,
    pub values: Vec<f64>,
    pub specials: Vec<f64>,
    pub special_fraction: f64,
}

/// How a buffer's values are drawn on the device (the rubric's `gen`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum DrawKind {
    /// Uniform in `[a, b)`.
    Uniform,
    /// Normal with mean `a`, standard deviation `b`.
    Normal,
    /// Integers in `[a, b)`.
    Int,
    /// `a` everywhere.
    Constant,
    /// `values`, cycled.
    Values,
}

impl DrawKind {
    /// The `kind` argument of `cugrade_generate` (harness.cu).
    pub fn code(self) -> i32 {
        match self {
            DrawKind::Uniform => 0,
            DrawKind::Normal => 1,
            DrawKind::Int => 2,
            DrawKind::Constant => 3,
            DrawKind::Values => 4,
        }
    }
}

/// How an output is compared with the reference's (see `compare::Resolved`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct ComparePlan {
    pub abs: f64,
    pub rel: f64,
    /// -1: no ulp criterion.
    pub ulp: i64,
    pub exact: bool,
    /// Coefficient of each element's sum of absolute terms (`Tolerance::sum`), which the
    /// reference computes from the inputs' absolute values after every timed launch.
    #[serde(default)]
    pub sum: f64,
    /// The coarse band (`compare::Band`): mismatches outside it too are wrong, not imprecise.
    /// Equal to the fine criteria when the tolerance does not depend on the precision.
    #[serde(default)]
    pub coarse_abs: f64,
    #[serde(default)]
    pub coarse_rel: f64,
    #[serde(default)]
    pub coarse_sum: f64,
}

impl ComparePlan {
    /// The device's form of a resolved tolerance.
    pub fn of(r: &crate::compare::Resolved) -> ComparePlan {
        let coarse = r.coarse.unwrap_or(crate::compare::Band {
            abs: r.abs,
            rel: r.rel,
            sum: r.sum,
        });
        ComparePlan {
            abs: r.abs,
            rel: r.rel,
            ulp: r.ulp.map_or(-1, |u| u.min(i64::MAX as u64) as i64),
            exact: r.exact,
            sum: r.sum,
            coarse_abs: coarse.abs,
            coarse_rel: coarse.rel,
            coarse_sum: coarse.sum,
        }
    }

    /// What element `expected` with sum of absolute terms `mag` allows.
    pub fn allowance(&self, expected: f64, mag: f64) -> f64 {
        let m = if mag.is_finite() { mag.abs() } else { 0.0 };
        self.abs + self.rel * expected.abs() + self.sum * m
    }
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PlanBuffer {
    pub name: String,
    pub spec: BufferSpec,
    pub elem: u32,
    /// Inputs: drawn afresh before every launch. `None`: the initial contents every time.
    pub draw: Option<GenPlan>,
    /// Outputs: compared with the reference after every launch.
    pub compare: Option<ComparePlan>,
    /// Set by symbol (`__constant__`) rather than passed.
    pub symbol: Option<String>,
}

/// A kernel of the reference module and its launch.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct RefCall {
    pub kernel: String,
    pub dims: LaunchDims,
    /// A multi-kernel milestone's later launches.
    #[serde(default)]
    pub then: Vec<crate::backend::Then>,
}

/// Queue `kernel` and then `then`'s kernels, in order, on `params`.
fn enqueue_all(
    t: &mut dyn Timer,
    slot: Slot,
    kernel: &str,
    dims: LaunchDims,
    then: &[crate::backend::Then],
    params: &[ParamValue],
) -> Result<(), BackendError> {
    t.enqueue(slot, kernel, dims, params)?;
    for s in then {
        t.enqueue(slot, &s.kernel, s.dims, params)?;
    }
    Ok(())
}

/// What the ratio is taken against.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum BaselinePlan {
    /// No baseline: the kernel's time alone is estimated.
    None,
    /// A time measured elsewhere (the CPU), in ms.
    Constant(f64),
    /// A reference kernel on the same inputs.
    Reference(RefCall),
    /// cuBLAS SGEMM of this size on its own operands.
    Cublas { m: usize, n: usize, k: usize },
    /// A device-to-device copy of this many bytes.
    Copy { bytes: usize },
}

/// One performance check's measurement, as the parent asks for it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct MeasureSpec {
    pub kernel: String,
    pub dims: LaunchDims,
    /// A multi-kernel milestone's later launches, timed with the first as one.
    #[serde(default)]
    pub then: Vec<crate::backend::Then>,
    pub buffers: Vec<PlanBuffer>,
    pub args: Vec<Arg>,
    /// The student's kernel's own arguments where its calling convention differs from the
    /// reference's (Numba: array descriptors; symbols are passed, not set).
    #[serde(default)]
    pub student_args: Option<Vec<Arg>>,
    /// The reference kernel whose outputs every timed launch is checked against.
    pub verify: RefCall,
    pub baseline: BaselinePlan,
    /// estimate = scale × baseline ms / kernel ms (1 for "x", a bytes ratio for "%").
    pub scale: f64,
    pub max_noise: f64,
    pub min_samples: usize,
    pub max_samples: usize,
    pub budget_ms: u64,
    /// Ratio values where points change: sampling continues while the interval straddles one.
    pub edges: Vec<f64>,
    pub cache: CacheMode,
    /// Longest one iteration (probe included) may take.
    pub launch_deadline_ms: u64,
    pub seed: u64,
}

/// A timed launch whose outputs differ from the reference's.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WrongLaunch {
    pub launch: u32,
    pub buffer: String,
    pub mismatches: u64,
    pub index: u64,
    pub got: f64,
    pub expected: f64,
    /// The launch ran without a reset of `__device__` variables since the probe: the
    /// results depend on state the kernel kept from an earlier launch.
    pub chained: bool,
    /// Of the mismatches, elements still holding what the output held before the launch
    /// (NaN poison): the kernel left them unwritten.
    #[serde(default)]
    pub unwritten: u64,
    /// Of the mismatches, those outside the coarse band too: 0 means every wrong element
    /// is merely less precise than the lab's precision allows.
    #[serde(default)]
    pub gross: u64,
    /// What the first mismatching element allowed (`abs + rel*|expected| + sum*S`).
    #[serde(default)]
    pub bound: f64,
}

/// Why the check could not be completed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Problem {
    /// Launch `launch` (0 = the probe) produced wrong values.
    Wrong(WrongLaunch),
    /// Launch `launch` wrote outside its output.
    StrayWrite {
        launch: u32,
        buffer: String,
        bytes: u64,
    },
    /// The device failed (fault, timeout, launch refused) at `launch`.
    Failed { launch: u32, error: BackendError },
}

/// What the worker sends back.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct TimingReport {
    pub probe_ms: f64,
    /// Student times after the probe (or the probe alone when no second launch fit).
    pub student_ms: Vec<f64>,
    /// Paired baseline times, one per student sample (GPU baselines only).
    pub baseline_ms: Vec<f64>,
    /// The values the grade uses: ratios (× scale), or the student times without a baseline.
    pub estimates: Vec<f64>,
    pub stop: Option<StopReason>,
    /// Timed launches whose outputs matched the reference.
    pub verified: u32,
    pub problem: Option<Problem>,
    pub facts: DeviceFacts,
    /// The whole request, setup and the wait for the parent's go included.
    pub seconds: f64,
    /// Seconds of setup before the timed launches (module loads, allocations, uploads),
    /// done before the parent takes the GPU's timing lock.
    #[serde(default)]
    pub setup_s: f64,
}

/// Launches after the probe that run without resetting the student's `__device__` variables.
pub const CHAINED: u64 = 7;

/// Result words (u64) per compared buffer.
const RESULT_WORDS: usize = 6;

/// Whose buffers a launch's parameters point at.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Role {
    Student,
    /// The reference: outputs in its own copies.
    Reference,
    /// The reference on the inputs' absolute values (or squares), writing each output's sums
    /// of absolute terms (`mags`) or of squared terms (`squares`).
    Magnitude {
        squares: bool,
    },
}

/// Per-launch seed of buffer `b` at iteration `i` (SplitMix64 of the mix).
fn seed_for(seed: u64, i: u64, b: usize) -> u64 {
    let mut z = seed
        ^ i.wrapping_mul(0x9E37_79B9_7F4A_7C15)
        ^ (b as u64).wrapping_mul(0xD1B5_4A32_D192_ED03);
    z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
    z ^ (z >> 31)
}

/// A grid for the harness's grid-stride kernels.
fn spread(n: usize) -> LaunchDims {
    LaunchDims {
        grid: [(n.div_ceil(256)).clamp(1, 4096) as u32, 1, 1],
        block: [256, 1, 1],
        shared_bytes: 0,
    }
}

struct Device<'a> {
    t: &'a mut dyn Timer,
    spec: &'a MeasureSpec,
    /// Per set, per buffer: the allocation's address.
    sets: Vec<Vec<u64>>,
    /// The reference's own copies of outputs (and in/out buffers).
    reference: Vec<Option<u64>>,
    /// Initial contents of each buffer (whole allocation).
    pristine: Vec<u64>,
    /// Per generated buffer: the `values` and `specials` arrays on the device.
    tables: Vec<Option<(u64, u64)>>,
    /// Per compared buffer, [`RESULT_WORDS`] words: mismatches, first index, guard bytes,
    /// mismatches outside the coarse band, unwritten mismatches.
    results: u64,
    /// Per buffer, where the runs that compute each output's sums of absolute and of squared
    /// terms (`compare::sum_scale`) read and write: float inputs' absolute values (then squares),
    /// outputs' sums of absolute terms. `None`: no tolerance needs them, or an integer input
    /// (read where it is).
    mags: Vec<Option<u64>>,
    /// Per output, its sums of squared terms.
    squares: Vec<Option<u64>>,
    cublas: Option<[u64; 3]>,
    copy: Option<(u64, u64)>,
}

fn elem_type(code: u32) -> crate::rubric::schema::ScalarType {
    crate::rubric::schema::ScalarType::ALL
        .into_iter()
        .find(|t| elem_code(*t) == code)
        .unwrap_or(crate::rubric::schema::ScalarType::U64)
}

fn elem_size(code: u32) -> usize {
    elem_type(code).size()
}

fn read_f64(bytes: &[u8], elem: u32) -> f64 {
    let t = elem_type(elem);
    crate::inputs::decode(bytes.get(..t.size()).unwrap_or(&[]), t)
        .first()
        .copied()
        .unwrap_or(f64::NAN)
}

/// Run the timed section. `blobs`: the reference PTX, the harness PTX, then every buffer's
/// initial allocation (guards included) in `spec.buffers` order; empty for a buffer drawn on the
/// device. Device failures end up in
/// `problem`; an `Err` is a failure of the set-up itself.
pub fn run(
    t: &mut dyn Timer,
    spec: &MeasureSpec,
    blobs: &[Vec<u8>],
    gate: &mut dyn FnMut() -> Result<(), BackendError>,
) -> TimingReport {
    let started = Instant::now();
    let mut report = TimingReport::default();
    let outcome = measure(t, spec, blobs, gate, &mut report);
    if let Err(error) = outcome {
        report.problem = Some(Problem::Failed {
            launch: report.verified,
            error,
        });
    }
    report.seconds = started.elapsed().as_secs_f64();
    report
}

/// Set up (modules, allocations, uploads, input tables), pass `gate` (the worker tells the
/// parent it is ready and waits until the parent holds the GPU's timing lock), then time.
fn measure(
    t: &mut dyn Timer,
    spec: &MeasureSpec,
    blobs: &[Vec<u8>],
    gate: &mut dyn FnMut() -> Result<(), BackendError>,
    report: &mut TimingReport,
) -> Result<(), BackendError> {
    let set_up = Instant::now();
    let text = |i: usize| String::from_utf8_lossy(blobs.get(i).map_or(&[][..], |b| b)).into_owned();
    if blobs.len() != spec.buffers.len() + 2 {
        return Err(BackendError::Other("measure: wrong number of blobs".into()));
    }
    t.load_slot(Slot::Reference, &text(0))?;
    t.load_slot(Slot::Harness, &text(1))?;
    report.facts = t.facts()?;
    let plan = LoopPlan::of(spec);
    let mut d = Device::set_up(t, spec, &blobs[2..], report.facts.l2_bytes, &plan)?;
    report.setup_s = set_up.elapsed().as_secs_f64();
    // Setup done: the parent takes the GPU for the timed launches (the budget starts now).
    gate()?;
    time_launches(&mut d, &plan, report)
}

/// What every iteration of the timed loop reads, fixed by the spec before the setup.
struct LoopPlan {
    rule: StoppingRule,
    /// The baseline is the verifying kernel: its paired run leaves the expected outputs.
    same_kernel: bool,
    /// The L2 cache is flushed before each timed window (`cache: cold`).
    cold: bool,
    /// Some output's tolerance scales with its sums of absolute terms (`mags`).
    wants_mags: bool,
    /// Outputs compared with the reference's.
    compared: usize,
    /// Size of the comparison's result words ([`RESULT_WORDS`] per compared buffer, at least
    /// one buffer's worth).
    result_bytes: usize,
}

impl LoopPlan {
    /// The loop `spec` asks for.
    fn of(spec: &MeasureSpec) -> LoopPlan {
        let compared = spec.buffers.iter().filter(|b| b.compare.is_some()).count();
        LoopPlan {
            rule: StoppingRule {
                max_noise: spec.max_noise,
                min_samples: spec.min_samples.max(1),
                max_samples: spec.max_samples.max(1),
                budget: Duration::from_millis(spec.budget_ms),
            },
            same_kernel: matches!(&spec.baseline, BaselinePlan::Reference(r) if *r == spec.verify),
            cold: spec.cache == CacheMode::Cold,
            // Each output's sum of absolute terms, where a tolerance scales with it.
            wants_mags: spec
                .buffers
                .iter()
                .filter_map(|b| b.compare)
                .any(|c| c.sum > 0.0 || c.coarse_sum > 0.0),
            compared,
            result_bytes: 8 * RESULT_WORDS * compared.max(1),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn seeds_differ_per_launch_and_buffer() {
        let s: std::collections::BTreeSet<u64> = (0..100)
            .flat_map(|i| (0..3).map(move |b| seed_for(7, i, b)))
            .collect();
        assert_eq!(s.len(), 300);
        assert_eq!(seed_for(7, 3, 1), seed_for(7, 3, 1));
        assert_ne!(seed_for(7, 3, 1), seed_for(8, 3, 1));
    }
}
