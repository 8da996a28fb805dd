//! Grade one submission against a rubric: the pipeline end to end.
//!
//! The parent generates inputs, gets expected outputs from the reference kernel in a trusted
//! worker, runs the student's kernel in a fresh worker per milestone, and compares raw output
//! bytes itself. Expected outputs never enter the student's process. A timeout or fault ends
//! the milestone (its worker is killed) and grading goes on with the next one.

use crate::backend::{BackendError, BackendKind, LaunchDims, LaunchReport, Metrics};
use crate::check::{self, Resolved};
use crate::compile::{self, SourceFile};
use crate::hints;
use crate::inputs::{self, Invocation};
use crate::result::{
    Check, CheckKind, CompileSummary, GradeResult, MilestoneResult, RunInfo, Status,
};
use crate::rubric::schema::{Against, Case, Direction, Milestone};
use crate::rubric::{self, LoadedRubric, case_vars};
use crate::score;
use crate::submission::{self, Submission};
use crate::worker::protocol::{Request, Response, RunSpec, Timing};
use crate::worker::{Role, Worker, WorkerFailure, WorkerOptions};
use std::collections::HashMap;
use std::time::{Duration, Instant};

mod numba;

/// How to grade.
#[derive(Debug, Clone)]
pub struct Options {
    pub backend: BackendKind,
    pub device: usize,
    pub seed: u64,
    /// Compile target: the device's (`sm_90` on an H200), or `sm_90` without a device.
    pub arch: String,
    pub device_name: String,
    /// Timed launches per performance check (after 3 warm-ups).
    pub timing_reps: u32,
    /// Directories no worker may read (rubric, cohort, outputs): see `sandbox::Policy`.
    pub protected: Vec<std::path::PathBuf>,
}

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

/// A kernel run's outcome, as the parent validated it.
struct Ran {
    /// Whole allocations (guards included), in buffer order.
    allocations: Vec<Vec<u8>>,
    report: LaunchReport,
    times: Option<Vec<f64>>,
}

enum RunError {
    Backend(BackendError, Box<LaunchReport>),
    Worker(WorkerFailure),
}

fn run_on(
    worker: &mut Worker,
    kernel: &str,
    inv: &Invocation,
    dims: LaunchDims,
    timing: Option<Timing>,
    limit: Duration,
) -> Result<Ran, RunError> {
    let specs = inv.specs();
    let spec = RunSpec {
        kernel: kernel.to_string(),
        dims,
        args: inv.args.clone(),
        buffers: specs.clone(),
        symbols: inv.symbols.clone(),
        timing,
        deadline_ms: limit.as_millis() as u64,
    };
    let allocs = inv.allocations();
    let refs: Vec<&[u8]> = allocs.iter().map(Vec::as_slice).collect();
    let bytes: usize = allocs.iter().map(Vec::len).sum();
    // Transfers take time too: allow ~1 s per 200 MB each way on top of the kernel's limit.
    let slack = Duration::from_secs(5) + Duration::from_millis((bytes / 100_000) as u64);
    match worker.call(&Request::Run(spec), &refs, limit + slack) {
        Ok((
            Response::Ran {
                error: None,
                report,
                times_ms,
            },
            blobs,
        )) => {
            if blobs.len() != specs.len()
                || blobs.iter().zip(&specs).any(|(b, s)| b.len() != s.total())
            {
                return Err(RunError::Worker(WorkerFailure::Protocol(
                    "returned buffers do not match what was sent".into(),
                )));
            }
            if let Some(t) = &times_ms {
                let want = timing.map_or(0, |t| t.reps as usize);
                if t.len() != want || t.iter().any(|x| !x.is_finite() || *x < 0.0) {
                    return Err(RunError::Worker(WorkerFailure::Protocol(
                        "malformed timings".into(),
                    )));
                }
            }
            Ok(Ran {
                allocations: blobs,
                report,
                times: times_ms,
            })
        }
        Ok((
            Response::Ran {
                error: Some(e),
                report,
                ..
            },
            _,
        )) => Err(RunError::Backend(e, Box::new(report))),
        Ok((other, _)) => Err(RunError::Worker(WorkerFailure::Protocol(format!(
            "unexpected answer {}",
            variant(&other)
        )))),
        Err(f) => Err(RunError::Worker(f)),
    }
}

pub(crate) fn variant(r: &Response) -> &'static str {
    match r {
        Response::Ready { .. } => "Ready",
        Response::Compiled { .. } => "Compiled",
        Response::Loaded { .. } => "Loaded",
        Response::NumbaCompiled(_) => "NumbaCompiled",
        Response::KernelInfo(_) => "KernelInfo",
        Response::Ran { .. } => "Ran",
        Response::Measured { .. } => "Measured",
        Response::Failed { .. } => "Failed",
    }
}

/// Compile every `.cu` of a submission in a (sandboxed) compile worker.
/// Returns the PTX modules (name, ptx), the compile check(s) and the summary.
fn compile_all(
    sources: &[SourceFile],
    headers: &[SourceFile],
    ptx: &[SourceFile],
    opts: &Options,
    timeout: Duration,
) -> (Vec<(String, String)>, Vec<Check>, CompileSummary) {
    let mut modules: Vec<(String, String)> = ptx
        .iter()
        .map(|p| (p.name.clone(), p.text.clone()))
        .collect();
    let mut checks = vec![];
    let mut summary = CompileSummary {
        ok: true,
        log: String::new(),
        kernels: vec![],
    };
    if sources.is_empty() {
        return (modules, checks, summary);
    }
    let mut worker: Option<Worker> = None;
    let include_dirs = crate::compile::toolchain::cuda_include_dirs();
    for src in sources {
        if worker.is_none() {
            let mut wo = worker_options(&opts.protected, Role::Compile, opts.backend, opts.device);
            wo.extra_read = include_dirs.clone();
            match Worker::spawn(&wo) {
                Ok(w) => worker = Some(w),
                Err(e) => {
                    summary.ok = false;
                    checks.push(Check::error(
                        CheckKind::Compile,
                        format!("compile {}", src.name),
                        format!("could not start the compile worker: {e}"),
                    ));
                    continue;
                }
            }
        }
        let Some(w) = worker.as_mut() else { continue };
        let started = Instant::now();
        let req = Request::Compile {
            main: src.clone(),
            headers: headers.to_vec(),
            arch: opts.arch.clone(),
            include_dirs: include_dirs.clone(),
        };
        let mut check = match w.call(&req, &[], timeout) {
            Ok((Response::Compiled { ok, log }, blobs)) => {
                let log = sanitize_log(&log);
                if !summary.log.is_empty() {
                    summary.log.push('\n');
                }
                summary.log.push_str(&log);
                summary.kernels.extend(compile::resources(&log));
                let ptx_text = blobs
                    .first()
                    .map(|b| String::from_utf8_lossy(b).into_owned());
                match (ok, ptx_text) {
                    (true, Some(p)) if !p.is_empty() => {
                        modules.push((src.name.clone(), p));
                        Check::pass(
                            CheckKind::Compile,
                            format!("compile {}", src.name),
                            format!("{} compiled for {}", src.name, opts.arch),
                        )
                    }
                    _ => {
                        summary.ok = false;
                        let first = compile::diagnostics_only(&log)
                            .lines()
                            .find(|l| l.contains("error"))
                            .unwrap_or("compilation failed")
                            .to_string();
                        Check::fail(CheckKind::Compile, format!("compile {}", src.name), first)
                            .with_location(compile::first_location(&log))
                            .with_hint(hints::COMPILE)
                            .with_details(compile::diagnostics_only(&log))
                    }
                }
            }
            Ok((other, _)) => {
                summary.ok = false;
                Check::error(
                    CheckKind::Compile,
                    format!("compile {}", src.name),
                    format!(
                        "unexpected answer from the compile worker: {}",
                        variant(&other)
                    ),
                )
            }
            Err(WorkerFailure::Timeout(d)) => {
                summary.ok = false;
                worker = None;
                Check::fail(
                    CheckKind::Compile,
                    format!("compile {}", src.name),
                    format!(
                        "compilation did not finish within {:.0} s (a template or unroll bomb?)",
                        d.as_secs_f64()
                    ),
                )
                .with_hint(
                    "Keep templates and #pragma unroll bounded: compilation has a time limit.",
                )
            }
            Err(f) => {
                summary.ok = false;
                let out = w.output().text();
                worker = None;
                Check::error(
                    CheckKind::Compile,
                    format!("compile {}", src.name),
                    format!("the compiler crashed: {f}"),
                )
                .with_details(sanitize_log(&out))
            }
        };
        check.seconds = Some(started.elapsed().as_secs_f64());
        checks.push(check);
    }
    (modules, checks, summary)
}

/// NVRTC logs are the student's own diagnostics; cap them.
fn sanitize_log(log: &str) -> String {
    const CAP: usize = 32 * 1024;
    if log.len() <= CAP {
        return log.to_string();
    }
    let mut end = CAP;
    while !log.is_char_boundary(end) {
        end -= 1;
    }
    format!("{}\n[log truncated: {} bytes]", &log[..end], log.len())
}

/// The trusted side: the reference module in its own worker, with caches.
pub struct Reference {
    ptx: String,
    worker: Option<Worker>,
    /// Expected allocations by (kernel, case, trial).
    outputs: HashMap<(String, String, u32), Vec<Vec<u8>>>,
    /// Baseline measurements by key (e.g. `cpu:reduction:n=2^24`).
    baselines: HashMap<String, Result<f64, String>>,
    backend: BackendKind,
    device: usize,
    protected: Vec<std::path::PathBuf>,
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
            )
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
            outputs: HashMap::new(),
            baselines: HashMap::new(),
            backend: opts.backend,
            device: opts.device,
            protected: opts.protected.clone(),
        })
    }

    fn worker(&mut self) -> Result<&mut Worker, Infrastructure> {
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

    /// Expected allocations for one trial (computed once per run).
    fn expected(
        &mut self,
        kernel: &str,
        case: &str,
        trial: u32,
        inv: &Invocation,
        dims: LaunchDims,
        limit: Duration,
    ) -> Result<Vec<Vec<u8>>, Infrastructure> {
        let key = (kernel.to_string(), case.to_string(), trial);
        if let Some(v) = self.outputs.get(&key) {
            return Ok(v.clone());
        }
        let w = self.worker()?;
        match run_on(w, kernel, inv, dims, None, limit * 4) {
            Ok(r) => {
                self.outputs.insert(key, r.allocations.clone());
                Ok(r.allocations)
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

    /// Median time of a reference kernel on an invocation.
    fn time(
        &mut self,
        kernel: &str,
        inv: &Invocation,
        dims: LaunchDims,
        reps: u32,
        limit: Duration,
    ) -> Result<f64, String> {
        let w = self.worker().map_err(|e| e.0)?;
        match run_on(
            w,
            kernel,
            inv,
            dims,
            Some(Timing { warmup: 3, reps }),
            limit,
        ) {
            Ok(Ran { times: Some(t), .. }) => Ok(crate::measure::median(&t)),
            Ok(_) => Err("the backend cannot time".into()),
            Err(e) => {
                self.worker = None;
                Err(describe_run_error(&e))
            }
        }
    }

    fn measure(&mut self, req: Request, timeout: Duration) -> Result<f64, String> {
        let w = self.worker().map_err(|e| e.0)?;
        match w.call(&req, &[], timeout) {
            Ok((Response::Measured { value: Some(v), .. }, _)) if v.is_finite() && v > 0.0 => Ok(v),
            Ok((Response::Measured { error: Some(e), .. }, _)) => Err(e),
            Ok((Response::Measured { .. }, _)) => Err("not available on this backend".into()),
            Ok((other, _)) => Err(format!("unexpected answer {}", variant(&other))),
            Err(f) => {
                self.worker = None;
                Err(f.to_string())
            }
        }
    }
}

/// The student's view of an invocation: as is for CUDA C++ and PTX, Numba's array
/// descriptors for a Numba kernel.
fn student_invocation<'i>(
    numba: &Option<crate::compile::numba::Signature>,
    inv: &'i Invocation,
    contract: &crate::rubric::schema::Contract,
) -> Result<std::borrow::Cow<'i, Invocation>, Infrastructure> {
    match numba {
        None => Ok(std::borrow::Cow::Borrowed(inv)),
        Some(sig) => inputs::numba_invocation(inv, contract, sig)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| Infrastructure(format!("Numba arguments: {e}"))),
    }
}

fn describe_run_error(e: &RunError) -> String {
    match e {
        RunError::Backend(b, _) => b.to_string(),
        RunError::Worker(f) => f.to_string(),
    }
}

/// Grade one submission. Infrastructure failures (the reference breaks) are `Err`.
pub fn grade(
    rubric: &LoadedRubric,
    sub: &Submission,
    opts: &Options,
    reference: &mut Reference,
) -> Result<GradeResult, Infrastructure> {
    let rb = &rubric.rubric;
    let timeouts = &rb.timeouts;
    let refused = numba::refused_languages(rubric, sub);
    let refused_langs: Vec<_> = refused.iter().map(|(l, _)| *l).collect();
    let accepts = |l| !refused_langs.contains(&l);
    use crate::rubric::schema::Language;
    let none: &[SourceFile] = &[];
    let (modules, mut compile_checks, summary) = compile_all(
        if accepts(Language::Cuda) { &sub.sources } else { none },
        &sub.headers,
        if accepts(Language::Ptx) { &sub.ptx } else { none },
        opts,
        Duration::from_secs_f64(timeouts.compile_s),
    );
    compile_checks.extend(refused.into_iter().map(|(_, c)| c));
    let numba_kernels = if accepts(Language::Numba) {
        numba::compile(rubric, sub, opts)
    } else {
        numba::NumbaKernels::new()
    };
    let mut milestones = Vec::new();
    let mut run = RunInfo {
        device: opts.device_name.clone(),
        arch: opts.arch.clone(),
        timed: opts.backend == BackendKind::Cuda,
        cugrade_version: env!("CARGO_PKG_VERSION").to_string(),
        sandbox: vec![],
        notes: vec![],
    };
    for m in &rb.milestones {
        let max = rubric::milestone_max(m);
        let mut ctx = MilestoneRun {
            rubric,
            sub,
            opts,
            reference,
            m,
            checks: vec![],
            worker: None,
            sandbox: &mut run.sandbox,
            numba: None,
            numba_source: false,
        };
        let result = ctx.grade(&modules, &compile_checks, &numba_kernels);
        if ctx.numba_source {
            for c in &mut ctx.checks {
                numba::speak_numba(c, sub);
            }
        }
        match result {
            Ok(()) => milestones.push(score::finish(m, max, ctx.checks)),
            Err(e) => return Err(e),
        }
    }
    let score: f64 = milestones.iter().map(|m: &MilestoneResult| m.score).sum();
    Ok(GradeResult {
        assignment: rb.assignment.clone(),
        student: sub.student.clone(),
        backend: opts.backend.as_str().to_string(),
        seed: opts.seed,
        score: (score * 100.0).round() / 100.0,
        max_score: rubric.max_score(),
        milestones,
        submission_sha256: sub.sha256.clone(),
        compile: (!sub.sources.is_empty()).then_some(summary),
        run,
        notes: sub.notes.clone(),
    })
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
    numba: Option<crate::compile::numba::Signature>,
    /// The kernel is (or should have been) a Numba kernel: hints speak Numba.
    numba_source: bool,
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
            match numba_kernels.get(&m.kernel) {
                Some(numba::NumbaKernelState::Compiled {
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
                Some(numba::NumbaKernelState::Failed(c)) if modules.is_empty() => {
                    self.numba_source = true;
                    self.checks.push(c.clone());
                    self.checks.push(Check::skipped(
                        CheckKind::Correctness,
                        "correctness",
                        "not run: the kernel does not compile",
                    ));
                    return Ok(());
                }
                Some(numba::NumbaKernelState::Missing(c))
                    if modules.is_empty() && compile_checks.is_empty() =>
                {
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
        if let Some(c) = compile_checks
            .iter()
            .find(|c| c.name == format!("compile {file}"))
            .or(numba_check.as_ref())
        {
            self.checks.push(c.clone());
        }
        let contract = self.rubric.contract(&m.contract);
        // A fresh, confined worker for this milestone.
        let mut worker = match Worker::spawn(&worker_options(
            &self.opts.protected,
            Role::Run,
            self.opts.backend,
            self.opts.device,
        )) {
            Ok(w) => w,
            Err(e) => return Err(Infrastructure(format!("cannot start a worker: {e}"))),
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
            .map(|sig| crate::compile::numba::param_sizes(sig, contract));
        let expected_params = numba_sizes
            .as_ref()
            .map_or_else(|| contract.params.iter().filter(|p| !p.symbol).count(), Vec::len);
        let expected_sizes: Vec<usize> = if let Some(s) = numba_sizes {
            s
        } else {
            contract
            .params
            .iter()
            .filter(|p| !p.symbol)
            .map(|p| match rubric::ParamType::parse(&p.ty) {
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
                "`{}` found with the contract's {} parameters ({} registers)",
                m.kernel, info.param_count, info.registers
            ),
        ));
        self.worker = Some(worker);

        let budget = Duration::from_secs_f64(self.rubric.rubric.timeouts.milestone_s);
        let mut metrics_by_case: HashMap<String, Metrics> = HashMap::new();
        let cases: Vec<Case> = self.rubric.cases_for(m).into_iter().cloned().collect();
        let mut stopped = false;
        for case in &cases {
            if stopped {
                self.checks.push(
                    Check::skipped(
                        CheckKind::Correctness,
                        format!("correctness {}", case.name),
                        "not run: an earlier case crashed or timed out",
                    )
                    .with_case(case.name.clone()),
                );
                continue;
            }
            if started.elapsed() > budget {
                self.checks.push(
                    Check::error(
                        CheckKind::Runtime,
                        format!("correctness {}", case.name),
                        format!(
                            "the milestone's time budget of {:.0} s ran out",
                            budget.as_secs_f64()
                        ),
                    )
                    .with_case(case.name.clone()),
                );
                stopped = true;
                continue;
            }
            let (check, fatal, metrics) =
                self.correctness_case(case, info.max_threads_per_block)?;
            if let Some(mx) = metrics {
                metrics_by_case.insert(case.name.clone(), mx);
            }
            self.checks.extend(check);
            stopped = fatal;
        }
        let correct = self
            .checks
            .iter()
            .filter(|c| score::is_correctness_kind(c.kind))
            .all(|c| c.status == Status::Pass);
        for p in &m.performance {
            let c = if self.opts.backend == BackendKind::Emu {
                Check::skipped(CheckKind::Performance, p.name.clone(), "speed is not measured on the PTX emulator: grade on a GPU (--backend cuda) for this check").with_case(p.case.clone())
            } else if !correct {
                Check::skipped(
                    CheckKind::Performance,
                    p.name.clone(),
                    "not timed: the kernel is not correct yet",
                )
                .with_case(p.case.clone())
            } else {
                self.performance(p, info.max_threads_per_block)?
            };
            self.checks.push(c);
        }
        for x in &m.metrics {
            let c = match metrics_by_case.get(&x.case) {
                Some(mx) => metric_check(x, mx),
                None if self.opts.backend == BackendKind::Cuda => {
                    self.metric_on_emulator(x, ptx, info.max_threads_per_block)
                }
                None => Check::skipped(
                    CheckKind::Metric,
                    x.metric.clone(),
                    format!("no metrics collected for case {}", x.case),
                )
                .with_case(x.case.clone()),
            };
            self.checks.push(c);
        }
        self.worker = None;
        Ok(())
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

    /// Run every trial of one case. Returns the case's checks, whether the worker is gone
    /// (fault or timeout: stop the milestone), and the first trial's emulator metrics.
    fn correctness_case(
        &mut self,
        case: &Case,
        max_threads: u32,
    ) -> Result<(Vec<Check>, bool, Option<Metrics>), Infrastructure> {
        let name = format!("correctness {}", case.name);
        let started = Instant::now();
        let dims = match self.dims_for(case, max_threads) {
            Ok(d) => d,
            Err(e) => {
                let c = Check::fail(
                    CheckKind::Launch,
                    format!("launch {}", case.name),
                    format!("invalid launch configuration: {e}"),
                )
                .with_case(case.name.clone())
                .with_hint(hints::RESOURCES);
                return Ok((vec![c], false, None));
            }
        };
        let ref_dims = self.reference_dims(case)?;
        let contract = self.rubric.contract(&self.m.contract);
        let vars = case_vars(case);
        let limit = Duration::from_secs_f64(self.rubric.rubric.timeouts.launch_s);
        let mut out = Vec::new();
        let mut first_metrics = None;
        let mut diagnostics_seen = std::collections::BTreeSet::new();
        let mut trials_ok = 0u32;
        for trial in 0..self.rubric.rubric.trials {
            let inv = inputs::generate(
                contract,
                &vars,
                inputs::trial_seed(self.opts.seed, &case.name, trial),
            )
            .map_err(|e| Infrastructure(format!("inputs for case {}: {e}", case.name)))?;
            let expected = {
                let k = self.reference_kernel().to_string();
                self.reference
                    .expected(&k, &case.name, trial, &inv, ref_dims, limit)?
            };
            let Some(worker) = self.worker.as_mut() else {
                break;
            };
            let student_inv = student_invocation(&self.numba, &inv, contract)?;
            let ran = run_on(worker, &self.m.kernel, &student_inv, dims, None, limit);
            let printed = worker.output();
            match ran {
                Ok(r) => {
                    if first_metrics.is_none() {
                        first_metrics = r.report.metrics.clone();
                    }
                    for d in &r.report.diagnostics {
                        let key = (
                            d.tool.clone(),
                            d.file.clone(),
                            d.line,
                            d.instruction.clone(),
                        );
                        if diagnostics_seen.insert(key) {
                            out.push(sanitizer_check(d, &case.name));
                        }
                    }
                    let found = self.compare_trial(
                        &inv,
                        &expected,
                        &r.allocations,
                        &vars,
                        case,
                        trial,
                        &printed,
                    );
                    if !found.is_empty() {
                        for (k, c) in found.into_iter().enumerate() {
                            out.push(if k == 0 {
                                c.with_details_append(&printed)
                            } else {
                                c
                            });
                        }
                        break;
                    }
                    trials_ok += 1;
                }
                Err(e) => {
                    let (check, fatal) = runtime_check(&e, &case.name, &printed);
                    out.push(check);
                    if let RunError::Backend(_, report) = &e {
                        for d in &report.diagnostics {
                            out.push(sanitizer_check(d, &case.name));
                        }
                    }
                    if fatal {
                        self.worker = None;
                    }
                    return Ok((out, fatal, first_metrics));
                }
            }
        }
        if !out.iter().any(|c| c.kind == CheckKind::Correctness) {
            let mut c = Check::pass(
                CheckKind::Correctness,
                name,
                format!("values match the reference ({trials_ok} trials on fresh inputs)"),
            )
            .with_case(case.name.clone());
            c.seconds = Some(started.elapsed().as_secs_f64());
            out.push(c);
        }
        Ok((out, false, first_metrics))
    }

    /// Compare one trial: a failed correctness check (if values differ) and one memory check
    /// per stray write or changed input. Empty when everything is right.
    #[allow(clippy::too_many_arguments)]
    fn compare_trial(
        &self,
        inv: &Invocation,
        expected: &[Vec<u8>],
        got: &[Vec<u8>],
        vars: &rubric::expr::Vars,
        case: &Case,
        trial: u32,
        printed: &crate::worker::Captured,
    ) -> Vec<Check> {
        let name = format!("correctness {}", case.name);
        let tol_vars = inv.tolerance_vars(vars);
        let mut problems: Vec<(String, &'static str)> = Vec::new();
        let mut memory: Vec<Check> = Vec::new();
        for (i, b) in inv.buffers.iter().enumerate() {
            let spec = b.spec();
            if let Some(stray) = check::guards(&got[i], spec.bytes, spec.guard) {
                let where_ = if stray.offset < 0 {
                    format!("{} bytes before the start of `{}`", -stray.offset, b.name)
                } else {
                    format!(
                        "past the end of `{}` (at byte {} of a {}-byte buffer)",
                        b.name, stray.offset, spec.bytes
                    )
                };
                memory.push(
                    Check::fail(
                        CheckKind::Memory,
                        format!("bounds {}", b.name),
                        format!("stray write {where_}; {} guard bytes changed", stray.bytes),
                    )
                    .with_hint(hints::OUT_OF_BOUNDS),
                );
            }
            let payload = &got[i][spec.guard..spec.guard + spec.bytes];
            if b.dir == Direction::In {
                if let Some(idx) = check::changed_input(b, payload) {
                    memory.push(
                        Check::fail(
                            CheckKind::Memory,
                            format!("read-only {}", b.name),
                            format!(
                                "the kernel wrote to input `{}` (first change at element {idx})",
                                b.name
                            ),
                        )
                        .with_hint(hints::CONST_WRITTEN),
                    );
                }
                continue;
            }
            let m = self.m;
            let t = b
                .tolerance
                .as_ref()
                .or(m.correctness.tolerance.as_ref())
                .or(Some(&self.rubric.contract(&m.contract).tolerance));
            let tol = match Resolved::from(t, b.elem, &tol_vars) {
                Ok(t) => t,
                Err(e) => {
                    return vec![
                        Check::error(CheckKind::Correctness, name, format!("tolerance: {e}"))
                            .with_case(case.name.clone()),
                    ];
                }
            };
            let exp_payload = &expected[i][spec.guard..spec.guard + spec.bytes];
            let c = check::compare(b, exp_payload, payload, tol);
            if !c.ok() {
                let hint = if c.unwritten > 0 {
                    hints::UNWRITTEN
                } else if c
                    .first
                    .iter()
                    .any(|x| !x.got.is_finite() && x.expected.is_finite())
                {
                    hints::NON_FINITE
                } else {
                    hints::WRONG_RESULTS
                };
                problems.push((c.describe(), hint));
            }
        }
        let mut found: Vec<Check> = memory
            .into_iter()
            .map(|mut c| {
                c.case = Some(case.name.clone());
                c.message = format!("{} (trial {})", c.message, trial + 1);
                c
            })
            .collect();
        let _ = printed;
        if !problems.is_empty() {
            let hint = self
                .m
                .hint
                .clone()
                .unwrap_or_else(|| problems[0].1.to_string());
            let first_line = problems[0].0.lines().next().unwrap_or_default().to_string();
            let details = problems
                .iter()
                .map(|p| p.0.clone())
                .collect::<Vec<_>>()
                .join("\n");
            found.insert(
                0,
                Check::fail(
                    CheckKind::Correctness,
                    name,
                    format!(
                        "wrong results on case {} (trial {}): {first_line}",
                        case.name,
                        trial + 1
                    ),
                )
                .with_case(case.name.clone())
                .with_hint(hint)
                .with_details(details),
            );
        }
        found
    }

    fn performance(
        &mut self,
        p: &crate::rubric::schema::PerfSpec,
        max_threads: u32,
    ) -> Result<Check, Infrastructure> {
        let Some(case) = self.rubric.performance_case(&p.case).cloned() else {
            return Ok(Check::error(
                CheckKind::Performance,
                p.name.clone(),
                format!("unknown case {}", p.case),
            ));
        };
        let dims = match self.dims_for(&case, max_threads) {
            Ok(d) => d,
            Err(e) => {
                return Ok(
                    Check::fail(CheckKind::Launch, format!("launch {}", case.name), e)
                        .with_case(case.name.clone()),
                );
            }
        };
        let contract = self.rubric.contract(&self.m.contract).clone();
        let vars = case_vars(&case);
        let inv = inputs::generate(
            &contract,
            &vars,
            inputs::trial_seed(self.opts.seed, &case.name, 0),
        )
        .map_err(|e| Infrastructure(format!("inputs for case {}: {e}", case.name)))?;
        let limit = Duration::from_secs_f64(self.rubric.rubric.timeouts.launch_s);
        let ref_dims = self.reference_dims(&case)?;
        let expected = {
            let k = self.reference_kernel().to_string();
            self.reference
                .expected(&k, &case.name, 0, &inv, ref_dims, limit)?
        };
        let reps = self.opts.timing_reps;
        let Some(worker) = self.worker.as_mut() else {
            return Ok(Check::skipped(
                CheckKind::Performance,
                p.name.clone(),
                "not timed: the worker stopped earlier",
            ));
        };
        let total_limit = limit * (reps + 4);
        let student_inv = student_invocation(&self.numba, &inv, &contract)?;
        let ran = run_on(
            worker,
            &self.m.kernel,
            &student_inv,
            dims,
            Some(Timing { warmup: 3, reps }),
            total_limit,
        );
        let printed = worker.output();
        let r = match ran {
            Ok(r) => r,
            Err(e) => {
                let (c, fatal) = runtime_check(&e, &case.name, &printed);
                if fatal {
                    self.worker = None;
                }
                return Ok(c);
            }
        };
        // Correct on the big case too: a kernel right only for small sizes earns no speed points.
        if let Some(c) = self
            .compare_trial(&inv, &expected, &r.allocations, &vars, &case, 0, &printed)
            .into_iter()
            .next()
        {
            return Ok(Check {
                kind: CheckKind::Performance,
                name: p.name.clone(),
                ..c
            }
            .with_case(case.name.clone()));
        }
        let student_ms = crate::measure::median(r.times.as_deref().unwrap_or(&[]));
        if student_ms <= 0.0 {
            return Ok(Check::error(
                CheckKind::Performance,
                p.name.clone(),
                "the backend returned no timings",
            )
            .with_case(case.name.clone()));
        }
        let spread = crate::measure::relative_spread(r.times.as_deref().unwrap_or(&[]));
        let (measured, unit, what) = match self.baseline(&p.against, &case, &inv, reps, limit) {
            Ok((base, unit, what)) => {
                let v = if unit == "%" {
                    100.0 * base / (student_ms * 1e-3) / 1e9
                } else {
                    base / student_ms
                };
                (v, unit, what)
            }
            Err(e) => {
                return Ok(Check::error(
                    CheckKind::Performance,
                    p.name.clone(),
                    format!("could not measure the baseline: {e}"),
                )
                .with_case(case.name.clone()));
            }
        };
        let bar = rubric::perf_bar(p);
        let points = score::tier_points(measured, bar, &p.tiers, p.points);
        let status = if measured >= bar {
            Status::Pass
        } else {
            Status::Fail
        };
        let mut c = Check::new(
            CheckKind::Performance,
            p.name.clone(),
            status,
            format!("{measured:.2}{} {what} (needs {bar}{}); kernel median {student_ms:.4} ms over {reps} runs (spread {:.1} %)", unit_suffix(unit), unit_suffix(unit), spread * 100.0),
        )
        .with_case(case.name.clone())
        .with_measure(measured, Some(bar), unit);
        c.points = Some(points);
        if status == Status::Fail {
            c.hint = Some(hints::SLOW.to_string());
        }
        Ok(c)
    }

    /// The baseline: (value, unit, words). For `x` units `value` is a time in ms (ratio =
    /// value / kernel ms); for `%` it is bytes moved and the copy bandwidth.
    fn baseline(
        &mut self,
        against: &Against,
        case: &Case,
        inv: &Invocation,
        reps: u32,
        limit: Duration,
    ) -> Result<(f64, &'static str, String), String> {
        let key = format!("{against:?}/{}", case.name);
        let contract = self.rubric.contract(&self.m.contract).clone();
        match against {
            Against::Cpu | Against::CpuParallel => {
                let threads = if matches!(against, Against::Cpu) {
                    crate::baseline::Threads::Single
                } else {
                    crate::baseline::Threads::Parallel
                };
                let name = contract.cpu.clone().ok_or("no CPU implementation")?;
                let ms = cached(&mut self.reference.baselines, &key, || {
                    cpu_time(&name, inv, case, threads)
                })?;
                let label = if threads == crate::baseline::Threads::Single {
                    "single-threaded CPU"
                } else {
                    "multi-threaded CPU"
                };
                Ok((ms, "x", format!("faster than the {label} ({ms:.3} ms)")))
            }
            Against::Reference(k) => {
                let dims = rubric::eval_launch(&contract.launch, &case_vars(case))?;
                let k = k.clone();
                let reference = &mut *self.reference;
                let ms = match reference.baselines.get(&key) {
                    Some(v) => v.clone(),
                    None => {
                        let v = reference.time(&k, inv, dims, reps, limit * (reps + 4));
                        reference.baselines.insert(key.clone(), v.clone());
                        v
                    }
                }?;
                Ok((
                    ms,
                    "x",
                    format!("faster than the reference `{k}` ({ms:.4} ms)"),
                ))
            }
            Against::Cublas => {
                let g = |v: &str| case.vars.get(v).copied().unwrap_or(0).max(1) as usize;
                let req = Request::Sgemm {
                    m: g("M"),
                    n: g("N"),
                    k: g("K"),
                    reps,
                };
                let ms = match self.reference.baselines.get(&key) {
                    Some(v) => v.clone(),
                    None => {
                        let v = self
                            .reference
                            .measure(req, limit * (reps + 4) + Duration::from_secs(30));
                        self.reference.baselines.insert(key.clone(), v.clone());
                        v
                    }
                }?;
                Ok((ms, "x", format!("of cuBLAS SGEMM's speed ({ms:.4} ms)")))
            }
            Against::CopyBandwidth { bytes } => {
                let b = rubric::expr::Expression::parse(&bytes.source(), rubric::expr::Kind::Int)?
                    .eval_int(&case_vars(case))?
                    .max(1) as f64;
                let copy_bytes = (b as usize / 2).clamp(1 << 20, 1 << 30);
                let gbs = match self.reference.baselines.get("copy_bandwidth") {
                    Some(v) => v.clone(),
                    None => {
                        let v = self.reference.measure(
                            Request::CopyBandwidth { bytes: copy_bytes },
                            Duration::from_secs(60),
                        );
                        self.reference
                            .baselines
                            .insert("copy_bandwidth".into(), v.clone());
                        v
                    }
                }?;
                // measured % = 100 * (bytes / time) / bandwidth: pass bytes/bandwidth as "value".
                Ok((
                    b / gbs,
                    "%",
                    format!("of the device-to-device copy bandwidth ({gbs:.0} GB/s)"),
                ))
            }
        }
    }

    fn metric_on_emulator(
        &mut self,
        x: &crate::rubric::schema::MetricSpec,
        ptx: &str,
        max_threads: u32,
    ) -> Check {
        let Some(case) = self.rubric.correctness_case(&x.case).cloned() else {
            return Check::error(
                CheckKind::Metric,
                x.metric.clone(),
                format!("unknown case {}", x.case),
            );
        };
        let run = (|| -> Result<Option<Metrics>, String> {
            let mut w = Worker::spawn(&worker_options(
                &self.opts.protected,
                Role::Run,
                BackendKind::Emu,
                0,
            ))?;
            match w.call(&Request::Load, &[ptx.as_bytes()], Duration::from_secs(60)) {
                Ok((Response::Loaded { error: None }, _)) => {}
                other => {
                    return Err(format!(
                        "the emulator could not load the module: {:?}",
                        other.map(|r| variant(&r.0))
                    ));
                }
            }
            let dims = self.dims_for(&case, max_threads)?;
            let contract = self.rubric.contract(&self.m.contract);
            let inv = inputs::generate(
                contract,
                &case_vars(&case),
                inputs::trial_seed(self.opts.seed, &case.name, 0),
            )?;
            let student_inv = student_invocation(&self.numba, &inv, contract).map_err(|e| e.0)?;
            match run_on(
                &mut w,
                &self.m.kernel,
                &student_inv,
                dims,
                None,
                Duration::from_secs_f64(self.rubric.rubric.timeouts.launch_s * 10.0),
            ) {
                Ok(r) => Ok(r.report.metrics),
                Err(e) => Err(describe_run_error(&e)),
            }
        })();
        match run {
            Ok(Some(mx)) => metric_check(x, &mx),
            Ok(None) => Check::skipped(
                CheckKind::Metric,
                x.metric.clone(),
                "the emulator returned no metrics",
            )
            .with_case(x.case.clone()),
            Err(e) => Check::skipped(
                CheckKind::Metric,
                x.metric.clone(),
                format!("metrics need the PTX emulator, which could not run this case: {e}"),
            )
            .with_case(x.case.clone()),
        }
    }
}

fn unit_suffix(unit: &str) -> &str {
    if unit == "%" { " %" } else { "x" }
}

fn cached(
    map: &mut HashMap<String, Result<f64, String>>,
    key: &str,
    f: impl FnOnce() -> Result<f64, String>,
) -> Result<f64, String> {
    if let Some(v) = map.get(key) {
        return v.clone();
    }
    let v = f();
    map.insert(key.to_string(), v.clone());
    v
}

/// Time a CPU implementation on the invocation's inputs: median of several runs.
pub fn cpu_time(
    name: &str,
    inv: &Invocation,
    case: &Case,
    threads: crate::baseline::Threads,
) -> Result<f64, String> {
    let f = crate::baseline::lookup(name)
        .ok_or_else(|| format!("unknown CPU implementation {name}"))?;
    let args = host_args(inv, case);
    let mut times = vec![];
    let deadline = Instant::now() + Duration::from_secs(30);
    for _ in 0..7 {
        let mut a = args.clone();
        let t = Instant::now();
        f(&mut a, threads).map_err(|e| e.to_string())?;
        times.push(t.elapsed().as_secs_f64() * 1e3);
        if Instant::now() > deadline && times.len() >= 3 {
            break;
        }
    }
    Ok(crate::measure::median(&times))
}

/// The invocation's buffers and scalars as a CPU implementation sees them.
pub fn host_args(inv: &Invocation, case: &Case) -> crate::baseline::HostArgs {
    use crate::baseline::HostBuffer;
    use crate::rubric::schema::ScalarType as T;
    let mut a = crate::baseline::HostArgs::default();
    for b in &inv.buffers {
        let d = &b.data;
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

fn metric_check(x: &crate::rubric::schema::MetricSpec, mx: &Metrics) -> Check {
    let Some(v) = mx.by_name(&x.metric) else {
        return Check::skipped(
            CheckKind::Metric,
            x.metric.clone(),
            format!("{} is undefined for this run (no such accesses)", x.metric),
        )
        .with_case(x.case.clone());
    };
    let ok = x.min.is_none_or(|m| v >= m) && x.max.is_none_or(|m| v <= m);
    let bound = match (x.min, x.max) {
        (Some(a), Some(b)) => format!("between {a} and {b}"),
        (Some(a), None) => format!("at least {a}"),
        (None, Some(b)) => format!("at most {b}"),
        (None, None) => String::new(),
    };
    let mut c = Check::new(
        CheckKind::Metric,
        x.metric.clone(),
        if ok { Status::Pass } else { Status::Fail },
        format!("{} = {v:.1} (needs {bound})", x.metric),
    )
    .with_case(x.case.clone())
    .with_measure(
        v,
        x.min.or(x.max),
        if x.metric.contains("efficiency") || x.metric.contains("divergence") {
            "%"
        } else {
            ""
        },
    );
    c.points = Some(if ok { x.points } else { 0.0 });
    if !ok {
        c.hint = Some(hints::SLOW.to_string());
    }
    c
}

fn sanitizer_check(d: &crate::backend::Diagnostic, case: &str) -> Check {
    let location = match (&d.file, d.line) {
        (Some(f), Some(l)) => Some(format!("{f}:{l}")),
        _ => None,
    };
    let hint = match d.tool.as_str() {
        "racecheck" => hints::RACE,
        "synccheck" => hints::BARRIER_DIVERGENCE,
        "memcheck" => hints::OUT_OF_BOUNDS,
        "initcheck" => {
            "Shared memory is read before any thread wrote it: initialise it, and put a __syncthreads() between the writes and the reads."
        }
        _ => hints::WRONG_RESULTS,
    };
    let more = if d.repeats > 0 {
        format!(" (and {} more times)", d.repeats)
    } else {
        String::new()
    };
    Check::fail(
        CheckKind::Sanitizer,
        format!("{} {}", d.tool, location.clone().unwrap_or_default())
            .trim()
            .to_string(),
        format!(
            "{}: {} at thread ({},{},{}) of block ({},{},{}){more}",
            d.tool,
            d.message,
            d.thread[0],
            d.thread[1],
            d.thread[2],
            d.block[0],
            d.block[1],
            d.block[2]
        ),
    )
    .with_location(location)
    .with_case(case.to_string())
    .with_hint(hint)
    .with_details(format!("PTX: {}", d.instruction))
}

/// A run that did not complete: timeout, fault or crash. The bool says the worker is gone.
fn runtime_check(e: &RunError, case: &str, printed: &crate::worker::Captured) -> (Check, bool) {
    let name = format!("runtime {case}");
    let (c, fatal) = match e {
        RunError::Worker(WorkerFailure::Timeout(d)) => (
            Check::error(
                CheckKind::Runtime,
                name,
                format!(
                    "timeout: the kernel did not finish within {:.1} s; the worker was killed",
                    d.as_secs_f64()
                ),
            )
            .with_hint(hints::DEADLOCK),
            true,
        ),
        RunError::Backend(BackendError::Timeout(m), _) => (
            Check::error(CheckKind::Runtime, name, format!("timeout: {m}"))
                .with_hint(hints::DEADLOCK),
            true,
        ),
        RunError::Backend(BackendError::Fault(m), _) if m.contains("deadline") => (
            Check::error(CheckKind::Runtime, name, format!("timeout: {m}"))
                .with_hint(hints::DEADLOCK),
            true,
        ),
        RunError::Backend(BackendError::Fault(m), _)
            if m.contains("deadlock") || m.contains("barrier") =>
        {
            (
                Check::error(CheckKind::Runtime, name, format!("deadlock: {m}"))
                    .with_hint(hints::DEADLOCK),
                true,
            )
        }
        RunError::Backend(BackendError::Fault(m), _) => (
            Check::error(CheckKind::Runtime, name, format!("the kernel crashed: {m}"))
                .with_hint(hints::FAULT),
            true,
        ),
        RunError::Backend(BackendError::OutOfMemory(m), _) => (
            Check::error(CheckKind::Runtime, name, format!("out of memory: {m}"))
                .with_hint(hints::RESOURCES),
            false,
        ),
        RunError::Backend(BackendError::Launch(m), _) => (
            Check::fail(
                CheckKind::Launch,
                format!("launch {case}"),
                format!("the launch was refused: {m}"),
            )
            .with_hint(hints::RESOURCES),
            false,
        ),
        RunError::Backend(other, _) => (
            Check::error(CheckKind::Runtime, name, other.to_string()),
            false,
        ),
        RunError::Worker(f) => (
            Check::error(CheckKind::Runtime, name, f.to_string()).with_hint(hints::FAULT),
            true,
        ),
    };
    (
        c.with_case(case.to_string()).with_details(printed.text()),
        fatal,
    )
}

trait AppendDetails {
    fn with_details_append(self, printed: &crate::worker::Captured) -> Self;
}

impl AppendDetails for Check {
    /// Attach what the kernel printed, so a student sees their own printf next to the failure.
    fn with_details_append(mut self, printed: &crate::worker::Captured) -> Self {
        let text = printed.text();
        if !text.trim().is_empty() {
            let d = self.details.take().unwrap_or_default();
            self.details = Some(
                format!("{d}\n\nOutput of the kernel:\n{text}")
                    .trim_start()
                    .to_string(),
            );
        }
        self
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
            let expected = reference.expected(&kernel, &case.name, 0, &inv, dims, limit)?;
            let mut args = host_args(&inv, case);
            if let Err(e) = f(&mut args, crate::baseline::Threads::Single) {
                println!("  {}: CPU `{cpu}` failed on {}: {e}", m.id, case.name);
                ok = false;
                continue;
            }
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
                let tol = Resolved::from(t, b.elem, &tol_vars).map_err(Infrastructure)?;
                let s = b.spec();
                let c =
                    check::compare(b, &cpu_bytes, &expected[i][s.guard..s.guard + s.bytes], tol);
                if !c.ok() {
                    ok = false;
                    println!(
                        "  {}: reference `{kernel}` disagrees with CPU `{cpu}` on case {}:\n    {}",
                        m.id,
                        case.name,
                        c.describe().replace('\n', "\n    ")
                    );
                }
            }
        }
        println!("  {}: reference cross-checked against CPU `{cpu}`", m.id);
    }
    Ok(ok)
}

fn host_bytes(b: &crate::baseline::HostBuffer) -> Vec<u8> {
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
