//! Baselines a speed is compared with: the CPU implementation, the reference kernel, cuBLAS,
//! or the device's copy bandwidth.

use super::context::Ctx;
use super::reference::Reference;
use crate::baseline::Threads;
use crate::inputs::Invocation;
use crate::measure::session::{BaselinePlan, RefCall};
use crate::measure::{BaselineRecord, calibration};
use crate::rubric::expr::Vars;
use crate::rubric::plan::{CasePlan, PerfPlan};
use crate::rubric::schema::{Against, CpuImpl};

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
    let imp = ctx
        .plan
        .contract
        .cpu
        .clone()
        .ok_or("no CPU implementation")?;
    let what_key = cpu_key_what(what, &imp, &ctx.rubric.path);
    let key = calibration::key(&ctx.rubric.assignment, &what_key, &case.name, &case.ints);
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
                        let mut run =
                            CpuRunner::start(&imp, &ctx.rubric.path, threads, &ctx.opts.protected)?;
                        calibration::measure(|| Ok(run.call(inv, &case.vars, threads)?.0))
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
                    then: p
                        .baseline_then
                        .clone()
                        .map_err(|e| format!("the launches of the reference `{k}`: {e}"))?,
                }),
                scale: 1.0,
                unit: "x",
                what: format!("faster than the reference `{k}`"),
                record: Some(paired(format!("reference:{k}"))),
            })
        }
        Against::Cublas => {
            let g = |v: &str| case.ints.get(v).copied().unwrap_or(0).max(1) as usize;
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
        Against::CopyBandwidth { .. } => {
            let bytes = p.copy_bytes.clone().unwrap_or_else(|| {
                Err("`copy_bandwidth` has no case to evaluate its bytes on".into())
            });
            let b = bytes?.max(1) as f64;
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
        // Timed beside the student's on the rank set (`pipeline::ranks`), never here.
        Against::Nccl => Err("NCCL is timed on a multi-GPU lab's rank set".into()),
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

/// A contract's CPU implementation, ready to run: a built-in, or the course's Python function
/// in a sandboxed worker of its own (`cpu_python`).
pub enum CpuRunner {
    Builtin(String, crate::baseline::CpuFn),
    Python(Box<super::cpu_python::PythonCpuRunner>),
}

impl CpuRunner {
    /// Prepare `imp` (a Python one is started now; `rubric` is the file its path is relative
    /// to; `protected`: folders its worker may not read).
    pub fn start(
        imp: &CpuImpl,
        rubric: &std::path::Path,
        threads: Threads,
        protected: &[std::path::PathBuf],
    ) -> Result<CpuRunner, String> {
        match imp {
            CpuImpl::Builtin(name) => crate::baseline::lookup(name)
                .map(|f| CpuRunner::Builtin(name.clone(), f))
                .ok_or_else(|| format!("unknown CPU implementation {name}")),
            CpuImpl::Python(p) => {
                super::cpu_python::PythonCpuRunner::start(rubric, p, threads, protected)
                    .map(|r| CpuRunner::Python(Box::new(r)))
            }
        }
    }

    /// One run on the invocation's inputs: its time in ms and the buffers it left.
    pub fn call(
        &mut self,
        inv: &Invocation,
        vars: &Vars,
        threads: Threads,
    ) -> Result<(f64, crate::baseline::HostArgs), String> {
        match self {
            CpuRunner::Builtin(_, f) => {
                let mut a = host_args(inv, vars);
                let t = std::time::Instant::now();
                f(&mut a, threads).map_err(|e| e.to_string())?;
                Ok((t.elapsed().as_secs_f64() * 1e3, a))
            }
            // A minute per call: a CPU baseline of a large case in plain Python is slow, but
            // one that hangs must not hold the grader.
            CpuRunner::Python(r) => r.call(inv, std::time::Duration::from_secs(120)),
        }
    }
}

/// The calibration key's `what` for `imp`: `cpu` or `cpu_parallel` for a built-in; for the
/// course's Python function, its name and the file's hash too, so that an edited file is
/// measured again rather than read from a cache or a stale pin.
pub fn cpu_key_what(what: &str, imp: &CpuImpl, rubric: &std::path::Path) -> String {
    use sha2::Digest;
    match imp {
        CpuImpl::Builtin(_) => what.to_string(),
        CpuImpl::Python(p) => {
            let text = super::cpu_python::source(rubric, p)
                .map(|f| f.text)
                .unwrap_or_default();
            let h = sha2::Sha256::digest(text.as_bytes());
            let hex: String = h[..6].iter().map(|b| format!("{b:02x}")).collect();
            format!("{what}[{}@{hex}]", p.function)
        }
    }
}

/// The invocation's buffers and scalars as a CPU implementation sees them.
pub fn host_args(inv: &Invocation, vars: &Vars) -> crate::baseline::HostArgs {
    use crate::baseline::HostBuffer;
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
        let hb = HostBuffer::from_bytes(b.elem, d);
        a.buffers.insert(b.name.clone(), hb);
    }
    for (k, v) in vars {
        a.scalars.insert(k.clone(), *v);
    }
    for (k, v) in &inv.scalars {
        a.scalars.insert(k.clone(), *v);
    }
    a
}
