//! The parent's one typed client for a worker: every request kind is a method, and every
//! answer comes back typed. The answer's own outcome (a module the backend refused, a CuPy
//! import that failed) is the inner value; a worker that did not answer properly (a timeout, a
//! crash, an answer of the wrong kind) is the outer [`WorkerFailure`]. Nothing outside
//! `worker` speaks the wire protocol: unexpected answers, the blob checks, the transfer slack
//! of a run, the GPU's shared lock around runs and the Measure → Staged → timing lock → Go
//! handshake of a timed section live here, once.

use super::parent::{Captured, ReadyInfo, Worker, WorkerFailure, WorkerOptions};
use super::protocol::{Request, Response, RunSpec};
use super::python::{Answer, Call, PyError, PythonStart, Started};
use crate::backend::{BackendError, KernelInfo, LaunchReport};
use crate::compile::SourceFile;
use crate::measure::session::{MeasureSpec, TimingReport};
use crate::measure::{GpuHold, clocks, lock};
use crate::sandbox::access::Blocked;
use serde::Deserialize;
use std::path::PathBuf;
use std::time::{Duration, Instant};

/// A worker, spoken to through typed requests.
pub struct Client {
    pub(super) worker: Worker,
    /// The reference and harness modules of timed sections are loaded (`load_slots`).
    timing_loaded: bool,
    /// A hash of the module `load` last loaded (`holds`).
    module: Option<u64>,
}

fn module_hash(ptx: &str) -> u64 {
    use std::hash::{Hash, Hasher};
    let mut h = std::collections::hash_map::DefaultHasher::new();
    ptx.hash(&mut h);
    h.finish()
}

/// What a compile (`Client::compile`) answered.
#[derive(Debug)]
pub enum CompileAnswer {
    /// NVRTC ran: whether it succeeded, its log, and the PTX (when one came back).
    Compiled {
        ok: bool,
        log: String,
        ptx: Option<String>,
    },
    /// The compile failed and the worker was refused some of the toolchain's files.
    Unreadable(Vec<Blocked>),
}

/// What a Numba compile (`Client::compile_numba`) answered.
#[derive(Debug)]
pub enum NumbaAnswer {
    /// Per requested kernel, with its PTX attached where it compiled; `Err` when the
    /// toolchain itself failed (not the student).
    Compiled(Result<Vec<crate::compile::numba::Outcome>, String>),
    /// The compile failed and the worker was refused some of the toolchain's files.
    Unreadable(Vec<Blocked>),
    /// The answer does not match the request (kernels or PTX missing).
    Mismatch,
}

/// A kernel run's outcome, as the parent validated it.
pub struct Ran {
    /// Whole allocations (guards included), in buffer order.
    pub allocations: Vec<Vec<u8>>,
    pub report: LaunchReport,
    /// The launch itself, start to the kernel's end, as the worker timed it (seconds).
    pub seconds: f64,
}

/// Why a run did not complete.
pub enum RunError {
    /// The backend refused or lost the launch (the report says what it saw).
    Backend(BackendError, Box<LaunchReport>),
    Worker(WorkerFailure),
}

/// What a timed section (`Client::measure`) found.
pub struct Measured {
    pub report: TimingReport,
    /// The GPU's clocks before and after the timed launches, where NVML read both.
    pub clocks: Option<clocks::ClockRecord>,
    /// How long the section waited for and held the GPU's timing lock.
    pub hold: GpuHold,
}

/// Why a timed section has no report.
pub enum MeasureError {
    /// The GPU's timing lock could not be taken (the worker is ended).
    Lock(std::io::Error),
    Worker(WorkerFailure),
}

impl Client {
    /// Start a worker (its role, backend and limits in `opts`).
    pub fn spawn(opts: &WorkerOptions) -> Result<Client, String> {
        Ok(Client {
            worker: Worker::spawn(opts)?,
            timing_loaded: false,
            module: None,
        })
    }

    /// What the worker said when it came up (device, sandbox layers).
    pub fn ready(&self) -> &ReadyInfo {
        &self.worker.ready
    }

    /// Everything the worker printed so far.
    pub fn output(&self) -> Captured {
        self.worker.output()
    }

    /// Forget what the worker printed so far.
    pub fn clear_output(&self) {
        self.worker.clear_output()
    }

    /// Whether the worker still runs and keeps to the protocol.
    pub fn is_alive(&mut self) -> bool {
        self.worker.is_alive()
    }

    /// End the worker and everything it started.
    pub fn kill(&mut self) {
        self.worker.kill()
    }

    /// Confirm from the host's side a worker's report that it was refused toolchain files
    /// (see `Worker::unreadable`).
    pub fn unreadable(&self, paths: &[Blocked], roots: &[PathBuf]) -> Option<String> {
        self.worker.unreadable(paths, roots)
    }

    /// Whether the reference and harness modules of timed sections are loaded.
    pub fn timing_loaded(&self) -> bool {
        self.timing_loaded
    }

    pub(super) fn call(
        &mut self,
        req: &Request,
        blobs: &[&[u8]],
        timeout: Duration,
    ) -> Result<(Response, Vec<Vec<u8>>), WorkerFailure> {
        self.worker.call(req, blobs, timeout)
    }

    /// An answer of the wrong kind: the worker is ended, and the failure says what came.
    pub(super) fn unexpected(&mut self, r: &Response) -> WorkerFailure {
        self.worker.kill();
        WorkerFailure::Protocol(match r {
            Response::Failed { message } => format!("unexpected answer Failed ({message})"),
            other => format!("unexpected answer {}", variant(other)),
        })
    }

    /// Compile `main` (with `headers`) for `arch` with NVRTC.
    pub fn compile(
        &mut self,
        main: &SourceFile,
        headers: &[SourceFile],
        arch: &str,
        include_dirs: &[PathBuf],
        timeout: Duration,
    ) -> Result<CompileAnswer, WorkerFailure> {
        let req = Request::Compile {
            main: main.clone(),
            headers: headers.to_vec(),
            arch: arch.to_string(),
            include_dirs: include_dirs.to_vec(),
        };
        match self.call(&req, &[], timeout)? {
            (Response::Compiled { ok, log }, blobs) => Ok(CompileAnswer::Compiled {
                ok,
                log,
                ptx: blobs
                    .first()
                    .map(|b| String::from_utf8_lossy(b).into_owned()),
            }),
            (Response::Unreadable { paths }, _) => Ok(CompileAnswer::Unreadable(paths)),
            (other, _) => Err(self.unexpected(&other)),
        }
    }

    /// Compile Numba kernels from `.py` files with the toolchain's Python.
    #[allow(clippy::too_many_arguments)]
    pub fn compile_numba(
        &mut self,
        files: &[SourceFile],
        kernels: &[crate::compile::numba::NumbaKernel],
        arch: &str,
        toolchain: crate::compile::toolchain::NumbaToolchain,
        import: Duration,
        timeout: Duration,
    ) -> Result<NumbaAnswer, WorkerFailure> {
        let req = Request::CompileNumba {
            files: files.to_vec(),
            kernels: kernels.to_vec(),
            arch: arch.to_string(),
            toolchain,
            import_s: import.as_secs_f64(),
        };
        match self.call(&req, &[], timeout)? {
            (Response::NumbaCompiled(Ok(o)), blobs) => {
                let ok = o.iter().filter(|x| x.ok).count();
                if o.len() != kernels.len() || blobs.len() != ok {
                    return Ok(NumbaAnswer::Mismatch);
                }
                let mut blobs = blobs.into_iter();
                Ok(NumbaAnswer::Compiled(Ok(o
                    .into_iter()
                    .map(|mut x| {
                        if x.ok {
                            x.ptx = blobs
                                .next()
                                .map(|b| String::from_utf8_lossy(&b).into_owned());
                        }
                        x
                    })
                    .collect())))
            }
            (Response::NumbaCompiled(Err(e)), _) => Ok(NumbaAnswer::Compiled(Err(e))),
            (Response::Unreadable { paths }, _) => Ok(NumbaAnswer::Unreadable(paths)),
            (other, _) => Err(self.unexpected(&other)),
        }
    }

    /// Import CuPy modules with cugrade's `cupy` stand-in and read their kernel definitions.
    /// `Err` inside when the machinery failed.
    pub fn extract_cupy(
        &mut self,
        files: &[SourceFile],
        entries: Vec<String>,
        interpreter: crate::compile::cupy::Interpreter,
        timeout: Duration,
    ) -> Result<Result<crate::compile::cupy::Extracted, String>, WorkerFailure> {
        let req = Request::ExtractCupy {
            files: files.to_vec(),
            entries,
            interpreter,
        };
        match self.call(&req, &[], timeout)? {
            (Response::CupyExtracted(x), _) => Ok(x),
            (other, _) => Err(self.unexpected(&other)),
        }
    }

    /// Assemble `ptx` for `arch` with the nvJitLink at `library`: ptxas's verbose log, or
    /// (inside) what failed.
    pub fn assemble(
        &mut self,
        ptx: &str,
        arch: &str,
        library: &std::path::Path,
        timeout: Duration,
    ) -> Result<Result<String, String>, WorkerFailure> {
        let req = Request::Assemble {
            arch: arch.to_string(),
            library: library.to_path_buf(),
        };
        match self.call(&req, &[ptx.as_bytes()], timeout)? {
            (Response::Compiled { ok: true, log }, _) => Ok(Ok(log)),
            (Response::Compiled { ok: false, log }, _) => Ok(Err(log)),
            (other, _) => Err(self.unexpected(&other)),
        }
    }

    /// Load `ptx` on the worker's backend; inside, the backend's refusal.
    pub fn load(
        &mut self,
        ptx: &str,
        timeout: Duration,
    ) -> Result<Result<(), BackendError>, WorkerFailure> {
        self.module = None;
        match self.call(&Request::Load, &[ptx.as_bytes()], timeout)? {
            (Response::Loaded { error: None }, _) => {
                self.module = Some(module_hash(ptx));
                Ok(Ok(()))
            }
            (Response::Loaded { error: Some(e) }, _) => Ok(Err(e)),
            (other, _) => Err(self.unexpected(&other)),
        }
    }

    /// Whether `ptx` is the module `load` last loaded.
    pub fn holds(&self, ptx: &str) -> bool {
        self.module == Some(module_hash(ptx))
    }

    /// Load the reference and harness modules of timed sections into their slots, so that
    /// the driver's JIT compiles them outside any timed section; remembered once done.
    pub fn load_slots(
        &mut self,
        reference: &str,
        harness: &str,
        timeout: Duration,
    ) -> Result<Result<(), BackendError>, WorkerFailure> {
        let blobs = [reference.as_bytes(), harness.as_bytes()];
        match self.call(&Request::LoadSlots, &blobs, timeout)? {
            (Response::Loaded { error: None }, _) => {
                self.timing_loaded = true;
                Ok(Ok(()))
            }
            (Response::Loaded { error: Some(e) }, _) => Ok(Err(e)),
            (other, _) => Err(self.unexpected(&other)),
        }
    }

    /// What the loaded module says of `kernel`.
    pub fn kernel_info(
        &mut self,
        kernel: &str,
        timeout: Duration,
    ) -> Result<Result<KernelInfo, BackendError>, WorkerFailure> {
        let req = Request::KernelInfo {
            kernel: kernel.to_string(),
        };
        match self.call(&req, &[], timeout)? {
            (Response::KernelInfo(i), _) => Ok(i),
            (other, _) => Err(self.unexpected(&other)),
        }
    }

    /// Allocate, fill from `allocations` (whole, guards included), launch, read back. The
    /// kernel may take `limit`; transfers get slack on top. With `gpu_lock`, the run holds
    /// that GPU's shared lock: it shares the GPU with other correctness runs, never with a
    /// timed section.
    pub fn run(
        &mut self,
        spec: RunSpec,
        allocations: &[Vec<u8>],
        limit: Duration,
        gpu_lock: Option<&str>,
    ) -> Result<Ran, RunError> {
        let specs = spec.buffers.clone();
        let refs: Vec<&[u8]> = allocations.iter().map(Vec::as_slice).collect();
        let bytes: usize = allocations.iter().map(Vec::len).sum();
        // Transfers take time too: allow ~1 s per 200 MB each way on top of the kernel's limit.
        let slack = Duration::from_secs(5) + Duration::from_millis((bytes / 100_000) as u64);
        let _shared = gpu_lock.and_then(|k| lock::shared(k, "run").ok());
        match self.call(&Request::Run(spec), &refs, limit + slack) {
            Ok((
                Response::Ran {
                    error: None,
                    report,
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
                Ok(Ran {
                    seconds: report.seconds,
                    allocations: blobs,
                    report,
                })
            }
            Ok((
                Response::Ran {
                    error: Some(e),
                    report,
                },
                _,
            )) => Err(RunError::Backend(e, Box::new(report))),
            Ok((other, _)) => Err(RunError::Worker(self.unexpected(&other))),
            Err(f) => Err(RunError::Worker(f)),
        }
    }

    /// One timed section: the worker sets up (`Measure`, under the GPU's shared lock,
    /// alongside other jobs' correctness runs) and answers `Staged`; then the GPU's timing
    /// lock is taken (nothing else runs on that GPU while the kernel is timed), the clocks
    /// are read, `Go` starts the timed launches, and the clocks are read again. A setup that
    /// failed answers at once: its report says how. `blobs`: reference PTX, harness PTX,
    /// every buffer's initial allocation.
    pub fn measure(
        &mut self,
        spec: &MeasureSpec,
        blobs: &[&[u8]],
        timeout: Duration,
        gpu: Option<&str>,
    ) -> Result<Measured, MeasureError> {
        let staged = {
            let _shared = gpu.and_then(|k| lock::shared(k, "setup").ok());
            self.call(&Request::Measure(Box::new(spec.clone())), blobs, timeout)
        };
        let asked = Instant::now();
        let (answer, before, after, got) = match staged {
            Ok((Response::Staged, _)) => {
                let held = match gpu.map(|k| lock::timing(k, "timed")) {
                    Some(Err(e)) => {
                        self.worker.kill();
                        return Err(MeasureError::Lock(e));
                    }
                    Some(Ok(l)) => Some(l),
                    None => None,
                };
                let got = Instant::now();
                let before = gpu.and_then(clocks::read);
                let answer = self.call(&Request::Go, &[], timeout);
                let after = gpu.and_then(clocks::read);
                drop(held);
                (answer, before, after, got)
            }
            // The setup failed: the report says how.
            other => (other, None, None, asked),
        };
        let held_s = got.elapsed().as_secs_f64();
        let report = match answer {
            Ok((Response::Timed(r), _)) => *r,
            Ok((other, _)) => return Err(MeasureError::Worker(self.unexpected(&other))),
            Err(f) => return Err(MeasureError::Worker(f)),
        };
        let clocks = match (before, after) {
            (Some(b), Some(a)) => Some(clocks::ClockRecord::new(b, a)),
            _ => None,
        };
        let hold = GpuHold {
            waited_s: (got - asked).as_secs_f64(),
            held_s,
            setup_s: report.setup_s,
        };
        Ok(Measured {
            report,
            clocks,
            hold,
        })
    }

    /// Profile a kernel for the speed estimate on the emulator (`estimate::sample`). Blobs:
    /// the module's PTX, then every buffer's whole allocation. Inside, why it could not.
    pub fn estimate(
        &mut self,
        spec: crate::estimate::sample::EstimateSpec,
        blobs: &[&[u8]],
        timeout: Duration,
    ) -> Result<Result<crate::estimate::model::KernelProfile, String>, WorkerFailure> {
        match self.call(&Request::Estimate(Box::new(spec)), blobs, timeout)? {
            (Response::Estimated(p), _) => Ok(p.map(|p| *p)),
            (other, _) => Err(self.unexpected(&other)),
        }
    }

    /// Extract the source files of `archive` (named `name`, for messages): each kept file's
    /// path and bytes, or (inside) why the archive was refused.
    pub fn unpack(
        &mut self,
        kind: crate::submission::archive::ArchiveKind,
        name: &str,
        archive: &[u8],
        timeout: Duration,
    ) -> Result<Result<Vec<crate::submission::archive::Kept>, String>, WorkerFailure> {
        let req = Request::Unpack {
            kind,
            name: name.to_string(),
        };
        match self.call(&req, &[archive], timeout)? {
            (Response::Unpacked(Ok(paths)), blobs) if paths.len() == blobs.len() => {
                Ok(Ok(paths.into_iter().zip(blobs).collect()))
            }
            (Response::Unpacked(Err(why)), _) => Ok(Err(why)),
            (other, _) => Err(self.unexpected(&other)),
        }
    }
}

/// The name of an answer's kind, for messages.
fn variant(r: &Response) -> &'static str {
    match r {
        Response::Ready { .. } => "Ready",
        Response::Compiled { .. } => "Compiled",
        Response::Loaded { .. } => "Loaded",
        Response::NumbaCompiled(_) => "NumbaCompiled",
        Response::CupyExtracted(_) => "CupyExtracted",
        Response::KernelInfo(_) => "KernelInfo",
        Response::Ran { .. } => "Ran",
        Response::Staged => "Staged",
        Response::Timed(_) => "Timed",
        Response::Estimated(_) => "Estimated",
        Response::Unreadable { .. } => "Unreadable",
        Response::Failed { .. } => "Failed",
        Response::Unpacked(_) => "Unpacked",
        Response::Python { .. } => "Python",
        Response::RanRanks { .. } => "RanRanks",
        Response::TimedRanks(_) => "TimedRanks",
    }
}

/// A course CPU implementation's call: its own time and its outputs' bytes, in order.
pub struct CpuAnswer {
    pub ms: f64,
    pub outputs: Vec<Vec<u8>>,
}

// Function labs (`worker::python`): the harness's two requests.
#[derive(Deserialize)]
pub(super) struct RawAnswer {
    #[serde(default)]
    ready: Option<bool>,
    #[serde(default)]
    machine: bool,
    #[serde(default)]
    backend: String,
    #[serde(default)]
    errors: Vec<PyError>,
    #[serde(default)]
    error: Option<PyError>,
    #[serde(default)]
    dtype: Option<String>,
    #[serde(default)]
    shape: Vec<usize>,
    /// A CPU implementation's call (`Call::cpu`): its own time, in ms.
    #[serde(default)]
    ms: Option<f64>,
}

impl Client {
    /// Turn a [`Role::Python`](super::Role) worker into the harness for `start`.
    pub fn python_start(
        &mut self,
        start: &PythonStart,
        timeout: Duration,
    ) -> Result<Started, WorkerFailure> {
        let (r, _) = self.call(&Request::PythonStart(Box::new(start.clone())), &[], timeout)?;
        let raw = self.python_answer(r)?;
        Ok(match (raw.ready, raw.machine, raw.error) {
            (Some(true), _, _) => Started::Ready {
                backend: raw.backend,
            },
            (_, true, Some(e)) => Started::Machine(e),
            (_, _, Some(e)) => Started::NoFunction(vec![e]),
            _ => Started::NoFunction(raw.errors),
        })
    }

    /// One call of the function on `call`'s table (`columns`: the columns' bytes, in order).
    pub fn python_call(
        &mut self,
        call: &Call,
        columns: &[&[u8]],
        timeout: Duration,
    ) -> Result<Answer, WorkerFailure> {
        let json =
            serde_json::to_string(call).map_err(|e| WorkerFailure::Protocol(e.to_string()))?;
        let (r, mut blobs) = self.call(&Request::Python { json }, columns, timeout)?;
        let raw = self.python_answer(r)?;
        if let Some(e) = raw.error {
            return Ok(Answer::Raised(e));
        }
        match (raw.dtype, blobs.len()) {
            (Some(dtype), 1) => Ok(Answer::Array {
                dtype,
                shape: raw.shape,
                bytes: blobs.pop().unwrap_or_default(),
            }),
            _ => {
                self.kill();
                Err(WorkerFailure::Protocol(
                    "the harness answered without an array".into(),
                ))
            }
        }
    }

    /// One call of a course's CPU implementation (`call.cpu` set): `buffers` are every buffer's
    /// bytes in the call's column order; the answer is the function's own time in ms and the
    /// bytes of the buffers `call.cpu` names, in that order.
    pub fn python_cpu_call(
        &mut self,
        call: &Call,
        buffers: &[&[u8]],
        timeout: Duration,
    ) -> Result<Result<CpuAnswer, PyError>, WorkerFailure> {
        let json =
            serde_json::to_string(call).map_err(|e| WorkerFailure::Protocol(e.to_string()))?;
        let (r, blobs) = self.call(&Request::Python { json }, buffers, timeout)?;
        let raw = self.python_answer(r)?;
        if let Some(e) = raw.error {
            return Ok(Err(e));
        }
        let want = call.cpu.as_ref().map_or(0, Vec::len);
        match raw.ms {
            Some(ms) if blobs.len() == want && ms.is_finite() && ms >= 0.0 => {
                Ok(Ok(CpuAnswer { ms, outputs: blobs }))
            }
            _ => {
                self.kill();
                Err(WorkerFailure::Protocol(
                    "the harness answered a CPU call without its time and outputs".into(),
                ))
            }
        }
    }

    fn python_answer(&mut self, r: Response) -> Result<RawAnswer, WorkerFailure> {
        match r {
            Response::Python { json } => serde_json::from_str(&json).map_err(|e| {
                self.kill();
                WorkerFailure::Protocol(format!("malformed answer from the harness: {e}"))
            }),
            other => Err(self.unexpected(&other)),
        }
    }
}
