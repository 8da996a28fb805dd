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

/// cugrade's device kernels (compiled with NVRTC by the parent, loaded into `Slot::Harness`).
pub const HARNESS_SOURCE: &str = include_str!("harness.cu");

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

impl Device<'_> {
    fn draw(&mut self, addr: u64, b: usize, seed: u64) -> Result<(), BackendError> {
        let pb = &self.spec.buffers[b];
        let s = pb.spec;
        match (&pb.draw, self.tables[b]) {
            (Some(g), Some((values, specials))) => {
                self.t.fill(addr, crate::inputs::GUARD_BYTE, s.total())?;
                let params = [
                    ParamValue::Ptr(addr + s.guard as u64),
                    ParamValue::U64((s.bytes / elem_size(pb.elem)) as u64),
                    ParamValue::I32(pb.elem as i32),
                    ParamValue::U64(seed),
                    ParamValue::I32(g.kind.code()),
                    ParamValue::F64(g.a),
                    ParamValue::F64(g.b),
                    ParamValue::Ptr(values),
                    ParamValue::I32(g.values.len() as i32),
                    ParamValue::F64(g.special_fraction),
                    ParamValue::Ptr(specials),
                    ParamValue::I32(g.specials.len() as i32),
                ];
                let n = s.bytes / elem_size(pb.elem);
                self.t
                    .enqueue(Slot::Harness, "cugrade_generate", spread(n), &params)
            }
            _ => self.t.copy(addr, self.pristine[b], s.total()),
        }
    }

    /// Fresh inputs (and re-poisoned outputs) in set `set` for iteration `i`; with `reference`,
    /// the reference's own output copies too.
    fn prepare(&mut self, set: usize, i: u64, reference: bool) -> Result<(), BackendError> {
        for b in 0..self.spec.buffers.len() {
            let pb = &self.spec.buffers[b];
            let is_out = pb.compare.is_some();
            let target = if reference && is_out {
                self.reference[b].unwrap_or(self.sets[set][b])
            } else {
                self.sets[set][b]
            };
            if pb.draw.is_some() || !is_out {
                self.draw(target, b, seed_for(self.spec.seed, i, b))?;
            } else {
                self.t.copy(target, self.pristine[b], pb.spec.total())?;
            }
        }
        Ok(())
    }

    /// Parameters and symbols for a launch in `slot` on set `set`.
    fn params(&mut self, slot: Slot, set: usize) -> Result<Vec<ParamValue>, BackendError> {
        let role = if slot == Slot::Reference {
            Role::Reference
        } else {
            Role::Student
        };
        self.params_for(role, set)
    }

    fn params_for(&mut self, role: Role, set: usize) -> Result<Vec<ParamValue>, BackendError> {
        let slot = if role == Role::Student {
            Slot::Student
        } else {
            Slot::Reference
        };
        let addr = |d: &Device, b: usize| {
            let pb = &d.spec.buffers[b];
            let base = match role {
                Role::Reference if pb.compare.is_some() => d.reference[b].unwrap_or(d.sets[set][b]),
                Role::Magnitude { squares } => {
                    let out = if squares && pb.compare.is_some() {
                        d.squares[b]
                    } else {
                        d.mags[b]
                    };
                    out.unwrap_or(d.sets[set][b])
                }
                _ => d.sets[set][b],
            };
            base + pb.spec.guard as u64
        };
        let own_args = match (&self.spec.student_args, slot) {
            (Some(a), Slot::Student) => Some(a.clone()),
            _ => None,
        };
        for b in 0..self.spec.buffers.len() {
            if own_args.is_some() {
                break;
            }
            if let Some(sym) = self.spec.buffers[b].symbol.clone() {
                let (ptr, size) = self.t.global(slot, &sym)?;
                let bytes = self.spec.buffers[b].spec.bytes.min(size);
                let from = addr(self, b);
                self.t.copy(ptr, from, bytes)?;
            }
        }
        Ok(own_args
            .as_ref()
            .unwrap_or(&self.spec.args)
            .iter()
            .map(|a| match a {
                Arg::Buffer(b) => ParamValue::Ptr(addr(self, *b)),
                Arg::Value(v) => *v,
            })
            .collect())
    }

    /// After the reference's run on set `set`: the reference twice more, on the absolute values
    /// and on the squares of the same inputs, for each output's sums of absolute and squared
    /// terms (`Tolerance::sum`). Outputs drawn as inputs (in/out) are drawn again with launch
    /// `i`'s seed.
    fn magnitudes(&mut self, set: usize, i: u64) -> Result<(), BackendError> {
        for squares in [false, true] {
            for b in 0..self.spec.buffers.len() {
                let Some(m) = self.mags[b] else { continue };
                let pb = self.spec.buffers[b].clone();
                let s = pb.spec;
                let (src, dst) = if pb.compare.is_some() {
                    // An output: its initial contents (an in/out buffer's drawn values).
                    let dst = if squares {
                        self.squares[b].unwrap_or(m)
                    } else {
                        m
                    };
                    if pb.draw.is_some() {
                        self.draw(dst, b, seed_for(self.spec.seed, i, b))?;
                    } else {
                        self.t.copy(dst, self.pristine[b], s.total())?;
                    }
                    (dst, dst)
                } else {
                    (self.sets[set][b], m)
                };
                if elem_type(pb.elem).is_float() {
                    let n = s.bytes / elem_size(pb.elem);
                    self.t.enqueue(
                        Slot::Harness,
                        "cugrade_terms",
                        spread(n),
                        &[
                            ParamValue::Ptr(src + s.guard as u64),
                            ParamValue::Ptr(dst + s.guard as u64),
                            ParamValue::U64(n as u64),
                            ParamValue::I32(pb.elem as i32),
                            ParamValue::I32(i32::from(squares)),
                        ],
                    )?;
                }
            }
            let p = self.params_for(Role::Magnitude { squares }, set)?;
            let r = self.spec.verify.clone();
            enqueue_all(self.t, Slot::Reference, &r.kernel, r.dims, &r.then, &p)?;
        }
        Ok(())
    }

    /// Queue the checks of set `set`'s outputs against the reference's.
    fn compare(&mut self, set: usize) -> Result<usize, BackendError> {
        let mut slot = 0u64;
        for b in 0..self.spec.buffers.len() {
            let pb = self.spec.buffers[b].clone();
            let Some(c) = pb.compare else { continue };
            let s = pb.spec;
            let (got, exp) = (self.sets[set][b], self.reference[b].unwrap_or(0));
            let n = s.bytes / elem_size(pb.elem);
            let result = self.results + (8 * RESULT_WORDS as u64) * (slot / 2);
            let sabs = self.mags[b].map_or(0, |m| m + s.guard as u64);
            let sq = self.squares[b].map_or(0, |m| m + s.guard as u64);
            // An output refilled from its initial contents before every launch: what an
            // unwritten element still holds.
            let initial = if pb.draw.is_none() && self.pristine[b] != 0 {
                self.pristine[b] + s.guard as u64
            } else {
                0
            };
            self.t.enqueue(
                Slot::Harness,
                "cugrade_compare",
                spread(n),
                &[
                    ParamValue::Ptr(got + s.guard as u64),
                    ParamValue::Ptr(exp + s.guard as u64),
                    ParamValue::Ptr(sabs),
                    ParamValue::Ptr(sq),
                    ParamValue::Ptr(initial),
                    ParamValue::U64(n as u64),
                    ParamValue::I32(pb.elem as i32),
                    ParamValue::F64(c.abs),
                    ParamValue::F64(c.rel),
                    ParamValue::F64(c.sum),
                    ParamValue::I64(c.ulp),
                    ParamValue::I32(i32::from(c.exact)),
                    ParamValue::F64(c.coarse_abs),
                    ParamValue::F64(c.coarse_rel),
                    ParamValue::F64(c.coarse_sum),
                    ParamValue::Ptr(result),
                ],
            )?;
            for at in [got, got + (s.guard + s.bytes) as u64] {
                self.t.enqueue(
                    Slot::Harness,
                    "cugrade_guard",
                    spread(s.guard),
                    &[
                        ParamValue::Ptr(at),
                        ParamValue::U64(s.guard as u64),
                        ParamValue::U32(u32::from(crate::inputs::GUARD_BYTE)),
                        ParamValue::Ptr(result + 16),
                    ],
                )?;
            }
            slot += 2;
        }
        Ok(slot as usize)
    }
}

/// The element type numbered `code` by [`elem_code`].
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

impl<'a> Device<'a> {
    /// Allocate and fill what the timed loop uses, in this order: the input sets, the
    /// initial contents, the result words, the sums' scratch, the baseline's operands.
    fn set_up(
        t: &'a mut dyn Timer,
        spec: &'a MeasureSpec,
        buffer_blobs: &[Vec<u8>],
        l2_bytes: usize,
        plan: &LoopPlan,
    ) -> Result<Device<'a>, BackendError> {
        let sets = input_sets(t, spec, l2_bytes)?;
        let initial = initial_contents(t, spec, buffer_blobs)?;
        let results = t.alloc(plan.result_bytes)?;
        let sums = sum_scratch(t, spec, plan.wants_mags)?;
        let operands = baseline_operands(t, spec)?;
        Ok(Device {
            t,
            spec,
            sets,
            reference: initial.reference,
            pristine: initial.pristine,
            tables: initial.tables,
            results,
            mags: sums.mags,
            squares: sums.squares,
            cublas: operands.cublas,
            copy: operands.copy,
        })
    }
}

/// Sets of inputs used in turn, together larger than L2 (at least two, at most eight).
fn input_sets(
    t: &mut dyn Timer,
    spec: &MeasureSpec,
    l2_bytes: usize,
) -> Result<Vec<Vec<u64>>, BackendError> {
    let set_bytes: usize = spec
        .buffers
        .iter()
        .map(|b| b.spec.total())
        .sum::<usize>()
        .max(1);
    let sets_wanted = (2 * l2_bytes).div_ceil(set_bytes).clamp(2, 8);
    let mut sets = Vec::with_capacity(sets_wanted);
    for _ in 0..sets_wanted {
        let mut one = Vec::with_capacity(spec.buffers.len());
        for b in &spec.buffers {
            one.push(t.alloc(b.spec.total())?);
        }
        sets.push(one);
    }
    Ok(sets)
}

/// Per buffer, what the setup places on the device besides the input sets.
struct Initial {
    /// Initial contents (0 for a buffer drawn on the device from an empty blob).
    pristine: Vec<u64>,
    /// The reference's own copy of each output.
    reference: Vec<Option<u64>>,
    /// Each drawn buffer's `values` and `specials`.
    tables: Vec<Option<(u64, u64)>>,
}

/// Each buffer's initial contents uploaded from its blob, the reference's copy of each output
/// and each drawn buffer's tables allocated, buffer by buffer.
fn initial_contents(
    t: &mut dyn Timer,
    spec: &MeasureSpec,
    buffer_blobs: &[Vec<u8>],
) -> Result<Initial, BackendError> {
    let mut initial = Initial {
        pristine: Vec::new(),
        reference: Vec::new(),
        tables: Vec::new(),
    };
    for (b, blob) in spec.buffers.iter().zip(buffer_blobs) {
        // A buffer drawn on the device needs no initial contents from the host (an empty blob).
        let drawn_empty = b.draw.is_some() && blob.is_empty();
        if blob.len() != b.spec.total() && !drawn_empty {
            return Err(BackendError::Other(
                "measure: a buffer blob has the wrong size".into(),
            ));
        }
        if drawn_empty {
            initial.pristine.push(0);
        } else {
            let p = t.alloc(b.spec.total())?;
            t.upload(p, blob)?;
            initial.pristine.push(p);
        }
        initial.reference.push(if b.compare.is_some() {
            Some(t.alloc(b.spec.total())?)
        } else {
            None
        });
        initial.tables.push(match &b.draw {
            Some(g) => Some(draw_tables(t, g)?),
            None => None,
        });
    }
    Ok(initial)
}

/// A drawn buffer's `values` and `specials` on the device, as f64s (one word when empty).
fn draw_tables(t: &mut dyn Timer, g: &GenPlan) -> Result<(u64, u64), BackendError> {
    let pack = |v: &[f64]| v.iter().flat_map(|x| x.to_le_bytes()).collect::<Vec<u8>>();
    let values = t.alloc(8 * g.values.len().max(1))?;
    let specials = t.alloc(8 * g.specials.len().max(1))?;
    if !g.values.is_empty() {
        t.upload(values, &pack(&g.values))?;
    }
    if !g.specials.is_empty() {
        t.upload(specials, &pack(&g.specials))?;
    }
    Ok((values, specials))
}

/// Per buffer, scratch for the sums a tolerance scales with (`mags` and `squares` of
/// [`Device`]).
struct SumScratch {
    mags: Vec<Option<u64>>,
    squares: Vec<Option<u64>>,
}

/// Per buffer, the sums' scratch, filled with guard bytes; `None` where no tolerance needs it.
fn sum_scratch(
    t: &mut dyn Timer,
    spec: &MeasureSpec,
    wants_mags: bool,
) -> Result<SumScratch, BackendError> {
    let mut mags = Vec::with_capacity(spec.buffers.len());
    let mut squares = Vec::with_capacity(spec.buffers.len());
    for b in &spec.buffers {
        let float = elem_type(b.elem).is_float();
        let mut scratch = |wanted: bool| -> Result<Option<u64>, BackendError> {
            if !wanted {
                return Ok(None);
            }
            let m = t.alloc(b.spec.total())?;
            t.fill(m, crate::inputs::GUARD_BYTE, b.spec.total())?;
            Ok(Some(m))
        };
        mags.push(scratch(wants_mags && (b.compare.is_some() || float))?);
        squares.push(scratch(wants_mags && b.compare.is_some())?);
    }
    Ok(SumScratch { mags, squares })
}

/// The baseline's own operands (`cublas` and `copy` of [`Device`]).
struct Operands {
    cublas: Option<[u64; 3]>,
    copy: Option<(u64, u64)>,
}

/// The baseline's own operands: cuBLAS's A, B and C, or a copy's source and destination.
fn baseline_operands(t: &mut dyn Timer, spec: &MeasureSpec) -> Result<Operands, BackendError> {
    let cublas = match spec.baseline {
        BaselinePlan::Cublas { m, n, k } => {
            let (a, b, c) = (
                t.alloc(4 * m * k)?,
                t.alloc(4 * k * n)?,
                t.alloc(4 * m * n)?,
            );
            // Non-zero operands: some hardware runs faster on zeros (docs/labs/matmul.md).
            t.fill(a, 0x3e, 4 * m * k)?;
            t.fill(b, 0x3d, 4 * k * n)?;
            Some([a, b, c])
        }
        _ => None,
    };
    let copy = match spec.baseline {
        BaselinePlan::Copy { bytes } => Some((t.alloc(bytes.max(4))?, t.alloc(bytes.max(4))?)),
        _ => None,
    };
    Ok(Operands { cublas, copy })
}

/// The timed launches, the probe first, until a launch is wrong or the stopping rule (or the
/// probe's cost) ends them; each verified launch's times and estimate go into `report`.
fn time_launches(
    d: &mut Device,
    plan: &LoopPlan,
    report: &mut TimingReport,
) -> Result<(), BackendError> {
    let spec = d.spec;
    let rule = plan.rule;
    let mut last_cost = Duration::ZERO;
    let started = Instant::now();
    let hard_stop = started + 2 * rule.budget;
    for i in 0u64.. {
        let iteration = Instant::now();
        let set = (i as usize) % d.sets.len();
        let limit = (iteration + Duration::from_millis(spec.launch_deadline_ms))
            .min(hard_stop.max(iteration + Duration::from_millis(1)));
        let Launched {
            results,
            student,
            base,
        } = d.iterate(plan, set, i, limit)?;
        if let Some(p) = check_results(d, &results, set, i as u32, (1..=CHAINED).contains(&i))? {
            report.problem = Some(p);
            return Ok(());
        }
        report.verified += 1;
        last_cost = last_cost.max(iteration.elapsed());
        let estimate = match (&spec.baseline, base) {
            (_, Some(b)) => spec.scale * b / student.max(1e-6),
            (BaselinePlan::Constant(ms), None) => spec.scale * ms / student.max(1e-6),
            _ => student,
        };
        if i == 0 {
            report.probe_ms = student;
            // The probe alone: does a second launch fit the budget at all?
            if started.elapsed() + last_cost > rule.budget {
                report.student_ms.push(student);
                report.baseline_ms.extend(base);
                report.estimates.push(estimate);
                report.stop = Some(StopReason::Budget);
                return Ok(());
            }
            continue;
        }
        report.student_ms.push(student);
        report.baseline_ms.extend(base);
        report.estimates.push(estimate);
        let straddles = spec.baseline != BaselinePlan::None
            && Interval::of_median(&report.estimates).straddles(&spec.edges);
        if let Some(stop) = rule.decide(&report.estimates, started.elapsed(), last_cost, straddles)
        {
            report.stop = Some(stop);
            return Ok(());
        }
    }
    Ok(())
}

/// What one iteration's launches left behind.
struct Launched {
    /// The comparison's result words ([`RESULT_WORDS`] per compared buffer).
    results: Vec<u8>,
    /// The student's time, ms.
    student: f64,
    /// The paired baseline's time, ms (GPU baselines only).
    base: Option<f64>,
}

impl Device<'_> {
    /// Iteration `i` on set `set` (steps 1-4 of the module's doc), then the comparison's
    /// result words (waited for until `limit`) and the timed windows' lengths.
    fn iterate(
        &mut self,
        plan: &LoopPlan,
        set: usize,
        i: u64,
        limit: Instant,
    ) -> Result<Launched, BackendError> {
        self.t.clear_marks();
        let (s0, s1) = self.time_student(plan, set, i)?;
        let paired = self.time_baseline(plan, set, i)?;
        self.queue_checks(plan, set, i)?;
        let results = self.t.download(self.results, plan.result_bytes, limit)?;
        let student = self.t.elapsed_ms(s0, s1)?;
        let base = match paired {
            Some((a, b)) => Some(self.t.elapsed_ms(a, b)?),
            None => None,
        };
        Ok(Launched {
            results,
            student,
            base,
        })
    }

    /// Steps 1-2: fresh inputs, poisoned outputs, reset globals, then the student's launch
    /// alone; the marks around it.
    fn time_student(
        &mut self,
        plan: &LoopPlan,
        set: usize,
        i: u64,
    ) -> Result<(usize, usize), BackendError> {
        let spec = self.spec;
        // The first launches after the probe run without the reset: a kernel whose results
        // depend on state kept from an earlier launch (a launch counter, a saved answer) is
        // caught there by the verification; afterwards the reset keeps any such state from
        // helping.
        self.prepare(set, i, false)?;
        if i == 0 || i > CHAINED {
            self.t.restore_globals()?;
        }
        let student_params = self.params(Slot::Student, set)?;
        if plan.cold {
            self.t.flush_l2()?;
        }
        let s0 = self.t.mark()?;
        enqueue_all(
            self.t,
            Slot::Student,
            &spec.kernel,
            spec.dims,
            &spec.then,
            &student_params,
        )?;
        Ok((s0, self.t.mark()?))
    }

    /// Step 3: the paired baseline, on the same inputs (regenerated: the kernel may have
    /// written to them); the marks around it, `None` without a GPU baseline.
    fn time_baseline(
        &mut self,
        plan: &LoopPlan,
        set: usize,
        i: u64,
    ) -> Result<Option<(usize, usize)>, BackendError> {
        let spec = self.spec;
        match &spec.baseline {
            BaselinePlan::Reference(r) => {
                self.prepare(set, i, true)?;
                let p = self.params(Slot::Reference, set)?;
                if plan.cold {
                    self.t.flush_l2()?;
                }
                let b0 = self.t.mark()?;
                enqueue_all(self.t, Slot::Reference, &r.kernel, r.dims, &r.then, &p)?;
                Ok(Some((b0, self.t.mark()?)))
            }
            BaselinePlan::Cublas { m, n, k } => {
                let abc = self.cublas.unwrap_or_default();
                if plan.cold {
                    self.t.flush_l2()?;
                }
                let b0 = self.t.mark()?;
                self.t.enqueue_sgemm(*m, *n, *k, abc)?;
                Ok(Some((b0, self.t.mark()?)))
            }
            BaselinePlan::Copy { bytes } => {
                let (src, dst) = self.copy.unwrap_or_default();
                if plan.cold {
                    self.t.flush_l2()?;
                }
                let b0 = self.t.mark()?;
                self.t.copy(dst, src, *bytes)?;
                Ok(Some((b0, self.t.mark()?)))
            }
            BaselinePlan::None | BaselinePlan::Constant(_) => Ok(None),
        }
    }

    /// Step 4: the expected outputs for this launch's inputs (unless the baseline's run left
    /// them), the sums a tolerance scales with, and the comparison, its result words reset.
    fn queue_checks(&mut self, plan: &LoopPlan, set: usize, i: u64) -> Result<(), BackendError> {
        let spec = self.spec;
        if !plan.same_kernel {
            self.prepare(set, i, true)?;
            let p = self.params(Slot::Reference, set)?;
            let v = &spec.verify;
            enqueue_all(self.t, Slot::Reference, &v.kernel, v.dims, &v.then, &p)?;
        }
        if plan.wants_mags {
            self.magnitudes(set, i)?;
        }
        self.t.fill(self.results, 0, plan.result_bytes)?;
        for k in 0..plan.compared {
            // First-mismatch slots start at u64::MAX.
            self.t
                .fill(self.results + (8 * RESULT_WORDS * k) as u64 + 8, 0xFF, 8)?;
        }
        self.compare(set)?;
        Ok(())
    }
}

/// Read the comparison results of one launch; the first problem, if any.
fn check_results(
    d: &mut Device,
    res: &[u8],
    set: usize,
    launch: u32,
    chained: bool,
) -> Result<Option<Problem>, BackendError> {
    let word = |k: usize| {
        u64::from_le_bytes(<[u8; 8]>::try_from(&res[8 * k..8 * k + 8]).unwrap_or_default())
    };
    let mut slot = 0;
    for b in 0..d.spec.buffers.len() {
        let pb = d.spec.buffers[b].clone();
        if pb.compare.is_none() {
            continue;
        }
        let (mismatches, first, guards) = (word(slot), word(slot + 1), word(slot + 2));
        let (gross, unwritten) = (word(slot + 3), word(slot + 4));
        slot += RESULT_WORDS;
        if guards > 0 {
            return Ok(Some(Problem::StrayWrite {
                launch,
                buffer: pb.name,
                bytes: guards,
            }));
        }
        if mismatches > 0 {
            let w = elem_size(pb.elem);
            let at = pb.spec.guard as u64 + first * w as u64;
            let deadline = Instant::now() + Duration::from_secs(10);
            let got = d.t.download(d.sets[set][b] + at, w, deadline)?;
            let exp =
                d.t.download(d.reference[b].unwrap_or(0) + at, w, deadline)?;
            let expected = read_f64(&exp, pb.elem);
            let mag = match d.mags[b] {
                Some(m) => {
                    let s = read_f64(&d.t.download(m + at, w, deadline)?, pb.elem);
                    let q = match d.squares[b] {
                        Some(q) => read_f64(&d.t.download(q + at, w, deadline)?, pb.elem),
                        None => f64::NAN,
                    };
                    crate::compare::sum_scale(&[expected], &[s], Some(&[q]))[0]
                }
                None => 0.0,
            };
            let bound = pb.compare.map_or(0.0, |c| c.allowance(expected, mag));
            return Ok(Some(Problem::Wrong(WrongLaunch {
                launch,
                buffer: pb.name,
                mismatches,
                index: first,
                got: read_f64(&got, pb.elem),
                expected,
                chained,
                unwritten,
                gross,
                bound,
            })));
        }
    }
    Ok(None)
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
