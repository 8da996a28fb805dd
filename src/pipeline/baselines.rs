//! Baselines a speed is compared with: the CPU implementation, the reference kernel, cuBLAS,
//! or the device's copy bandwidth.

use super::context::Ctx;
use super::reference::Reference;
use crate::baseline::Threads;
use crate::inputs::Invocation;
use crate::measure::session::{BaselinePlan, RefCall};
use crate::measure::{BaselineRecord, calibration};
use crate::rubric::plan::{CasePlan, PerfPlan};
use crate::rubric::schema::{Against, Case};

/// What a kernel's speed is compared with, ready for the timed section.
pub(super) struct BaselineChoice {
    pub(super) plan: BaselinePlan,
    /// estimate = scale × baseline ms / kernel ms.
    pub(super) scale: f64,
    pub(super) unit: &'static str,
    /// Words for the report: "faster than the single-threaded CPU (12.3 ms)".
    pub(super) what: String,
    pub(super) record: Option<BaselineRecord>,
}

/// Choose and prepare the baseline of a performance check. A CPU baseline is measured here
/// (or found pinned or cached); a GPU baseline is measured in the timed section, paired with
/// the student's launches.
pub(super) fn baseline(
    ctx: &Ctx,
    reference: &mut Reference,
    p: &PerfPlan,
    case: &CasePlan,
    inv: &Invocation,
) -> Result<BaselineChoice, String> {
    match &p.spec.against {
        a @ (Against::Cpu | Against::CpuParallel) => cpu_baseline(ctx, reference, a, case, inv),
        _ => gpu_baseline(p, case),
    }
}

/// The CPU implementation's time, pinned in the rubric's folder, cached, or measured now.
fn cpu_baseline(
    ctx: &Ctx,
    reference: &mut Reference,
    against: &Against,
    case: &CasePlan,
    inv: &Invocation,
) -> Result<BaselineChoice, String> {
    let (threads, what, label) = if matches!(against, Against::Cpu) {
        (Threads::Single, "cpu", "single-threaded CPU")
    } else {
        (Threads::Parallel, "cpu_parallel", "multi-threaded CPU")
    };
    let name = ctx
        .plan
        .contract
        .cpu
        .clone()
        .ok_or("no CPU implementation")?;
    let key = calibration::key(&ctx.rubric.assignment, what, &case.name, &case.case.vars);
    let found = match reference.baselines.get(&key) {
        Some(v) => v.clone(),
        None => {
            let v = calibration::pinned(&ctx.rubric.path, &key)
                .map(Ok)
                .unwrap_or_else(|| {
                    let cache = ctx
                        .opts
                        .baseline_cache
                        .clone()
                        .unwrap_or_else(calibration::default_cache);
                    calibration::cached_or_measure(&cache, &key, || {
                        calibration::measure(|| cpu_run(&name, inv, &case.case, threads))
                    })
                });
            reference.baselines.insert(key, v.clone());
            v
        }
    }?;
    Ok(BaselineChoice {
        plan: BaselinePlan::Constant(found.ms),
        scale: 1.0,
        unit: "x",
        what: format!("faster than the {label} ({:.3} ms)", found.ms),
        record: Some(BaselineRecord {
            kind: what.to_string(),
            median_ms: found.ms,
            paired: false,
            source: Some(found.source),
            cpu: Some(found.cpu),
        }),
    })
}

/// A baseline measured on the GPU in the timed section: the reference kernel, cuBLAS, or the
/// device's copy bandwidth.
fn gpu_baseline(p: &PerfPlan, case: &CasePlan) -> Result<BaselineChoice, String> {
    match &p.spec.against {
        Against::Reference(k) => {
            // K's own contract's launch (the plan's), not the timed milestone's: a kernel
            // written for one thread per element, launched with a grid-stride kernel's
            // smaller grid, would compute part of the data.
            let dims = match &p.baseline_launch {
                Some(l) => l.clone(),
                None => case.reference_launch.clone(),
            }
            .map_err(|e| format!("the launch of the reference `{k}`: {e}"))?;
            Ok(BaselineChoice {
                plan: BaselinePlan::Reference(RefCall {
                    kernel: k.clone(),
                    dims,
                }),
                scale: 1.0,
                unit: "x",
                what: format!("faster than the reference `{k}`"),
                record: Some(paired(format!("reference:{k}"))),
            })
        }
        Against::Cublas => {
            let g = |v: &str| case.case.vars.get(v).copied().unwrap_or(0).max(1) as usize;
            Ok(BaselineChoice {
                plan: BaselinePlan::Cublas {
                    m: g("M"),
                    n: g("N"),
                    k: g("K"),
                },
                scale: 1.0,
                unit: "x",
                what: "of cuBLAS SGEMM's speed".into(),
                record: Some(paired("cublas".into())),
            })
        }
        Against::CopyBandwidth { bytes } => {
            let b = bytes.eval_int(&case.vars)?.max(1) as f64;
            // A copy of half the bytes reads and writes as many bytes as the kernel moves.
            let copy_bytes = (b as usize / 2).clamp(1 << 20, 1 << 30);
            Ok(BaselineChoice {
                plan: BaselinePlan::Copy { bytes: copy_bytes },
                // percent = 100 × (b / kernel s) / (2 × copy bytes / copy s)
                scale: 100.0 * b / (2.0 * copy_bytes as f64),
                unit: "%",
                what: "of the device-to-device copy bandwidth".into(),
                record: Some(paired("copy".into())),
            })
        }
        // Measured on the host by `cpu_baseline`; `baseline` never sends it here.
        Against::Cpu | Against::CpuParallel => Err("a CPU baseline is measured on the host".into()),
    }
}

/// The record of a baseline timed in the timed section, paired with the student's launches.
fn paired(kind: String) -> BaselineRecord {
    BaselineRecord {
        kind,
        median_ms: 0.0,
        paired: true,
        source: None,
        cpu: None,
    }
}

/// One run of a CPU implementation on the invocation's inputs, in ms.
pub fn cpu_run(name: &str, inv: &Invocation, case: &Case, threads: Threads) -> Result<f64, String> {
    let f = crate::baseline::lookup(name)
        .ok_or_else(|| format!("unknown CPU implementation {name}"))?;
    let mut a = host_args(inv, case);
    let t = std::time::Instant::now();
    f(&mut a, threads).map_err(|e| e.to_string())?;
    Ok(t.elapsed().as_secs_f64() * 1e3)
}

/// The invocation's buffers and scalars as a CPU implementation sees them.
pub fn host_args(inv: &Invocation, case: &Case) -> crate::baseline::HostArgs {
    use crate::baseline::HostBuffer;
    use crate::rubric::schema::ScalarType as T;
    let mut a = crate::baseline::HostArgs::default();
    for b in &inv.buffers {
        // A described input (the speed estimate's) is drawn in full for the CPU.
        let drawn;
        let d = match &b.fill {
            Some(f) if b.data.is_empty() => {
                drawn = f.all();
                &drawn
            }
            _ => &b.data,
        };
        let hb = match b.elem {
            T::F32 => HostBuffer::F32(
                d.chunks_exact(4)
                    .map(|c| f32::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
            ),
            T::F64 => HostBuffer::F64(
                d.chunks_exact(8)
                    .map(|c| f64::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
            ),
            T::I32 => HostBuffer::I32(
                d.chunks_exact(4)
                    .map(|c| i32::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
            ),
            T::U32 => HostBuffer::U32(
                d.chunks_exact(4)
                    .map(|c| u32::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
            ),
            T::I64 => HostBuffer::I64(
                d.chunks_exact(8)
                    .map(|c| i64::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
            ),
            T::U64 => HostBuffer::U64(
                d.chunks_exact(8)
                    .map(|c| u64::from_le_bytes(c.try_into().unwrap_or_default()))
                    .collect(),
            ),
        };
        a.buffers.insert(b.name.clone(), hb);
    }
    for (k, v) in &case.vars {
        a.scalars.insert(k.clone(), *v as f64);
    }
    for (k, v) in &inv.scalars {
        a.scalars.insert(k.clone(), *v);
    }
    a
}
