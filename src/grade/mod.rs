//! Grade one submission against a rubric: the pipeline end to end.
//!
//! The parent generates inputs, gets expected outputs from the reference kernel in a trusted
//! worker, runs the student's kernels in a worker of the student's own (a fresh one after a
//! fault or a timeout), and compares raw output bytes itself. Expected outputs never enter
//! the student's process. A timeout or fault ends the milestone (its worker is killed) and
//! grading goes on with the next one.

//!
//! Stages live in submodules: `compiling` (NVRTC in a compile worker), `run` (one request to a
//! worker and what its failures mean), `reference` (the trusted reference worker and
//! `validate`), `correctness` (cases, trials, comparisons, sanitizer findings), `metrics`
//! (metric checks on the emulator's counters), `performance` (speed checks through the
//! `measure` stage) and `baselines` (what a speed is compared with: CPU, reference, cuBLAS,
//! copy bandwidth). `numba` compiles `.py` kernels and carries their calling convention to the
//! launches; `cupy` turns CuPy `.py` kernels into CUDA C++ for `compiling`.

mod baselines;
mod compiling;
mod correctness;
mod cross;
mod cupy;
mod estimated;
mod gpu_sanitizer;
mod metrics;
mod numba;
mod performance;
pub mod probe;
mod reference;
mod resources;
mod run;
pub mod sanitizer;

pub use baselines::{cpu_run, host_args};
pub use reference::{Reference, validate_reference};

use compiling::compile_all;
use run::*;

use crate::backend::{BackendKind, LaunchDims};
use crate::compile::{self};
use crate::hints;
use crate::inputs::{self};
use crate::result::{Check, CheckKind, GradeResult, MilestoneResult, RunInfo, Status};
use crate::rubric::schema::{Case, Language, Milestone};
use crate::rubric::{self, LoadedRubric, case_vars};
use crate::score;
use crate::submission::{self, Submission};
use crate::worker::protocol::{Request, Response};
use crate::worker::{Role, Worker, WorkerOptions};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// How to grade.
#[derive(Debug, Clone)]
pub struct Options {
    pub backend: BackendKind,
    pub device: usize,
    pub seed: u64,
    /// Compile target: the device's (`sm_90` on an H200), or `sm_90` without a device.
    pub arch: String,
    pub device_name: String,
    /// The GPU's PCI bus id on the cuda backend: the key of the per-GPU timing lock
    /// (`measure::lock`) and of NVML's clock readings.
    pub gpu: Option<String>,
    /// The GPU this grading runs on (cuda backend), recorded in result.json as `run.gpu` and
    /// in each performance check's `timing.device`.
    pub gpu_record: Option<crate::backend::GpuRecord>,
    /// Where measured CPU baselines are cached (`measure::calibration`); `None`: the user's
    /// cache directory.
    pub baseline_cache: Option<std::path::PathBuf>,
    /// Directories no worker may read (rubric, cohort, outputs): see `sandbox::Policy`.
    pub protected: Vec<std::path::PathBuf>,
    /// Where to keep each milestone's module, for `check --profile` (which profiles the kernel
    /// again under Nsight Compute); `None`: nothing is kept.
    pub keep_kernels: Option<Kept>,
    /// The GPU the emulator's speed estimates are for (`estimate::gpu`'s id, e.g. `h100`).
    pub estimate_gpu: String,
}

/// A milestone's kernel as it was graded: its module and, for Numba, its calling convention.
#[derive(Debug, Clone)]
pub struct KeptKernel {
    pub milestone: String,
    pub kernel: String,
    pub ptx: String,
    pub numba: Option<crate::rubric::convention::Signature>,
    /// On the emulator: the counters of the largest correctness case it ran (the case's name
    /// and the first trial's metrics), for `check --profile` without a GPU.
    pub emulator: Option<(String, crate::backend::Metrics)>,
}

/// The kernels `grade` keeps (see [`Options::keep_kernels`]).
pub type Kept = std::sync::Arc<std::sync::Mutex<Vec<KeptKernel>>>;

fn worker_options(
    protected: &[std::path::PathBuf],
    role: Role,
    backend: BackendKind,
    device: usize,
) -> WorkerOptions {
    let mut o = WorkerOptions::new(role, backend, device);
    o.protected = protected.to_vec();
    o
}

/// A failure of the grading machinery itself (not of the student's code): exit 3.
#[derive(Debug, Clone)]
pub struct Infrastructure(pub String);

/// Grade one submission. Infrastructure failures (the reference breaks) are `Err`.
pub fn grade(
    rubric: &LoadedRubric,
    sub: &Submission,
    opts: &Options,
    reference: &mut Reference,
) -> Result<GradeResult, Infrastructure> {
    let started = Instant::now();
    let rb = &rubric.rubric;
    let timeouts = &rb.timeouts;
    // Languages the rubric does not accept are not compiled; each gets a failing check.
    let refused = numba::refused_languages(rubric, sub);
    let refused_langs: Vec<Language> = refused.iter().map(|(l, _)| *l).collect();
    let accepts = |l| !refused_langs.contains(&l);
    let none: &[crate::compile::SourceFile] = &[];
    // CuPy kernels become CUDA C++ and compile with the `.cu` files.
    let (cupy_sources, cupy_checks) = if accepts(Language::Cupy) {
        cupy::sources(rubric, sub, opts)
    } else {
        (vec![], vec![])
    };
    let mut sources = if accepts(Language::Cuda) {
        sub.sources.clone()
    } else {
        vec![]
    };
    sources.extend(cupy_sources);
    let (modules, mut compile_checks, summary) = compile_all(
        &sources,
        &sub.headers,
        if accepts(Language::Ptx) {
            &sub.ptx
        } else {
            none
        },
        opts,
        Duration::from_secs_f64(timeouts.compile_s),
    )?;
    compile_checks.extend(refused.into_iter().map(|(_, c)| c));
    if let Some(fault) = compiling::machine_fault(&compile_checks, opts) {
        return Err(Infrastructure(fault));
    }
    compile_checks.extend(cupy_checks);
    let numba_kernels = if accepts(Language::Numba) && sub.languages().contains(&Language::Numba) {
        numba::compile(rubric, sub, opts)?
    } else {
        numba::NumbaKernels::new()
    };
    let cupy_only =
        sub.sources.is_empty() && sub.ptx.is_empty() && sub.languages() == [Language::Cupy];
    // Registers and spills of PTX that NVRTC did not assemble (PTX files, Numba's kernels)
    // come from ptxas too, never from the emulator's count of virtual registers.
    let mut summary = summary;
    let mut numba_ptx: Vec<(String, String)> = numba_kernels
        .iter()
        .filter_map(|(k, s)| match s {
            numba::NumbaKernelState::Compiled { file, ptx, .. } => {
                Some((format!("{file} ({k})"), ptx.clone()))
            }
            _ => None,
        })
        .collect();
    // The same order on every run (result.json is compared across runs and shards).
    numba_ptx.sort();
    let foreign: Vec<(String, String)> = modules
        .iter()
        .filter(|(f, _)| sub.ptx.iter().any(|p| &p.name == f))
        .cloned()
        .chain(numba_ptx)
        .collect();
    if !foreign.is_empty() {
        let (kernels, log) =
            compiling::assemble_all(&foreign, opts, Duration::from_secs_f64(timeouts.compile_s));
        summary.kernels.extend(kernels);
        if !log.is_empty() {
            if !summary.log.is_empty() {
                summary.log.push('\n');
            }
            summary.log.push_str(log.trim_end());
        }
    }
    let mut milestones = Vec::new();
    let mut run = RunInfo {
        device: opts.device_name.clone(),
        arch: opts.arch.clone(),
        timed: opts.backend == BackendKind::Cuda,
        cugrade_version: env!("CARGO_PKG_VERSION").to_string(),
        sandbox: vec![],
        notes: vec![],
        seconds: None,
        gpu: opts.gpu_record.clone(),
    };
    // One worker serves all of a student's milestones while it stays healthy (a fault or a
    // timeout ends it; the next milestone gets a fresh one). On a GPU the driver creates and
    // destroys contexts one at a time across processes (about 0.2 s each on an H100 with 16
    // processes at once), so a worker per milestone made context churn a cohort's
    // bottleneck. Nothing crosses students, and within one student every launch still
    // starts from fresh inputs, poisoned outputs and the module's own `__device__` values.
    let mut spare: Option<(Worker, bool)> = None;
    // Flags from comparing the emulator's runs with the GPU's (cuda backend).
    let mut cross_flags: Vec<crate::result::Flag> = Vec::new();
    for m in &rb.milestones {
        let max = rubric::milestone_max(m);
        let (worker, timing_modules_loaded) = match spare.take() {
            Some((w, loaded)) => {
                // What the last milestone's kernel printed stays with that milestone.
                w.clear_output();
                (Some(w), loaded)
            }
            None => (None, false),
        };
        let mut ctx = MilestoneRun {
            rubric,
            sub,
            opts,
            reference,
            m,
            checks: vec![],
            worker,
            sandbox: &mut run.sandbox,
            numba: None,
            numba_source: false,
            tensor_ops: false,
            timing_modules_loaded,
            compiled: &summary.kernels,
            gpu_outputs: HashMap::new(),
            flags: Vec::new(),
        };
        let result = ctx.grade(&modules, &compile_checks, &numba_kernels);
        spare = ctx.worker.take().map(|w| (w, ctx.timing_modules_loaded));
        cross_flags.append(&mut ctx.flags);
        if ctx.numba_source {
            for c in &mut ctx.checks {
                numba::speak_numba(c, sub);
            }
        } else if cupy_only {
            for c in &mut ctx.checks {
                cupy::speak_cupy(c, &m.kernel);
            }
        }
        match result {
            Ok(()) => milestones.push(score::finish(m, max, ctx.checks)),
            Err(e) => return Err(e),
        }
    }
    correctness::attach_snippets(&mut milestones, sub);
    let mut flags = device_flags(rubric, &modules, &numba_kernels);
    flags.append(&mut cross_flags);
    let score: f64 = milestones.iter().map(|m: &MilestoneResult| m.score).sum();
    run.seconds = Some(started.elapsed().as_secs_f64());
    Ok(GradeResult {
        assignment: rb.assignment.clone(),
        student: sub.student.clone(),
        student_id: None,
        id: String::new(),
        entry: String::new(),
        backend: opts.backend.as_str().to_string(),
        seed: opts.seed,
        score: (score * 100.0).round() / 100.0,
        max_score: rubric.max_score(),
        milestones,
        submission_sha256: sub.sha256.clone(),
        rubric_sha256: String::new(),
        compile: (!sources.is_empty() || !summary.kernels.is_empty()).then_some(summary),
        run,
        notes: sub.notes.clone(),
        flags,
    })
}

/// The integrity flags of the submission's device code (`integrity::device`), each with the
/// milestone whose kernel it is in.
fn device_flags(
    rubric: &LoadedRubric,
    modules: &[(String, String)],
    numba_kernels: &numba::NumbaKernels,
) -> Vec<crate::result::Flag> {
    let mut found: Vec<(Option<String>, crate::result::Flag)> = modules
        .iter()
        .flat_map(|(file, ptx)| crate::integrity::device::scan(file, ptx))
        .collect();
    let mut names: Vec<&String> = numba_kernels.keys().collect();
    names.sort();
    for k in names.into_iter().filter_map(|n| numba_kernels.get(n)) {
        if let numba::NumbaKernelState::Compiled { file, ptx, .. } = k {
            found.extend(crate::integrity::device::scan(file, ptx));
        }
    }
    let mut out: Vec<crate::result::Flag> = Vec::new();
    for (kernel, mut f) in found {
        f.milestone = kernel.as_ref().and_then(|k| {
            rubric
                .rubric
                .milestones
                .iter()
                .find(|m| &m.kernel == k)
                .map(|m| m.id.clone())
        });
        if !out.contains(&f) {
            out.push(f);
        }
    }
    out
}

struct MilestoneRun<'a> {
    rubric: &'a LoadedRubric,
    sub: &'a Submission,
    opts: &'a Options,
    reference: &'a mut Reference,
    m: &'a Milestone,
    checks: Vec<Check>,
    worker: Option<Worker>,
    sandbox: &'a mut Vec<String>,
    /// The signature of a Numba kernel: launches use Numba's calling convention.
    numba: Option<crate::rubric::convention::Signature>,
    /// The kernel is (or should have been) a Numba kernel: hints speak Numba.
    numba_source: bool,
    /// The kernel's module uses tensor-core instructions (for the roofline's arithmetic peak).
    tensor_ops: bool,
    /// The worker holds the reference and harness modules for timed sections already
    /// (`MilestoneRun::preload_timing_modules`).
    timing_modules_loaded: bool,
    /// `ptxas -v` facts of the submission's kernels (spills).
    compiled: &'a [crate::result::KernelResources],
    /// The GPU's outputs of each case's first trial (cuda backend, cases small enough for the
    /// emulator), for the emulator-against-GPU cross-check (`cross`).
    gpu_outputs: HashMap<String, Vec<Vec<u8>>>,
    /// Flags for the instructor found while grading (`cross`).
    flags: Vec<crate::result::Flag>,
}

impl MilestoneRun<'_> {
    fn grade(
        &mut self,
        modules: &[(String, String)],
        compile_checks: &[Check],
        numba_kernels: &numba::NumbaKernels,
    ) -> Result<(), Infrastructure> {
        let m = self.m;
        let started = Instant::now();
        // The module that defines the kernel: CUDA C++ or PTX first, then Numba.
        let mut module = modules
            .iter()
            .find(|(_, ptx)| compile::ptx_entries(ptx).iter().any(|e| e == &m.kernel))
            .map(|(f, p)| (f.as_str(), p.as_str()));
        let mut numba_check = None;
        if module.is_none() {
            use numba::NumbaKernelState as S;
            match numba_kernels.get(&m.kernel) {
                Some(S::Compiled {
                    file,
                    ptx,
                    signature,
                    check,
                }) => {
                    module = Some((file.as_str(), ptx.as_str()));
                    self.numba = Some(signature.clone());
                    self.numba_source = true;
                    numba_check = Some(check.clone());
                }
                Some(S::Failed(c)) if modules.is_empty() => {
                    self.numba_source = true;
                    self.checks.push(c.clone());
                    self.checks.push(Check::skipped(
                        CheckKind::Correctness,
                        "correctness",
                        "not run: the kernel does not compile",
                    ));
                    return Ok(());
                }
                Some(S::Missing(c)) if modules.is_empty() && compile_checks.is_empty() => {
                    self.numba_source = true;
                    self.checks.push(c.clone());
                    return Ok(());
                }
                _ => {}
            }
        }
        let Some((file, ptx)) = module else {
            let failed: Vec<&Check> = compile_checks
                .iter()
                .filter(|c| c.status != Status::Pass)
                .collect();
            if !failed.is_empty() {
                self.checks.extend(failed.into_iter().cloned());
                self.checks.push(Check::skipped(
                    CheckKind::Correctness,
                    "correctness",
                    "not run: the submission does not compile",
                ));
            } else {
                self.checks.push(
                    Check::fail(
                        CheckKind::Kernel,
                        format!("kernel {}", m.kernel),
                        format!("kernel `{}` not found in the submission", m.kernel),
                    )
                    .with_hint(hints::MISSING_KERNEL.replace("NAME", &m.kernel)),
                );
            }
            return Ok(());
        };
        self.tensor_ops = ptx.contains("mma.");
        if let Some(kept) = &self.opts.keep_kernels {
            kept.lock()
                .unwrap_or_else(std::sync::PoisonError::into_inner)
                .push(KeptKernel {
                    milestone: m.id.clone(),
                    kernel: m.kernel.clone(),
                    ptx: ptx.to_string(),
                    numba: self.numba.clone(),
                    emulator: None,
                });
        }
        if let Some(c) = compile_checks
            .iter()
            .find(|c| c.name == format!("compile {file}"))
            .or(numba_check.as_ref())
        {
            self.checks.push(c.clone());
        }
        let contract = self.rubric.contract(&m.contract);
        // The student's worker from an earlier milestone (see `grade`), else a fresh,
        // confined one, whose CPU-time limit covers every milestone's budget.
        let reused = self
            .worker
            .take()
            .and_then(|mut w| w.is_alive().then_some(w));
        if reused.is_none() {
            self.timing_modules_loaded = false;
        }
        let mut worker = match reused {
            Some(w) => w,
            None => match Worker::spawn(&{
                let mut o = worker_options(
                    &self.opts.protected,
                    Role::Run,
                    self.opts.backend,
                    self.opts.device,
                );
                let t = &self.rubric.rubric.timeouts;
                let all = t.milestone_s * self.rubric.rubric.milestones.len() as f64;
                o.cpu_seconds = o.cpu_seconds.max((all + 600.0) as u64);
                o
            }) {
                Ok(w) => w,
                Err(e) => return Err(Infrastructure(format!("cannot start a worker: {e}"))),
            },
        };
        if self.sandbox.is_empty() {
            *self.sandbox = worker.ready.sandbox.clone();
        }
        match worker.call(&Request::Load, &[ptx.as_bytes()], Duration::from_secs(120)) {
            Ok((Response::Loaded { error: None }, _)) => {}
            Ok((Response::Loaded { error: Some(e) }, _))
                if self.opts.backend == BackendKind::Emu =>
            {
                // Our emulator's limit, not the student's mistake.
                self.checks.push(Check::error(CheckKind::Compile, format!("load {file}"), format!("the PTX emulator cannot run this module: {e}")).with_hint("Grade this submission on a GPU (--backend cuda), and report the unsupported instruction to the course staff."));
                return Ok(());
            }
            Ok((Response::Loaded { error: Some(e) }, _)) => {
                self.checks.push(
                    Check::fail(
                        CheckKind::Compile,
                        format!("load {file}"),
                        format!("the module does not load: {e}"),
                    )
                    .with_hint(hints::COMPILE),
                );
                return Ok(());
            }
            other => {
                let msg = match other {
                    Err(f) => f.to_string(),
                    Ok((r, _)) => format!("unexpected answer {}", variant(&r)),
                };
                self.checks.push(
                    Check::error(
                        CheckKind::Runtime,
                        "load",
                        format!("loading the module failed: {msg}"),
                    )
                    .with_details(worker.output().text()),
                );
                return Ok(());
            }
        }
        let info = match worker.call(
            &Request::KernelInfo {
                kernel: m.kernel.clone(),
            },
            &[],
            Duration::from_secs(30),
        ) {
            Ok((Response::KernelInfo(Ok(info)), _)) => info,
            Ok((Response::KernelInfo(Err(e)), _)) => {
                self.checks.push(
                    Check::fail(
                        CheckKind::Kernel,
                        format!("kernel {}", m.kernel),
                        e.to_string(),
                    )
                    .with_hint(hints::MISSING_KERNEL.replace("NAME", &m.kernel)),
                );
                return Ok(());
            }
            other => {
                self.checks.push(Check::error(
                    CheckKind::Runtime,
                    "kernel info",
                    format!("{:?}", other.err()),
                ));
                return Ok(());
            }
        };
        let numba_sizes = self
            .numba
            .as_ref()
            .map(|sig| crate::rubric::convention::param_sizes(sig, contract));
        let expected_params = numba_sizes.as_ref().map_or_else(
            || contract.params.iter().filter(|p| !p.symbol).count(),
            Vec::len,
        );
        let expected_sizes: Vec<usize> = if let Some(s) = numba_sizes {
            s
        } else {
            contract
                .params
                .iter()
                .filter(|p| !p.symbol)
                .map(|p| match p.param_type() {
                    Some(rubric::ParamType::Buffer(_)) => 8,
                    Some(rubric::ParamType::Scalar(t)) => t.size(),
                    None => 0,
                })
                .collect()
        };
        if info.param_count != expected_params
            || (info.param_sizes.len() == expected_sizes.len()
                && info.param_sizes != expected_sizes)
        {
            let sig: Vec<String> = contract
                .params
                .iter()
                .filter(|p| !p.symbol)
                .map(|p| format!("{} {}", p.ty, p.name))
                .collect();
            self.checks.push(
                Check::fail(
                    CheckKind::Kernel,
                    format!("kernel {}", m.kernel),
                    format!("`{}` takes {} parameters of sizes {:?}; the contract is ({}) with sizes {:?}", m.kernel, info.param_count, info.param_sizes, sig.join(", "), expected_sizes),
                )
                .with_hint(hints::MISSING_KERNEL.replace("NAME", &m.kernel)),
            );
            return Ok(());
        }
        self.checks.push(Check::pass(
            CheckKind::Kernel,
            format!("kernel {}", m.kernel),
            format!(
                "`{}` found with the contract's {} parameters",
                m.kernel, info.param_count
            ),
        ));
        self.worker = Some(worker);
        // Resources at the launch the speed is measured with (else the first case's).
        let resource_case = m
            .performance
            .first()
            .and_then(|p| self.rubric.performance_case(&p.case))
            .or_else(|| self.rubric.cases_for(m).into_iter().next())
            .cloned();
        if let Some(dims) =
            resource_case.and_then(|c| self.dims_for(&c, info.max_threads_per_block).ok())
        {
            let compiled = self.compiled.iter().find(|k| k.name == m.kernel);
            self.checks
                .push(resources::check(&m.kernel, &info, compiled, dims));
        }

        let cases: Vec<Case> = self.rubric.cases_for(m).into_iter().cloned().collect();
        let metrics_by_case =
            self.correctness_phase(&cases, info.max_threads_per_block, started)?;
        self.keep_emulator_counters(&cases, &metrics_by_case);
        self.mark_small_cases_only(&cases);
        // A kernel that hung on the GPU (a timeout or a deadlock) would only wait out the
        // emulator's ten-times-longer deadline there too, on every small case: its runtime
        // finding already says what is wrong. (A crash still goes to the emulator, whose memcheck
        // names the line.) This cost an `infinite_loop` student over a minute per check.
        let finished = !self
            .checks
            .iter()
            .any(|c| c.kind == CheckKind::Runtime && c.hint.as_deref() == Some(hints::DEADLOCK));
        if self.opts.backend == BackendKind::Cuda && finished {
            // The smallest cases again on the PTX emulator (its sanitizers see every access),
            // and under compute-sanitizer on the GPU where it is installed; the emulator's
            // outputs are compared with the GPU's on the same inputs (`cross`).
            let (found, emulated) = sanitizer::on_emulator(
                self.rubric,
                m,
                self.sub,
                ptx,
                self.numba.as_ref(),
                self.opts.seed,
                &self.opts.protected,
            );
            let on_gpu = crate::profile::find_tool("compute-sanitizer").map(|cs| {
                gpu_sanitizer::on_gpu(
                    &cs,
                    self.rubric,
                    m,
                    self.sub,
                    ptx,
                    self.numba.as_ref(),
                    self.opts,
                )
            });
            self.checks.extend(sanitizer::merge_findings(found, on_gpu));
            self.cross_check_outputs(&emulated);
        }
        let correct = score::nothing_wrong(&self.checks);
        for p in &m.performance {
            let c = if self.opts.backend == BackendKind::Emu {
                // No GPU: a speed estimate, never a grade (docs/estimate.md).
                self.estimated(p, &info, ptx, correct)
            } else if !correct {
                Check::skipped(
                    CheckKind::Performance,
                    p.name.clone(),
                    "not timed: the kernel is not correct yet",
                )
                .with_case(p.case.clone())
            } else {
                let t0 = Instant::now();
                let mut c = self.performance(p, info.max_threads_per_block)?;
                c.seconds = Some(t0.elapsed().as_secs_f64());
                c
            };
            self.checks.push(c);
        }
        let metric_checks = self.metric_checks(&metrics_by_case, ptx, info.max_threads_per_block);
        self.checks.extend(metric_checks);
        // A healthy worker goes on to the student's next milestone (`grade`).
        Ok(())
    }

    /// `check --profile` without a GPU: the emulator's counters of the largest case that ran,
    /// kept with the milestone's kernel.
    fn keep_emulator_counters(
        &self,
        cases: &[Case],
        metrics: &HashMap<String, crate::backend::Metrics>,
    ) {
        let Some(kept) = &self.opts.keep_kernels else {
            return;
        };
        let contract = self.rubric.contract(&self.m.contract);
        let Some(case) = cases
            .iter()
            .filter(|c| metrics.contains_key(&c.name))
            .max_by_key(|c| rubric::case_elements(contract, c))
        else {
            return;
        };
        let mut kept = kept
            .lock()
            .unwrap_or_else(std::sync::PoisonError::into_inner);
        if let Some(k) = kept.iter_mut().rev().find(|k| k.milestone == self.m.id) {
            k.emulator = Some((case.name.clone(), metrics[&case.name].clone()));
        }
    }

    fn dims_for(&self, case: &Case, max_threads: u32) -> Result<LaunchDims, String> {
        let contract = self.rubric.contract(&self.m.contract);
        let launch = if self.rubric.rubric.allow_launch_override {
            submission::launch_for(self.sub, &self.m.kernel, &contract.launch)
        } else {
            contract.launch.clone()
        };
        let dims = rubric::eval_launch(&launch, &case_vars(case))?;
        inputs::check_limits(&dims, max_threads)?;
        Ok(dims)
    }

    /// The reference kernel always runs with the contract's own launch.
    fn reference_dims(&self, case: &Case) -> Result<LaunchDims, Infrastructure> {
        let contract = self.rubric.contract(&self.m.contract);
        rubric::eval_launch(&contract.launch, &case_vars(case))
            .map_err(|e| Infrastructure(format!("reference launch for case {}: {e}", case.name)))
    }

    fn reference_kernel(&self) -> &str {
        self.m.reference_kernel.as_deref().unwrap_or(&self.m.kernel)
    }
}
