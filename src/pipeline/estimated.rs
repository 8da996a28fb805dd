//! Performance checks without a GPU: the speed estimate (docs/estimate.md). The seam between
//! grading and `crate::estimate`, called once from the performance stage on the emulator
//! backend. The check stays skipped (its points provisional, as without an estimate); its
//! message and `estimate` say what the kernel would likely take on the modelled GPU, and the
//! ratio against the same baseline a GPU run would use: the reference kernel and cuBLAS and a
//! device copy estimated by the same model, a CPU baseline only where pinned for the course.

use super::baselines::{BaselineChoice, baseline};
use super::context::{Ctx, Kernel, Student};
use super::reference::{Reference, RunKey};
use super::run::student_invocation;
use crate::backend::LaunchDims;
use crate::backend::emu::cost::CostConfig;
use crate::estimate::gpu::Gpu;
use crate::estimate::model::{self, KernelProfile};
use crate::estimate::sample::{self, EstimateSpec};
use crate::estimate::{self, BaselineEstimate, Estimate};
use crate::inputs;
use crate::inputs::Invocation;
use crate::measure::session::BaselinePlan;
use crate::result::{Check, CheckKind};
use crate::rubric::plan::{CasePlan, PerfPlan};
use crate::rubric::schema::Against;
use std::time::{Duration, Instant};

const NOT_MEASURED: &str =
    "speed is not measured on the PTX emulator: grade on a GPU (--backend cuda) for this check";
const NOT_MEASURED_AFTER: &str = "Speed is not measured on the PTX emulator: grade on a GPU (--backend cuda) for this check's points";

/// Why a bar against the CPU has no estimated ratio: said short per check, and once for the
/// run with what the student can do ([`no_cpu_ratio_note`]).
pub(super) const NO_CPU_PIN: &str = "the bar is against the grading machine's CPU, not timed here";

/// How long one kernel's profile may emulate (a few seconds normally; a kernel that serialises
/// a whole case in one thread takes longer, one whose sampled blocks wait for other blocks
/// never finishes).
const PROFILE_LIMIT: Duration = Duration::from_secs(30);

/// The performance check `p` on the emulator: skipped, with an estimate when the kernel is
/// correct and the estimate could be made.
pub(super) fn check(
    ctx: &Ctx,
    kernel: &Kernel,
    reference: &mut Reference,
    student: &mut Student,
    p: &PerfPlan,
    correct: bool,
) -> Check {
    let skipped = |why: String| {
        Check::skipped(CheckKind::Performance, p.spec.name.clone(), why)
            .with_case(p.spec.case.clone())
    };
    if ctx.opts.estimate_gpu == crate::estimate::gpu::NONE {
        return skipped(NOT_MEASURED.to_string());
    }
    if !correct {
        return skipped(format!(
            "{NOT_MEASURED} (not estimated either: the kernel is not correct yet)"
        ));
    }
    let started = Instant::now();
    match estimate(ctx, kernel, reference, student, p) {
        Ok(mut e) => {
            e.seconds = started.elapsed().as_secs_f64();
            let mut c = skipped(format!("{}. {NOT_MEASURED_AFTER}", e.sentence()));
            // Far below the bar: what usually helps a kernel bound like this one, and the lab's
            // own hint. The check stays skipped: an estimate is never a grade.
            if e.likely() == Some(crate::estimate::Likely::Fail) {
                let advice = model::limiter_advice(&e.limiter);
                c.hint = Some(match ctx.plan.milestone.hint.as_deref() {
                    Some(lab) => format!("{advice} The lab's hint: {}", lab.trim()),
                    None => advice.to_string(),
                });
            }
            c.threshold = e.needs;
            c.unit = Some(e.unit.clone());
            c.seconds = Some(e.seconds);
            c.estimate = Some(Box::new(e));
            c
        }
        Err(why) => skipped(format!("{NOT_MEASURED} (no estimate: {why})")),
    }
}

fn trace(what: &str, since: Instant) {
    if std::env::var_os("CUGRADE_ESTIMATE_TRACE").is_some() {
        eprintln!("estimate: {what} {:?}", since.elapsed());
    }
}

fn estimate(
    ctx: &Ctx,
    kernel: &Kernel,
    reference: &mut Reference,
    student: &mut Student,
    p: &PerfPlan,
) -> Result<Estimate, String> {
    let g = estimate::gpu::named(&ctx.opts.estimate_gpu)?;
    let case = p
        .case
        .as_ref()
        .ok_or_else(|| format!("unknown case {}", p.spec.case))?;
    let dims = case
        .launch
        .clone()
        .and_then(|d| inputs::check_limits(&d, kernel.info.max_threads_per_block).map(|()| d))?;
    // The inputs a GPU run times the kernel on (the same generator and seed).
    let t0 = Instant::now();
    let inv = case.args().and_then(|a| {
        inputs::generate_described(a, inputs::trial_seed(ctx.opts.seed, &case.name, 0))
    })?;
    trace("inputs", t0);
    let registers = ctx
        .compiled
        .iter()
        .find(|k| k.name == ctx.plan.kernel)
        .map(|k| k.registers)
        .filter(|&r| r > 0);
    let shared = kernel.info.static_shared_bytes + dims.shared_bytes;
    let first = (ctx.plan.kernel.as_str(), dims, shared, registers);
    let mut profile = student_profile(ctx, kernel, reference, student, first, &inv, &g)?;
    profile.registers = registers;
    let mut t = model::time(&profile, &g);
    let (mut notes, mut widen) = notes(&profile, registers);
    let then = ctx.plan.then(case)?;
    if !then.is_empty() {
        let later = (kernel, &then[..], &inv, &g);
        later_kernels(ctx, reference, student, later, &mut t, &mut profile)?;
        notes.push(format!(
            "{} kernels estimated one by one, each on the case's inputs as drawn rather than on the previous kernel's outputs, and their times added",
            then.len() + 1
        ));
        widen *= 1.3;
    }
    let (low_ms, high_ms) = estimate::range(t.ms, &g, widen);
    let mut e = Estimate {
        gpu: g.name.clone(),
        gpu_id: g.id.clone(),
        ms: t.ms,
        low_ms,
        high_ms,
        ratio: None,
        ratio_low: None,
        ratio_high: None,
        needs: Some(p.bar),
        unit: "x".into(),
        against: String::new(),
        baseline: None,
        no_ratio: None,
        limiter: t.limiter,
        bounds: t.bounds,
        blocks_per_sm: t.blocks_per_sm,
        occupancy_limiter: t.occupancy_limiter,
        notes,
        seconds: 0.0,
        profile,
    };
    // A CPU baseline timed here would make the report depend on this machine (and on the
    // run): only one pinned for the course (`cugrade calibrate`) gives a ratio.
    if let Some(words) = unpinned_cpu(ctx, &p.spec.against, case) {
        e.against = words;
        e.no_ratio = Some(NO_CPU_PIN.into());
        return Ok(e);
    }
    let t0 = Instant::now();
    let choice = baseline(ctx, reference, p, case, &inv)?;
    trace("baseline choice", t0);
    let base = baseline_estimate(ctx, reference, &choice, &inv, &g)?;
    let ratio = |ms: f64| base.as_ref().map(|b| choice.scale * b.ms / ms.max(1e-12));
    e.ratio = ratio(t.ms);
    e.ratio_low = ratio(high_ms);
    e.ratio_high = ratio(low_ms);
    e.unit = choice.unit.to_string();
    e.against = against_words(&choice.what);
    e.baseline = base;
    Ok(e)
}

/// The student kernel's profile on the case's inputs `inv`, emulated (sampled) in the
/// student's worker; a milestone's checks on one case share it.
/// A multi-kernel milestone's later kernels, estimated as the first was: their times added to
/// `t`, whose limiter and `profile` become the slowest kernel's.
fn later_kernels(
    ctx: &Ctx,
    reference: &mut Reference,
    student: &mut Student,
    (kernel, then, inv, g): (&Kernel, &[crate::backend::Then], &Invocation, &Gpu),
    t: &mut model::Breakdown,
    profile: &mut KernelProfile,
) -> Result<(), String> {
    let mut total_ms = t.ms;
    for step in then {
        let static_shared = student
            .worker
            .as_mut()
            .and_then(|w| w.kernel_info(&step.kernel, Duration::from_secs(30)).ok())
            .and_then(Result::ok)
            .map_or(0, |i| i.static_shared_bytes);
        let regs = ctx
            .compiled
            .iter()
            .find(|k| k.name == step.kernel)
            .map(|k| k.registers)
            .filter(|&r| r > 0);
        let this = (
            step.kernel.as_str(),
            step.dims,
            static_shared + step.dims.shared_bytes,
            regs,
        );
        let mut p = student_profile(ctx, kernel, reference, student, this, inv, g)?;
        p.registers = regs;
        let tt = model::time(&p, g);
        total_ms += tt.ms;
        if tt.ms > t.ms {
            *t = tt;
            *profile = p;
        }
    }
    t.ms = total_ms;
    Ok(())
}

/// `launch`: the kernel's name, its launch, its shared memory (static and dynamic) and its
/// registers where ptxas said.
fn student_profile(
    ctx: &Ctx,
    kernel: &Kernel,
    reference: &mut Reference,
    student: &mut Student,
    launch: (&str, LaunchDims, u32, Option<u32>),
    inv: &Invocation,
    g: &Gpu,
) -> Result<KernelProfile, String> {
    let (name, dims, shared, registers) = launch;
    let contract = &ctx.plan.contract;
    let student_inv = student_invocation(&kernel.numba, inv, contract).map_err(|e| e.0)?;
    let worker = student
        .worker
        .as_mut()
        .ok_or("the worker stopped earlier")?;
    let zeroed = zeroed_outputs(&student_inv, contract);
    // The module, and what it runs on: one kernel name in two milestones under two contracts
    // runs on other inputs (issue 33).
    let key = {
        use sha2::Digest;
        let h = sha2::Sha256::digest(kernel.ptx.as_bytes());
        let hex: String = h[..12].iter().map(|b| format!("{b:02x}")).collect();
        let run = RunKey::of_sent(name, &student_inv, dims, &[], &zeroed);
        format!("student {hex}|{}|{}", run.hex(), g.id)
    };
    let cached = reference
        .estimates
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&key)
        .cloned();
    let t0 = Instant::now();
    let got = match cached {
        Some(r) => r,
        None => {
            let r = profile_on(
                worker,
                g,
                name,
                dims,
                &student_inv,
                &zeroed,
                kernel.ptx,
                registers,
                shared,
            );
            if !worker.is_alive() {
                student.worker = None;
            }
            reference
                .estimates
                .lock()
                .unwrap_or_else(|p| p.into_inner())
                .insert(key, r.clone());
            r
        }
    };
    trace("student profile", t0);
    got
}

/// What the estimate says of its own precision, and how much its range widens for it.
fn notes(profile: &KernelProfile, registers: Option<u32>) -> (Vec<String>, f64) {
    let mut notes = Vec::new();
    let mut widen = 1.0;
    if registers.is_none() {
        notes.push(format!(
            "registers per thread unknown (no ptxas report for PTX or Numba kernels): {} assumed for occupancy",
            model::DEFAULT_REGISTERS
        ));
        widen *= 1.15;
    }
    if profile.communicating && profile.sampled < profile.blocks {
        notes.push(
            "blocks exchange values through global atomics and only a sample of them was emulated: the estimate is rough".into(),
        );
        widen *= 1.6;
    }
    if profile.sampled < profile.blocks {
        notes.push(format!(
            "{} of {} blocks emulated, scaled to the grid",
            profile.sampled, profile.blocks
        ));
    }
    (notes, widen)
}

/// The baseline's time by the same model (the reference kernel, cuBLAS, a device copy), or as
/// pinned (a CPU).
fn baseline_estimate(
    ctx: &Ctx,
    reference: &mut Reference,
    choice: &BaselineChoice,
    inv: &Invocation,
    g: &Gpu,
) -> Result<Option<BaselineEstimate>, String> {
    Ok(match &choice.plan {
        BaselinePlan::None => None,
        BaselinePlan::Constant(ms) => Some(BaselineEstimate {
            kind: choice
                .record
                .as_ref()
                .map_or("cpu".into(), |r| r.kind.clone()),
            ms: *ms,
            estimated: false,
            bytes: None,
            profile: None,
        }),
        BaselinePlan::Reference(call) => {
            let prof = reference_profile(ctx, reference, &call.kernel, call.dims, inv, g)?;
            // A multi-kernel reference: its later kernels' times added.
            let mut ms = model::time(&prof, g).ms;
            for s in &call.then {
                let p = reference_profile(ctx, reference, &s.kernel, s.dims, inv, g)?;
                ms += model::time(&p, g).ms;
            }
            Some(BaselineEstimate {
                kind: format!("reference:{}", call.kernel),
                ms,
                estimated: true,
                bytes: None,
                profile: Some(prof),
            })
        }
        BaselinePlan::Cublas { m, n, k } => Some(BaselineEstimate {
            kind: "cublas".into(),
            ms: model::cublas_ms(*m as f64, *n as f64, *k as f64, g),
            estimated: true,
            bytes: None,
            profile: None,
        }),
        BaselinePlan::Copy { bytes } => Some(BaselineEstimate {
            kind: "copy".into(),
            ms: model::copy_ms(*bytes as f64, g),
            estimated: true,
            bytes: Some(*bytes as f64),
            profile: None,
        }),
    })
}

/// For a bar against the CPU whose baseline is not pinned for the course (no
/// `<rubric>.calibration.json` entry): the bar's words ("faster than the single-threaded
/// CPU"). The CPU is then not timed at all.
fn unpinned_cpu(ctx: &Ctx, against: &Against, case: &CasePlan) -> Option<String> {
    let (what, label) = match against {
        Against::Cpu => ("cpu", "single-threaded CPU"),
        Against::CpuParallel => ("cpu_parallel", "multi-threaded CPU"),
        _ => return None,
    };
    let what = match &ctx.plan.contract.cpu {
        Some(imp) => super::baselines::cpu_key_what(what, imp, &ctx.rubric.path),
        None => what.to_string(),
    };
    let key =
        crate::measure::calibration::key(&ctx.rubric.assignment, &what, &case.name, &case.ints);
    if crate::measure::calibration::pinned(&ctx.rubric.path, &key).is_some() {
        return None;
    }
    Some(format!("faster than the {label}"))
}

/// A reference kernel's profile on a case, emulated in the reference's worker once per run (a
/// cohort shares it).
fn reference_profile(
    ctx: &Ctx,
    reference: &mut Reference,
    kernel: &str,
    dims: LaunchDims,
    inv: &Invocation,
    g: &Gpu,
) -> Result<KernelProfile, String> {
    let zeroed = zeroed_outputs(inv, &ctx.plan.contract);
    // What the profile is of: the kernel on these inputs (the contract's generators, the
    // case's variables, the seed) with this launch. By kernel and case alone, two milestones
    // that time one reference kernel under two contracts shared a profile (issue 33).
    let key = format!(
        "reference {}|{}",
        RunKey::of_sent(kernel, inv, dims, &[], &zeroed).hex(),
        g.id
    );
    let cached = reference
        .estimates
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .get(&key)
        .cloned();
    if let Some(r) = cached {
        return r;
    }
    let registers = reference
        .resources
        .iter()
        .find(|k| k.name == kernel)
        .map(|k| k.registers)
        .filter(|&r| r > 0);
    let ptx = reference.ptx.clone();
    let r = match reference.worker() {
        Ok(w) => {
            // The reference's static shared memory, as its own module says.
            let shared = match w.kernel_info(kernel, Duration::from_secs(30)) {
                Ok(Ok(i)) => i.static_shared_bytes,
                _ => 0,
            } + dims.shared_bytes;
            profile_on(w, g, kernel, dims, inv, &zeroed, &ptx, registers, shared).map(|mut p| {
                p.registers = registers;
                p
            })
        }
        Err(e) => Err(e.0),
    };
    if reference.worker.as_mut().is_some_and(|w| !w.is_alive()) {
        reference.worker = None;
    }
    let r = r.map_err(|e| format!("the reference `{kernel}` could not be estimated: {e}"));
    reference
        .estimates
        .lock()
        .unwrap_or_else(|p| p.into_inner())
        .insert(key, r.clone());
    r
}

/// "faster than the reference `k`" stays; a CPU baseline's measured time in the words is
/// dropped (the estimate names it separately).
fn against_words(what: &str) -> String {
    match what.find(" (") {
        Some(i)
            if what.starts_with("faster than the single")
                || what.starts_with("faster than the multi") =>
        {
            what[..i].to_string()
        }
        _ => what.to_string(),
    }
}

/// Per buffer: whether it is an output whose first contents do not matter (no `init`): the
/// worker starts it zeroed instead of receiving it.
fn zeroed_outputs(inv: &Invocation, contract: &crate::rubric::schema::Contract) -> Vec<bool> {
    use crate::rubric::schema::Direction;
    inv.buffers
        .iter()
        .map(|b| {
            contract
                .params
                .iter()
                .find(|p| p.name == b.name)
                .is_some_and(|p| p.dir == Direction::Out && p.init.is_none())
        })
        .collect()
}

/// Profile `kernel` of `ptx` on `inv` in `worker` (the emulator there, sampled).
#[allow(clippy::too_many_arguments)]
fn profile_on(
    worker: &mut crate::worker::Client,
    g: &Gpu,
    kernel: &str,
    dims: LaunchDims,
    inv: &Invocation,
    zeroed: &[bool],
    ptx: &str,
    registers: Option<u32>,
    shared: u32,
) -> Result<KernelProfile, String> {
    let occ = g.occupancy(
        dims.threads_per_block() as u32,
        registers.unwrap_or(model::DEFAULT_REGISTERS),
        shared,
    );
    // The L1 beside the resident blocks' shared memory, shared by those blocks.
    let blocks = occ.blocks.max(1);
    let l1_total = g.l1_shared_per_sm.value as u64;
    let reserved = blocks as u64 * (shared as u64 + g.shared_reserved_per_block.value as u64);
    let l1_bytes = (l1_total.saturating_sub(reserved).max(16 << 10) / blocks as u64) as u32;
    let spec = EstimateSpec {
        kernel: kernel.to_string(),
        dims,
        args: inv.args.clone(),
        // The payloads alone: no guard zones (the emulator checks bounds itself), no copies.
        buffers: inv
            .buffers
            .iter()
            .map(|b| crate::backend::BufferSpec {
                bytes: b.bytes(),
                guard: 0,
            })
            .collect(),
        // Inputs travel as their generators: the worker draws what the sampled blocks read.
        fills: inv.buffers.iter().map(|b| b.fill.clone()).collect(),
        symbols: inv.symbols.clone(),
        cost: CostConfig {
            latencies: g.latencies(),
            l1_bytes,
        },
        budget: sample::BUDGET,
        deadline_ms: PROFILE_LIMIT.as_millis() as u64,
    };
    let mut blobs: Vec<&[u8]> = vec![ptx.as_bytes()];
    blobs.extend(
        inv.buffers
            .iter()
            .zip(zeroed.iter().chain(std::iter::repeat(&false)))
            .map(|(b, &z)| if z { &[][..] } else { b.data.as_slice() }),
    );
    let bytes: usize = blobs.iter().map(|b| b.len()).sum();
    let timeout =
        PROFILE_LIMIT + Duration::from_secs(10) + Duration::from_millis((bytes / 100_000) as u64);
    match worker.estimate(spec, &blobs, timeout) {
        Ok(p) => p,
        Err(f) => Err(format!("the worker failed: {f}")),
    }
}

/// The run's one note on checks against the CPU that got no estimated ratio (`NO_CPU_PIN`):
/// what they are, why, and what the student can do: compare the estimated time, or pin this
/// machine's CPU with `cugrade calibrate` (a built-in lab by its name, into cugrade's cache).
pub(super) fn no_cpu_ratio_note(
    milestones: &[crate::result::MilestoneResult],
    rubric: &std::path::Path,
) -> Option<String> {
    let checks: Vec<String> = milestones
        .iter()
        .flat_map(|m| {
            m.checks
                .iter()
                .filter(|c| c.estimate.as_ref().is_some_and(|e| e.no_ratio.is_some()))
                .map(move |c| format!("{} › {}", m.id, c.name))
        })
        .collect();
    if checks.is_empty() {
        return None;
    }
    let pin = match crate::labs::lab_name(rubric) {
        Some(lab) => format!(
            "or run `cugrade calibrate {lab}` once: it times this machine's CPU and keeps it in \
             cugrade's cache, and later estimates give a ratio against it (this machine's CPU, \
             not necessarily the grading machine's)"
        ),
        None => "or ask the course to pin its grading machine's CPU time with `cugrade \
                 calibrate` beside the rubric (`<rubric>.calibration.json`): estimates then \
                 give the ratio grading will use"
            .to_string(),
    };
    Some(format!(
        "no estimated speed-up against the CPU for {}: that bar compares the kernel with the \
         CPU time the grading machine measures, which a run without it cannot know. Compare \
         the estimated time with the CPU time your course gives, {pin}",
        checks.join(", ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn cpu_words_drop_their_time() {
        assert_eq!(
            against_words("faster than the single-threaded CPU (12.345 ms)"),
            "faster than the single-threaded CPU"
        );
        assert_eq!(
            against_words("faster than the reference `reduce_naive`"),
            "faster than the reference `reduce_naive`"
        );
        assert_eq!(
            against_words("of cuBLAS SGEMM's speed"),
            "of cuBLAS SGEMM's speed"
        );
    }
}
