//! Compilation of a submission's sources in a sandboxed compile worker.

use super::context::{Infrastructure, Options, worker_options};
use super::run::variant;
use crate::compile::{self, SourceFile};
use crate::hints;
use crate::result::{Check, CheckKind, CompileSummary};
use crate::worker::protocol::{Request, Response};
use crate::worker::{Role, Worker, WorkerFailure};
use std::path::Path;
use std::time::{Duration, Instant};

/// What `compile_all` gives back: the PTX modules (name, ptx), the compile check(s) and the
/// summary.
pub(super) type Compiled = (Vec<(String, String)>, Vec<Check>, CompileSummary);

/// Compile every `.cu` of a submission in a (sandboxed) compile worker. `Err` when the machine
/// cannot compile for anyone: its workers cannot read the toolchain (confirmed from the host).
pub(super) fn compile_all(
    sources: &[SourceFile],
    headers: &[SourceFile],
    ptx: &[SourceFile],
    opts: &Options,
    timeout: Duration,
) -> Result<Compiled, Infrastructure> {
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
        return Ok((modules, checks, summary));
    }
    let mut worker: Option<Worker> = None;
    // CUDA's own headers, read-only in the worker's sandbox.
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
        let mut more = Vec::new();
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
                        let mut errors = error_checks(&src.name, &log);
                        more = errors.split_off(1.min(errors.len()));
                        errors.pop().unwrap_or_else(|| {
                            let first = compile::diagnostics_only(&log)
                                .lines()
                                .find(|l| l.contains("error"))
                                .unwrap_or("compilation failed")
                                .to_string();
                            Check::fail(CheckKind::Compile, format!("compile {}", src.name), first)
                                .with_location(compile::first_location(&log))
                                .with_hint(hints::COMPILE)
                                .with_details(compile::diagnostics_only(&log))
                        })
                    }
                }
            }
            Ok((Response::Unreadable { paths }, _)) => {
                let mut roots = include_dirs.clone();
                if let Some(ld) = std::env::var_os("LD_LIBRARY_PATH") {
                    roots.extend(std::env::split_paths(&ld).filter(|p| p.is_absolute()));
                }
                if let Some(why) = w.unreadable(&paths, &roots) {
                    return Err(Infrastructure(why));
                }
                summary.ok = false;
                Check::error(
                    CheckKind::Compile,
                    format!("compile {}", src.name),
                    "the compiler could not read its own files",
                )
                .with_details(unconfirmed(&paths))
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
        checks.extend(more);
    }
    Ok((modules, checks, summary))
}

/// A worker's list of refused toolchain files that the host's mode bits do not explain (a
/// mount view or Landlock rule that left them out, or a worker that is not to be believed).
pub(super) fn unconfirmed(paths: &[crate::sandbox::access::Blocked]) -> String {
    let mut s = String::from("the worker was refused some of the toolchain's files:\n");
    for b in paths {
        s.push_str(&format!("  {}: {}\n", b.path.display(), b.error));
    }
    s
}

/// Whether the failed compiles among `checks` are the grading machine's fault rather than the
/// student's: a CUDA header the submission includes that this machine lacks, or NVRTC failing
/// without naming a line of the submission while it also fails on cugrade's own kernel in a
/// fresh compile worker (a missing or broken NVRTC, its builtins library, the sandbox around
/// it). `Some` says what is wrong and how to fix it: the caller stops grading (exit 3).
pub(super) fn machine_fault(checks: &[Check], opts: &Options) -> Option<String> {
    use crate::compile::toolchain;
    use crate::result::Status;
    let failed: Vec<&Check> = checks
        .iter()
        .filter(|c| c.kind == CheckKind::Compile && c.status == Status::Fail)
        .collect();
    let dirs = toolchain::cuda_include_dirs();
    for c in &failed {
        // NVRTC's error is the check's message; what it adds, its details.
        let log = format!("{}\n{}", c.message, c.details.as_deref().unwrap_or(""));
        if let Some(h) = toolchain::missing_cuda_header(&log, &dirs) {
            return Some(format!(
                "the submission includes <{h}>, one of CUDA's own headers, and this machine \
                 does not have it: the grading machine's fault, not the submission's \
                 ({}).\nfix: `cugrade doctor --install` (downloads CUDA's headers from PyPI \
                 into {}), or install the CUDA 13.0 toolkit",
                c.location.as_deref().unwrap_or("compile"),
                toolchain::headers_dir().display()
            ));
        }
    }
    // NVRTC's log names the student's file and line for everything the source did; a failure
    // without one is checked against a kernel that cannot fail.
    if !failed
        .iter()
        .any(|c| c.location.is_none() && c.details.is_some())
    {
        return None;
    }
    let probe = SourceFile {
        name: "cugrade-probe.cu".into(),
        text: "extern \"C\" __global__ void cugrade_probe(float* x) { x[threadIdx.x] = 1.0f; }\n"
            .into(),
    };
    let (modules, probe_checks, summary) = match compile_all(
        std::slice::from_ref(&probe),
        &[],
        &[],
        opts,
        Duration::from_secs(120),
    ) {
        Ok(compiled) => compiled,
        // The workers cannot read the toolchain: that says what and the fix.
        Err(e) => return Some(e.0),
    };
    if !modules.is_empty() {
        return None;
    }
    let why = probe_checks
        .iter()
        .map(|c| c.message.as_str())
        .chain(std::iter::once(summary.log.as_str()))
        .filter(|s| !s.is_empty())
        .collect::<Vec<_>>()
        .join("\n");
    Some(format!(
        "NVRTC does not compile even cugrade's own test kernel on this machine: the grading \
         machine's fault, not the submission's.\n{why}\nfix: run `cugrade doctor`; remove \
         {} and run cugrade again to download NVRTC anew, or repair the CUDA toolkit's NVRTC",
        toolchain::cache_root().join("nvidia").display()
    ))
}

/// Most errors of one file that become findings; the log (in the report) has the rest.
const ERRORS_SHOWN: usize = 10;

/// One failed compile check per error NVRTC reports, at its `file:line:col`, with its own part
/// of the log as evidence: a second mistake in the file is a finding of its own, not a line
/// lost in the first one's log. The first is `compile FILE`; the others `compile FILE (error
/// 2)`, ... so that names stay unique within a milestone.
fn error_checks(file: &str, log: &str) -> Vec<Check> {
    let errors = compile::log_errors(log);
    let total = errors.len();
    errors
        .into_iter()
        .take(ERRORS_SHOWN)
        .enumerate()
        .map(|(i, e)| {
            let name = if i == 0 {
                format!("compile {file}")
            } else {
                format!("compile {file} (error {})", i + 1)
            };
            // The diagnostic shows the line and the column; the evidence is what NVRTC adds.
            let mut details = e.notes.clone();
            if i + 1 == ERRORS_SHOWN && total > ERRORS_SHOWN {
                details.push_str(&format!(
                    "\n\n({} more errors: the compile log in the report has them all)",
                    total - ERRORS_SHOWN
                ));
            }
            let c = Check::fail(CheckKind::Compile, name, e.message.clone())
                .with_location(Some(e.location()))
                .with_details(details);
            // Later errors often follow from the first: the hint goes with it only.
            if i == 0 {
                c.with_hint(hints::COMPILE)
            } else {
                c
            }
        })
        .collect()
}

/// ptxas's facts (registers, spills, shared memory) for PTX that did not come from NVRTC: PTX
/// files and Numba's kernels. Each module is assembled for the grading target by nvJitLink in
/// a sandboxed compile worker (`compile::jitlink`); returns the kernels' resources and the
/// logs. Without nvJitLink, or when a module does not assemble, its kernels get no facts (the
/// resources check then says the registers are unknown rather than guess).
pub(super) fn assemble_all(
    modules: &[(String, String)],
    opts: &Options,
    timeout: Duration,
) -> (Vec<crate::result::KernelResources>, String) {
    let mut kernels = Vec::new();
    let mut logs = String::new();
    let Some(library) = compile::jitlink::library() else {
        return (kernels, logs);
    };
    if modules.is_empty() || !opts.arch.starts_with("sm_") {
        return (kernels, logs);
    }
    let mut worker: Option<Worker> = None;
    for (name, ptx) in modules {
        if worker.is_none() {
            let mut wo = worker_options(&opts.protected, Role::Compile, opts.backend, opts.device);
            wo.extra_read = library
                .parent()
                .map(Path::to_path_buf)
                .into_iter()
                .collect();
            match Worker::spawn(&wo) {
                Ok(w) => worker = Some(w),
                Err(_) => return (kernels, logs),
            }
        }
        let Some(w) = worker.as_mut() else { break };
        let req = Request::Assemble {
            arch: opts.arch.clone(),
            library: library.clone(),
        };
        match w.call(&req, &[ptx.as_bytes()], timeout) {
            Ok((Response::Compiled { ok: true, log }, _)) => {
                let log = sanitize_log(&log);
                kernels.extend(compile::resources(&log));
                logs.push_str(&format!(
                    "{name}: ptxas (nvJitLink, {})\n{log}\n",
                    opts.arch
                ));
            }
            Ok((Response::Compiled { ok: false, log }, _)) => {
                logs.push_str(&format!(
                    "{name}: no ptxas facts: {}\n",
                    sanitize_log(&log).trim()
                ));
            }
            // A crash or a timeout of ptxas on this module: the next one gets a fresh worker.
            _ => worker = None,
        }
    }
    (kernels, logs)
}

/// NVRTC logs are the student's own diagnostics; cap them.
pub(super) fn sanitize_log(log: &str) -> String {
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
