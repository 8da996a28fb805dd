//! The worker side: `cugrade __worker`, the same binary re-executed by the parent.
//!
//! Order matters. The worker first takes its protocol channel off fd 1 and points fd 1 at the
//! captured stderr stream, so that nothing the student's code prints (device printf goes to
//! stdout) can reach the protocol. Then it confines itself (`sandbox::apply`) while still
//! single-threaded, and only then starts a backend or reads untrusted input.

use super::protocol::{Arg, Request, Response, RunSpec, read_frame, write_frame};
use crate::backend::{Backend, BackendError, BackendKind, ParamValue};
use crate::sandbox;
use serde::{Deserialize, Serialize};
use std::fs::File;
use std::io::{BufReader, BufWriter, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::time::{Duration, Instant};

/// What a worker is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub enum Role {
    /// NVRTC only: no backend.
    Compile,
    /// Load, launch, time.
    Run,
    /// Extract a student's archive: no backend, no toolchain.
    Unpack,
    /// Become the Python harness of a function lab (`worker::python`): no backend here; CuPy
    /// starts its own CUDA after the `exec`.
    Python,
}

/// Everything the worker is told on its command line (one JSON argument).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct WorkerConfig {
    pub role: Role,
    pub backend: BackendKind,
    pub device: usize,
    pub policy: sandbox::Policy,
    /// Largest request the worker accepts, in bytes of blobs.
    pub max_request_bytes: usize,
    /// The folder to load NVRTC from when the system has none (the parent's cugrade cache:
    /// the worker's `HOME` is its temp dir). The policy lets the worker read it.
    #[serde(default)]
    pub nvrtc_dir: Option<std::path::PathBuf>,
    /// A rank worker (`worker::ranks`): its GPUs, one a rank (on the emulator, as many
    /// emulated devices as it names). Empty: one device, `device`.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub ranks: Vec<usize>,
}

/// Entry point of `cugrade __worker CONFIG_JSON`. Returns the exit code.
pub fn main(config_json: &str) -> i32 {
    let config: WorkerConfig = match serde_json::from_str(config_json) {
        Ok(c) => c,
        Err(e) => {
            eprintln!("cugrade worker: bad configuration: {e}");
            return 3;
        }
    };
    // SAFETY: fds 1 and 2 are open (the parent gave us pipes); dup/dup2 are plain syscalls.
    let proto = unsafe {
        let fd = libc::dup(1);
        if fd < 0 || libc::dup2(2, 1) < 0 {
            eprintln!("cugrade worker: cannot set up the protocol channel");
            return 3;
        }
        File::from_raw_fd(fd)
    };
    let mut out = BufWriter::new(proto);
    if let Some(dir) = &config.nvrtc_dir {
        crate::compile::nvrtc_lib::use_dir(dir.clone());
    }
    let sandbox_report = sandbox::apply(&config.policy);
    let mut input = BufReader::new(std::io::stdin().lock());

    let mut backend: Option<Box<dyn Backend>> = None;
    let mut ranks: Option<Box<dyn crate::backend::ranks::RankSet>> = None;
    let (mut device, mut arch) = (String::new(), String::new());
    if config.role == Role::Run && !config.ranks.is_empty() {
        match super::ranks::make_rank_set(config.backend, &config.ranks) {
            Ok(set) => {
                device = set.device_name();
                ranks = Some(set);
            }
            Err(e) => {
                let _ = write_frame(&mut out, &Response::Failed { message: e }, &[]);
                return 3;
            }
        }
    } else if config.role == Role::Run {
        match make_backend(config.backend, config.device).and_then(|(mut b, a)| {
            if config.backend.caps().device {
                smoke_test(b.as_mut())?;
            }
            Ok((b, a))
        }) {
            Ok((b, a)) => {
                device = b.device_name();
                arch = a;
                backend = Some(b);
            }
            Err(e) => {
                let _ = write_frame(&mut out, &Response::Failed { message: e }, &[]);
                return 3;
            }
        }
    }
    let ready = Response::Ready {
        backend: config.backend,
        device,
        arch,
        sandbox: sandbox_report.lines(),
    };
    if write_frame(&mut out, &ready, &[]).is_err() {
        return 3;
    }
    loop {
        let (req, blobs) = match read_frame::<Request>(&mut input, config.max_request_bytes) {
            Ok(Some(f)) => f,
            Ok(None) => return 0,
            Err(e) => {
                let _ = write_frame(
                    &mut out,
                    &Response::Failed {
                        message: format!("bad request: {e}"),
                    },
                    &[],
                );
                return 3;
            }
        };
        if let Request::PythonStart(start) = &req {
            let message = if config.role == Role::Python {
                let _ = out.flush();
                let temp = std::env::current_dir().unwrap_or_else(|_| std::env::temp_dir());
                let why = super::python::exec(start, &temp, out.get_ref().as_raw_fd());
                // SAFETY: point fd 1 back at the captured stderr after a failed exec.
                unsafe { libc::dup2(2, 1) };
                why
            } else {
                "this worker is not a Python worker".into()
            };
            let _ = write_frame(&mut out, &Response::Failed { message }, &[]);
            return 3;
        }
        let (resp, out_blobs, fatal) = {
            // A `Measure` tells the parent it is set up and waits for its `Go`.
            let max = config.max_request_bytes;
            let mut gate = || -> Result<(), BackendError> {
                let _ = std::io::stdout().flush();
                write_frame(&mut out, &Response::Staged, &[])
                    .map_err(|e| BackendError::Other(format!("cannot answer the parent: {e}")))?;
                match read_frame::<Request>(&mut input, max) {
                    Ok(Some((Request::Go, _))) => Ok(()),
                    Ok(Some((other, _))) => Err(BackendError::Other(format!(
                        "expected the parent's go, got {other:?}"
                    ))),
                    Ok(None) => Err(BackendError::Other("the parent went away".into())),
                    Err(e) => Err(BackendError::Other(format!("bad request: {e}"))),
                }
            };
            match ranks.as_deref_mut() {
                Some(set) => super::ranks::serve(set, req, blobs, &mut gate),
                None => serve(req, blobs, &mut backend, &mut gate),
            }
        };
        let refs: Vec<&[u8]> = out_blobs.iter().map(Vec::as_slice).collect();
        // Flush what the kernel printed before answering, so the parent has it with the answer.
        let _ = std::io::stdout().flush();
        if write_frame(&mut out, &resp, &refs).is_err() {
            return 3;
        }
        if fatal {
            // A faulted CUDA context is unusable: end here, the parent starts a fresh worker.
            return 0;
        }
    }
}

/// A GPU worker's first use of the driver inside its sandbox: JIT-load a module and copy a
/// page to the device and back, so that a sandbox layer the driver cannot live with fails the
/// worker's start (where the grader retries without the layers that may be at fault) rather
/// than a student's launch.
fn smoke_test(b: &mut dyn Backend) -> Result<(), String> {
    const PTX: &str = ".version 7.0\n.target sm_50\n.address_size 64\n\
                       .visible .entry cugrade_smoke()\n{\n\tret;\n}\n";
    let fail = |what: &str, e: BackendError| format!("CUDA inside the sandbox: {what}: {e}");
    b.load_module(PTX)
        .map_err(|e| fail("loading a module", e))?;
    let page: Vec<u8> = (0..4096u32).map(|i| i as u8).collect();
    let a = b.alloc(page.len()).map_err(|e| fail("cuMemAlloc", e))?;
    b.write(a, &page)
        .map_err(|e| fail("copy to the device", e))?;
    let back = b
        .read(a, page.len())
        .map_err(|e| fail("copy from the device", e))?;
    b.free_all().map_err(|e| fail("cuMemFree", e))?;
    if back != page {
        return Err(
            "CUDA inside the sandbox: a page copied to the device came back changed".into(),
        );
    }
    Ok(())
}

pub(super) fn make_backend(
    kind: BackendKind,
    device: usize,
) -> Result<(Box<dyn Backend>, String), String> {
    match kind {
        BackendKind::Cuda => {
            let b = crate::backend::cuda::CudaBackend::new(device).map_err(|e| e.to_string())?;
            let arch = b.arch();
            Ok((Box::new(b), arch))
        }
        BackendKind::Emu => Ok((
            Box::new(crate::backend::emu::EmuBackend::new()),
            "sm_90".into(),
        )),
    }
}

type Served = (Response, Vec<Vec<u8>>, bool);

/// Answer one request of [`main`]'s loop: one function per request kind.
fn serve(
    req: Request,
    blobs: Vec<Vec<u8>>,
    backend: &mut Option<Box<dyn Backend>>,
    gate: &mut dyn FnMut() -> Result<(), BackendError>,
) -> Served {
    let backend = backend.as_deref_mut();
    match req {
        Request::Compile {
            main,
            headers,
            arch,
            include_dirs,
        } => serve_compile(&main, &headers, &arch, &include_dirs),
        Request::CompileNumba {
            files,
            kernels,
            arch,
            toolchain,
            import_s,
        } => serve_compile_numba(&files, &kernels, &arch, &toolchain, import_s),
        Request::ExtractCupy {
            files,
            entries,
            interpreter,
        } => {
            let temp = std::env::current_dir().unwrap_or_else(|_| std::env::temp_dir());
            let r = crate::compile::cupy::extract(&interpreter, &files, &entries, &temp);
            (Response::CupyExtracted(r), vec![], false)
        }
        Request::Assemble { arch, library } => serve_assemble(&arch, &library, &blobs),
        Request::Load => match backend {
            Some(b) => serve_load(b, &blobs),
            None => no_backend(),
        },
        Request::LoadSlots => match backend {
            Some(b) => serve_load_slots(b, &blobs),
            None => no_backend(),
        },
        Request::KernelInfo { kernel } => match backend {
            Some(b) => (Response::KernelInfo(b.kernel_info(&kernel)), vec![], false),
            None => no_backend(),
        },
        Request::Run(spec) => match backend {
            Some(b) => serve_run(b, &spec, blobs),
            None => no_backend(),
        },
        Request::Measure(spec) => match backend {
            Some(b) => serve_measure(b, &spec, &blobs, gate),
            None => no_backend(),
        },
        Request::Estimate(spec) => (
            Response::Estimated(crate::estimate::sample::run(&spec, &blobs).map(Box::new)),
            vec![],
            false,
        ),
        Request::Go => failed("go without a measurement in progress"),
        Request::PythonStart(_) | Request::Python { .. } => {
            failed("this worker is not a Python harness")
        }
        Request::Unpack { kind, name: _ } => serve_unpack(kind, &blobs),
        Request::RunRanks(_) | Request::MeasureRanks(_) => failed("this worker has no rank set"),
    }
}

/// A `Failed` answer that leaves the worker running.
fn failed(message: &str) -> Served {
    (
        Response::Failed {
            message: message.into(),
        },
        vec![],
        false,
    )
}

/// The answer to a backend's request in a worker without one.
fn no_backend() -> Served {
    failed("this worker has no backend")
}

/// `Compile`: NVRTC, with the toolchain's files the sandbox refused when they may be at fault.
fn serve_compile(
    main: &crate::compile::SourceFile,
    headers: &[crate::compile::SourceFile],
    arch: &str,
    include_dirs: &[std::path::PathBuf],
) -> Served {
    let c = crate::compile::compile(main, headers, &crate::compile::options(arch, include_dirs));
    if !c.ok && toolchain_suspect(&c.log) {
        let mut roots = include_dirs.to_vec();
        roots.extend(library_path());
        let paths = sandbox::access::blocked(&roots);
        if !paths.is_empty() {
            return (Response::Unreadable { paths }, vec![], false);
        }
    }
    let ptx = if c.ok {
        vec![c.ptx.into_bytes()]
    } else {
        vec![]
    };
    (
        Response::Compiled {
            ok: c.ok,
            log: c.log,
        },
        ptx,
        false,
    )
}

/// `CompileNumba`: the toolchain's Python, with its files the sandbox refused when it failed.
fn serve_compile_numba(
    files: &[crate::compile::SourceFile],
    kernels: &[crate::compile::numba::NumbaKernel],
    arch: &str,
    toolchain: &crate::compile::toolchain::NumbaToolchain,
    import_s: f64,
) -> Served {
    let temp = std::env::current_dir().unwrap_or_else(|_| std::env::temp_dir());
    let budget = Duration::from_secs_f64(import_s.clamp(0.1, 3600.0));
    let r = crate::compile::numba::compile(toolchain, files, kernels, arch, &temp, budget);
    if r.is_err() {
        // The toolchain failed: were we refused its files?
        let mut roots = toolchain.read_dirs.clone();
        roots.push(toolchain.site.clone());
        let paths = sandbox::access::blocked(&roots);
        if !paths.is_empty() {
            return (Response::Unreadable { paths }, vec![], false);
        }
    }
    let ptx: Vec<Vec<u8>> = match &r {
        Ok(outcomes) => outcomes
            .iter()
            .filter_map(|o| o.ptx.clone().map(String::into_bytes))
            .collect(),
        Err(_) => vec![],
    };
    (Response::NumbaCompiled(r), ptx, false)
}

/// `Assemble`: ptxas's verbose output for the PTX in blob 0, through nvJitLink.
fn serve_assemble(arch: &str, library: &std::path::Path, blobs: &[Vec<u8>]) -> Served {
    let ptx = blobs
        .first()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .unwrap_or_default();
    let (ok, log) = match crate::compile::jitlink::assemble(library, &ptx, arch) {
        Ok(log) => (true, log),
        Err(e) => (false, e),
    };
    (Response::Compiled { ok, log }, vec![], false)
}

/// `Load`: the PTX in blob 0 on the backend.
fn serve_load(b: &mut dyn Backend, blobs: &[Vec<u8>]) -> Served {
    let ptx = blobs
        .first()
        .map(|p| String::from_utf8_lossy(p).into_owned())
        .unwrap_or_default();
    (
        Response::Loaded {
            error: b.load_module(&ptx).err(),
        },
        vec![],
        false,
    )
}

/// `LoadSlots`: the reference (blob 0) and harness (blob 1) PTX into the timer's slots.
fn serve_load_slots(b: &mut dyn Backend, blobs: &[Vec<u8>]) -> Served {
    let text = |i: usize| String::from_utf8_lossy(blobs.get(i).map_or(&[][..], |b| b)).into_owned();
    let error = match b.timer() {
        None => Some(BackendError::Other(
            "this backend cannot time kernels".into(),
        )),
        Some(t) => t
            .load_slot(crate::backend::Slot::Reference, &text(0))
            .and_then(|()| t.load_slot(crate::backend::Slot::Harness, &text(1)))
            .err(),
    };
    (Response::Loaded { error }, vec![], false)
}

/// `Run`: launch and read back ([`run`]); a fault or a timeout ends the worker.
fn serve_run(b: &mut dyn Backend, spec: &RunSpec, blobs: Vec<Vec<u8>>) -> Served {
    match run(b, spec, blobs) {
        Ok((report, bufs)) => (
            Response::Ran {
                error: None,
                report,
            },
            bufs,
            false,
        ),
        Err(boxed) => {
            let (e, report) = *boxed;
            let fatal = matches!(e, BackendError::Fault(_) | BackendError::Timeout(_));
            (
                Response::Ran {
                    error: Some(e),
                    report,
                },
                vec![],
                fatal,
            )
        }
    }
}

/// `Measure`: one timed section (`measure::session`), `gate` waiting for the parent's `Go`.
fn serve_measure(
    b: &mut dyn Backend,
    spec: &crate::measure::session::MeasureSpec,
    blobs: &[Vec<u8>],
    gate: &mut dyn FnMut() -> Result<(), BackendError>,
) -> Served {
    let _ = b.free_all();
    let Some(t) = b.timer() else {
        return failed("this backend cannot time kernels");
    };
    let report = crate::measure::session::run(t, spec, blobs, gate);
    // A fault or a timeout leaves the CUDA context unusable: end the worker.
    let fatal = matches!(
        &report.problem,
        Some(crate::measure::session::Problem::Failed {
            error: BackendError::Fault(_) | BackendError::Timeout(_),
            ..
        })
    );
    // After a fault or a timeout the kernel may still be running: freeing memory would
    // wait for it. The worker ends instead, and the parent kills it.
    if !fatal {
        let _ = b.free_all();
    }
    (Response::Timed(Box::new(report)), vec![], fatal)
}

/// `Unpack`: the source files of the archive in blob 0, one blob per file kept.
fn serve_unpack(kind: crate::submission::archive::ArchiveKind, blobs: &[Vec<u8>]) -> Served {
    let bytes = blobs.first().map(Vec::as_slice).unwrap_or_default();
    // A panic in an archive crate is this archive's problem, said as such.
    let found = std::panic::catch_unwind(|| crate::submission::archive::extract(kind, bytes))
        .unwrap_or_else(|_| Err("the archive crashed its reader".into()));
    match found {
        Ok(files) => {
            let (paths, data): (Vec<String>, Vec<Vec<u8>>) = files.into_iter().unzip();
            (Response::Unpacked(Ok(paths)), data, false)
        }
        Err(e) => (Response::Unpacked(Err(e)), vec![], false),
    }
}

/// Whether a failed NVRTC compile may have failed for want of a toolchain file (a header it
/// could not open, NVRTC itself missing), rather than for the student's code alone.
fn toolchain_suspect(log: &str) -> bool {
    log.contains("cannot open source file")
        || log.contains("could not open source file")
        || log.contains("is not available in the worker")
}

/// Where NVRTC comes from: the folder of the `libnvrtc` this process loaded (from
/// `/proc/self/maps`), else cugrade's own cache of it. Never every folder of `LD_LIBRARY_PATH`:
/// those may hold anything (cargo's test runs put its build folder there), and a file of them
/// the worker cannot read says nothing about NVRTC.
fn library_path() -> Vec<std::path::PathBuf> {
    let mut dirs: Vec<std::path::PathBuf> = std::fs::read_to_string("/proc/self/maps")
        .unwrap_or_default()
        .lines()
        .filter_map(|l| l.split_whitespace().nth(5))
        .filter(|p| {
            std::path::Path::new(p)
                .file_name()
                .is_some_and(|f| f.to_string_lossy().starts_with("libnvrtc"))
        })
        .filter_map(|p| std::path::Path::new(p).parent().map(|d| d.to_path_buf()))
        .collect();
    dirs.dedup();
    if dirs.is_empty() {
        dirs.push(crate::compile::toolchain::cache_root().join("nvidia/cu13/lib"));
    }
    dirs
}

pub(super) type RunOk = (crate::backend::LaunchReport, Vec<Vec<u8>>);
pub(super) type RunErr = Box<(BackendError, crate::backend::LaunchReport)>;

pub(super) fn run(
    b: &mut dyn Backend,
    spec: &RunSpec,
    blobs: Vec<Vec<u8>>,
) -> Result<RunOk, RunErr> {
    let plain = |e| Box::new((e, Default::default()));
    if blobs.len() != spec.buffers.len()
        || blobs
            .iter()
            .zip(&spec.buffers)
            .any(|(b, s)| b.len() != s.total())
    {
        return Err(plain(BackendError::Other(
            "request buffers do not match their specs".into(),
        )));
    }
    b.free_all().map_err(plain)?;
    // Where the backend checks bounds itself, allocate the payload alone and keep the guards
    // only on our side: the parent's checks see them untouched, memcheck sees exact bounds.
    let guarded = b.wants_guards();
    let mut addrs = Vec::with_capacity(blobs.len());
    for (blob, s) in blobs.iter().zip(&spec.buffers) {
        let (a, data) = if guarded {
            (b.alloc(s.total()).map_err(plain)?, &blob[..])
        } else {
            (
                b.alloc(s.bytes).map_err(plain)?,
                &blob[s.guard..s.guard + s.bytes],
            )
        };
        b.write(a, data).map_err(plain)?;
        addrs.push(a);
    }
    for (sym, i) in &spec.symbols {
        let s = spec.buffers[*i];
        b.set_global(sym, &blobs[*i][s.guard..s.guard + s.bytes])
            .map_err(plain)?;
    }
    let params: Vec<ParamValue> = spec
        .args
        .iter()
        .map(|a| match a {
            Arg::Buffer(i) => ParamValue::Ptr(
                addrs[*i]
                    + if guarded {
                        spec.buffers[*i].guard as u64
                    } else {
                        0
                    },
            ),
            Arg::Value(v) => *v,
        })
        .collect();
    // Every launch starts from the module's own `__device__` values: no launch can keep state
    // for a later one.
    if let Some(t) = b.timer() {
        t.restore_globals().map_err(plain)?;
    }
    // One deadline for the whole sequence of a multi-kernel milestone.
    let deadline = Instant::now() + Duration::from_millis(spec.deadline_ms);
    let steps = std::iter::once((spec.kernel.as_str(), spec.dims))
        .chain(spec.then.iter().map(|t| (t.kernel.as_str(), t.dims)));
    let mut report: Option<crate::backend::LaunchReport> = None;
    for (kernel, dims) in steps {
        let r = match b.launch(kernel, dims, &params, deadline) {
            Ok(r) => r,
            // Where a kernel stopped at its deadline was running, for the timeout's finding.
            Err(e) => return Err(Box::new((e, b.failed_launch_report()))),
        };
        report = Some(match report {
            None => r,
            Some(so_far) => so_far.then(r),
        });
    }
    let report = report.unwrap_or_default();
    let mut out = Vec::with_capacity(addrs.len());
    for ((a, s), blob) in addrs.iter().zip(&spec.buffers).zip(&blobs) {
        if guarded {
            out.push(
                b.read(*a, s.total())
                    .map_err(|e| Box::new((e, report.clone())))?,
            );
        } else {
            let mut whole = blob.clone();
            let payload = b
                .read(*a, s.bytes)
                .map_err(|e| Box::new((e, report.clone())))?;
            whole[s.guard..s.guard + s.bytes].copy_from_slice(&payload);
            out.push(whole);
        }
    }
    Ok((report, out))
}
