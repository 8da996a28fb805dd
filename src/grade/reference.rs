//! The trusted side: the reference module in its own worker, its cached outputs and
//! baselines, and `validate`'s self-check of a rubric's reference kernels.

use super::*;
use crate::backend::{BackendKind, LaunchDims};
use crate::check::{self, Resolved};
use crate::compile::SourceFile;
use crate::inputs::{self, Invocation};
use crate::result::{CompileSummary, Status};
use crate::rubric::{self, LoadedRubric, case_vars};
use crate::submission::{self};
use crate::worker::protocol::{Request, Response};
use crate::worker::{Role, Worker};
use std::collections::HashMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

/// Expected allocations by (kernel, case, trial), with the reference run's seconds.
type ExpectedOutputs = HashMap<(String, String, u32), Expected>;

/// What the reference kernel produced on one trial.
#[derive(Debug, Clone)]
pub(super) struct Expected {
    /// Whole allocations (guards included), in buffer order.
    pub(super) allocations: Vec<Vec<u8>>,
    /// The reference launch's time as its worker saw it (start to the kernel's end): what a
    /// student's launch on the same case may take is a multiple of it
    /// (`Timeouts::correctness_deadline`).
    pub(super) seconds: f64,
}

/// The trusted side: the reference module in its own worker, with caches.
pub struct Reference {
    pub(super) ptx: String,
    pub(super) worker: Option<Worker>,
    /// Expected allocations by (kernel, case, trial), shared by every [`Reference::share`]d
    /// handle: a cohort computes each once, whatever its `--jobs`.
    pub(super) outputs: Arc<Mutex<ExpectedOutputs>>,
    /// CPU baselines by `calibration::key`, found or measured once per run.
    pub(super) baselines: HashMap<String, Result<crate::measure::calibration::Found, String>>,
    /// The harness kernels' PTX, compiled on first use.
    pub(super) harness: Option<Result<String, String>>,
    /// The GPU's timing-lock key (cuda backend).
    pub(super) gpu: Option<String>,
    pub(super) backend: BackendKind,
    pub(super) device: usize,
    pub(super) protected: Vec<std::path::PathBuf>,
    /// ptxas's facts of the reference kernels (registers, for the speed estimate).
    pub(super) resources: Vec<crate::result::KernelResources>,
    /// Speed-estimate profiles of reference kernels (`estimated::reference_profile`), shared
    /// like `outputs`.
    pub(super) estimates: Arc<Mutex<super::estimated::ProfileCache>>,
}

impl Reference {
    /// Compile the rubric's reference kernel file.
    pub fn compile(rubric: &LoadedRubric, opts: &Options) -> Result<Reference, Infrastructure> {
        let text = std::fs::read_to_string(&rubric.reference_path).map_err(|e| {
            Infrastructure(format!(
                "cannot read {}: {e}",
                rubric.reference_path.display()
            ))
        })?;
        let name = rubric
            .reference_path
            .file_name()
            .map(|s| s.to_string_lossy().into_owned())
            .unwrap_or_default();
        let src = SourceFile { name, text };
        let ptx_file = rubric
            .reference_path
            .extension()
            .is_some_and(|e| e == "ptx");
        let (modules, checks, summary) = if ptx_file {
            (
                vec![(src.name.clone(), src.text.clone())],
                vec![],
                CompileSummary::default(),
            )
        } else {
            compile_all(
                std::slice::from_ref(&src),
                &[],
                &[],
                opts,
                Duration::from_secs_f64(rubric.rubric.timeouts.compile_s * 2.0),
            )?
        };
        let Some((_, ptx)) = modules.into_iter().next() else {
            let why = checks
                .iter()
                .map(|c| format!("{}\n{}", c.message, c.details.clone().unwrap_or_default()))
                .collect::<Vec<_>>()
                .join("\n");
            return Err(Infrastructure(format!(
                "the reference kernel {} does not compile:\n{why}\n{}",
                rubric.reference_path.display(),
                summary.log
            )));
        };
        Ok(Reference {
            ptx,
            worker: None,
            outputs: Arc::default(),
            baselines: HashMap::new(),
            harness: None,
            gpu: opts.gpu.clone(),
            backend: opts.backend,
            device: opts.device,
            protected: opts.protected.clone(),
            resources: summary.kernels.clone(),
            estimates: Arc::default(),
        })
    }

    /// Another handle on the same compiled module and expected-output cache, with a worker of
    /// its own (started when first needed) on `device`, whose timing-lock key is `gpu`:
    /// `grade --jobs N` compiles the reference once. CPU baselines are found per handle (the
    /// cohort's baseline cache file keeps them equal).
    pub fn share(&self, device: usize, gpu: Option<String>) -> Reference {
        Reference {
            ptx: self.ptx.clone(),
            worker: None,
            outputs: Arc::clone(&self.outputs),
            baselines: HashMap::new(),
            harness: self.harness.clone(),
            gpu,
            backend: self.backend,
            device,
            protected: self.protected.clone(),
            resources: self.resources.clone(),
            estimates: Arc::clone(&self.estimates),
        }
    }

    pub(super) fn worker(&mut self) -> Result<&mut Worker, Infrastructure> {
        if self.worker.is_none() {
            let mut w = Worker::spawn(&worker_options(
                &self.protected,
                Role::Run,
                self.backend,
                self.device,
            ))
            .map_err(|e| Infrastructure(format!("cannot start the reference worker: {e}")))?;
            match w.call(
                &Request::Load,
                &[self.ptx.as_bytes()],
                Duration::from_secs(120),
            ) {
                Ok((Response::Loaded { error: None }, _)) => {}
                Ok((Response::Loaded { error: Some(e) }, _)) => {
                    return Err(Infrastructure(format!(
                        "the reference module does not load: {e}"
                    )));
                }
                other => {
                    return Err(Infrastructure(format!(
                        "the reference worker failed to load: {:?}",
                        other.err()
                    )));
                }
            }
            self.worker = Some(w);
        }
        self.worker
            .as_mut()
            .ok_or_else(|| Infrastructure("no reference worker".into()))
    }

    /// Expected allocations for one trial (computed once per run). `gpu_lock`: the GPU's
    /// lock key to take for the run, `None` when the caller holds it already.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn expected(
        &mut self,
        kernel: &str,
        case: &str,
        trial: u32,
        inv: &Invocation,
        dims: LaunchDims,
        limit: Duration,
        gpu_lock: Option<&str>,
    ) -> Result<Expected, Infrastructure> {
        self.cached(
            kernel.to_string(),
            kernel,
            case,
            trial,
            inv,
            dims,
            limit,
            gpu_lock,
        )
    }

    /// Each output element's partial-sum scale for one trial (`check::sum_scale`), per
    /// buffer (empty for inputs), from the reference kernel run on the absolute values and on
    /// the squares of the trial's inputs (each once per run), and its `expected` outputs.
    #[allow(clippy::too_many_arguments)]
    pub(super) fn magnitude(
        &mut self,
        kernel: &str,
        case: &str,
        trial: u32,
        inv: &Invocation,
        expected: &[Vec<u8>],
        dims: LaunchDims,
        limit: Duration,
        gpu_lock: Option<&str>,
    ) -> Result<Vec<Vec<f64>>, Infrastructure> {
        let abs = self.cached(
            format!("{kernel} on |inputs|"),
            kernel,
            case,
            trial,
            &inv.absolute(),
            dims,
            limit,
            gpu_lock,
        )?;
        let sq = self.cached(
            format!("{kernel} on inputs^2"),
            kernel,
            case,
            trial,
            &inv.squared(),
            dims,
            limit,
            gpu_lock,
        )?;
        Ok(inv
            .buffers
            .iter()
            .enumerate()
            .map(|(i, b)| {
                if !b.is_output() {
                    return vec![];
                }
                let s = b.spec();
                let payload = |a: &[Vec<u8>]| {
                    a.get(i)
                        .and_then(|x| x.get(s.guard..s.guard + s.bytes))
                        .map(|x| inputs::decode(x, b.elem))
                        .unwrap_or_default()
                };
                let q = payload(&sq.allocations);
                check::sum_scale(&payload(expected), &payload(&abs.allocations), Some(&q))
            })
            .collect())
    }

    #[allow(clippy::too_many_arguments)]
    fn cached(
        &mut self,
        label: String,
        kernel: &str,
        case: &str,
        trial: u32,
        inv: &Invocation,
        dims: LaunchDims,
        limit: Duration,
        gpu_lock: Option<&str>,
    ) -> Result<Expected, Infrastructure> {
        let key = (label, case.to_string(), trial);
        let cached = self
            .outputs
            .lock()
            .unwrap_or_else(|p| p.into_inner())
            .get(&key)
            .cloned();
        if let Some(v) = cached {
            return Ok(v);
        }
        let w = self.worker()?;
        match run_on(w, kernel, inv, dims, limit * 4, gpu_lock) {
            Ok(r) => {
                let e = Expected {
                    allocations: r.allocations,
                    seconds: r.seconds,
                };
                self.outputs
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .insert(key, e.clone());
                Ok(e)
            }
            Err(e) => {
                self.worker = None;
                Err(Infrastructure(format!(
                    "the reference kernel `{kernel}` failed on case {case}: {}",
                    describe_run_error(&e)
                )))
            }
        }
    }

    /// cugrade's harness kernels (`measure/harness.cu`) compiled for this run's device, once.
    pub(super) fn harness(&mut self, opts: &Options) -> Result<String, String> {
        if let Some(h) = &self.harness {
            return h.clone();
        }
        let src = SourceFile {
            name: "cugrade-harness.cu".into(),
            text: crate::measure::session::HARNESS_SOURCE.into(),
        };
        let (modules, checks, summary) = compile_all(
            std::slice::from_ref(&src),
            &[],
            &[],
            opts,
            Duration::from_secs(120),
        )
        .map_err(|e| e.0)?;
        let h = modules.into_iter().next().map(|(_, p)| p).ok_or_else(|| {
            let why: Vec<String> = checks.iter().map(|c| c.message.clone()).collect();
            format!(
                "cugrade's timing kernels do not compile: {}\n{}",
                why.join("; "),
                summary.log
            )
        });
        self.harness = Some(h.clone());
        h
    }
}

/// `validate`: grade the reference file against its own rubric (kernels exist, run clean,
/// meet the speed bars on a GPU), then cross-check every reference output with the CPU
/// implementation where the contract names one. Prints what it finds; `Ok(true)` if clean.
pub fn validate_reference(rubric: &LoadedRubric, opts: &Options) -> Result<bool, Infrastructure> {
    let sub =
        submission::load(&rubric.reference_path).map_err(|e| Infrastructure(e.to_string()))?;
    let mut reference = Reference::compile(rubric, opts)?;
    let result = grade(rubric, &sub, opts, &mut reference)?;
    let mut ok = result.all_passed();
    for m in &result.milestones {
        println!(
            "  {:<24} {:<8} {}/{}",
            m.id,
            m.status.as_str(),
            m.score,
            m.max_score
        );
        for c in m
            .checks
            .iter()
            .filter(|c| !matches!(c.status, Status::Pass | Status::Skipped))
        {
            println!("      {} {}: {}", c.status.as_str(), c.name, c.message);
        }
    }
    for m in &rubric.rubric.milestones {
        let contract = rubric.contract(&m.contract);
        let Some(cpu) = &contract.cpu else { continue };
        let Some(f) = crate::baseline::lookup(cpu) else {
            continue;
        };
        let limit = Duration::from_secs_f64(rubric.rubric.timeouts.launch_s);
        let mut used = 0.0f64;
        for case in rubric.cases_for(m) {
            let vars = case_vars(case);
            let inv = inputs::generate(
                contract,
                &vars,
                inputs::trial_seed(opts.seed, &case.name, 0),
            )
            .map_err(Infrastructure)?;
            let dims = rubric::eval_launch(&contract.launch, &vars).map_err(Infrastructure)?;
            let kernel = m
                .reference_kernel
                .clone()
                .unwrap_or_else(|| m.kernel.clone());
            let gpu = reference.gpu.clone();
            let expected = reference
                .expected(&kernel, &case.name, 0, &inv, dims, limit, gpu.as_deref())?
                .allocations;
            let mut args = host_args(&inv, case);
            if let Err(e) = f(&mut args, crate::baseline::Threads::Single) {
                println!("  {}: CPU `{cpu}` failed on {}: {e}", m.id, case.name);
                ok = false;
                continue;
            }
            let magnitude = if contract.tolerance.sum.is_some()
                || contract
                    .params
                    .iter()
                    .any(|p| p.tolerance.as_ref().is_some_and(|t| t.sum.is_some()))
                || m.correctness
                    .tolerance
                    .as_ref()
                    .is_some_and(|t| t.sum.is_some())
            {
                let gpu = reference.gpu.clone();
                Some(reference.magnitude(
                    &kernel,
                    &case.name,
                    0,
                    &inv,
                    &expected,
                    dims,
                    limit,
                    gpu.as_deref(),
                )?)
            } else {
                None
            };
            let tol_vars = inv.tolerance_vars(&vars);
            for (i, b) in inv.buffers.iter().enumerate() {
                if !b.is_output() {
                    continue;
                }
                let Some(host) = args.buffers.get(&b.name) else {
                    continue;
                };
                let cpu_bytes = host_bytes(host);
                let t = b
                    .tolerance
                    .as_ref()
                    .or(m.correctness.tolerance.as_ref())
                    .or(Some(&contract.tolerance));
                let s = b.spec();
                let mag = magnitude.as_ref().and_then(|m| m.get(i)).map(Vec::as_slice);
                let got = &expected[i][s.guard..s.guard + s.bytes];
                match model_check(b, t, &tol_vars, &cpu_bytes, got, mag) {
                    Ok(u) => used = used.max(u),
                    Err(why) => {
                        ok = false;
                        println!(
                            "  {}: reference `{kernel}` against CPU `{cpu}` on case {}:\n    {}",
                            m.id,
                            case.name,
                            why.replace('\n', "\n    ")
                        );
                    }
                }
            }
        }
        if used > 0.0 {
            println!(
                "  {}: reference cross-checked against CPU `{cpu}` (its own error uses at most {:.1} % of its half of the tolerance)",
                m.id,
                100.0 * used
            );
        } else {
            println!("  {}: reference cross-checked against CPU `{cpu}`", m.id);
        }
    }
    Ok(ok)
}

/// `validate`'s check of a tolerance's error model on one output: the float reference's own
/// error, against the CPU implementation (which accumulates in f64), must stay within half
/// of the tolerance evaluated for float (`u = eps`): the reference's share of a bound that
/// covers the student's rounding and the reference's. A `sum` tolerance also needs sums
/// of absolute terms that bound the outputs (`S >= |expected|`): a contract that is not a sum
/// of products cannot use it. `Ok(share)`: the largest fraction of its half the reference
/// used.
pub(super) fn model_check(
    b: &inputs::Buffer,
    t: Option<&crate::rubric::schema::Tolerance>,
    vars: &rubric::expr::Vars,
    cpu: &[u8],
    reference: &[u8],
    mag: Option<&[f64]>,
) -> Result<f64, String> {
    let full = Resolved::with_precision(t, b.elem, vars, check::Precision::Fp32)?;
    if full.exact || !b.elem.is_float() {
        let c = check::compare(b, cpu, reference, full);
        return if c.ok() { Ok(0.0) } else { Err(c.describe()) };
    }
    let share = Resolved {
        abs: full.abs / 2.0,
        rel: full.rel / 2.0,
        sum: full.sum / 2.0,
        coarse: None,
        ..full
    };
    let (e, g) = (
        inputs::decode(cpu, b.elem),
        inputs::decode(reference, b.elem),
    );
    let m = mag.unwrap_or_default();
    let at = |i: usize| m.get(i).copied().unwrap_or(0.0);
    if full.sum > 0.0
        && let Some(i) = (0..e.len().min(m.len()))
            .find(|&i| e[i].is_finite() && at(i).is_finite() && at(i) < e[i].abs() * (1.0 - 1e-3))
    {
        return Err(format!(
            "`sum` needs each element's sum of absolute terms, which the reference computes from the inputs' absolute values, to bound the output; at `{}`[{i}] it is {:e} for an output of {:e}: this contract's outputs are not sums of products of its inputs, so use `abs`/`rel` instead",
            b.name,
            at(i),
            e[i]
        ));
    }
    let c = check::compare_at(b, cpu, reference, mag, share);
    if !c.ok() {
        return Err(format!(
            "the reference's own error (against the CPU's f64 result) exceeds its half of the tolerance, so the tolerance leaves an honest float kernel no room: {}",
            c.describe()
        ));
    }
    let used = (0..e.len().min(g.len()))
        .filter(|&i| e[i].is_finite() && g[i].is_finite())
        .map(|i| (g[i] - e[i]).abs() / share.allowance(e[i], at(i)).max(f64::MIN_POSITIVE))
        .fold(0.0, f64::max);
    Ok(used)
}

pub(super) fn host_bytes(b: &crate::baseline::HostBuffer) -> Vec<u8> {
    use crate::baseline::HostBuffer as H;
    match b {
        H::F32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        H::F64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        H::I32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        H::U32(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        H::I64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
        H::U64(v) => v.iter().flat_map(|x| x.to_le_bytes()).collect(),
    }
}
