//! Compilation of a submission's sources in a sandboxed compile worker.

use super::context::{Infrastructure, Options, workers};
use crate::compile::{self, SourceFile};
use crate::hints;
use crate::result::{Check, CheckKind, CompileSummary};
use crate::worker::client::CompileAnswer;
use crate::worker::{Client, WorkerFailure};
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
    let mut out = Output {
        modules: ptx
            .iter()
            .map(|p| (p.name.clone(), p.text.clone()))
            .collect(),
        checks: vec![],
        summary: CompileSummary {
            ok: true,
            log: String::new(),
            kernels: vec![],
        },
    };
    let mut worker: Option<Client> = None;
    // CUDA's own headers, read-only in the worker's sandbox.
    let include_dirs = crate::compile::toolchain::cuda_include_dirs();
    for src in sources {
        if worker.is_none() {
            match workers(opts).compile(include_dirs.clone()) {
                Ok(w) => worker = Some(w),
                Err(e) => {
                    out.summary.ok = false;
                    out.checks.push(Check::error(
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
        let answer = w.compile(src, headers, &opts.arch, &include_dirs, timeout);
        let (mut check, more) = match answer {
            Ok(CompileAnswer::Compiled { ok, log, ptx }) => {
                compiled(src, ok, &log, ptx, opts, &mut out)
            }
            Ok(CompileAnswer::Unreadable(paths)) => {
                let mut roots = include_dirs.clone();
                if let Some(ld) = std::env::var_os("LD_LIBRARY_PATH") {
                    roots.extend(std::env::split_paths(&ld).filter(|p| p.is_absolute()));
                }
                if let Some(why) = w.unreadable(&paths, &roots) {
                    return Err(Infrastructure(why));
                }
                out.summary.ok = false;
                let c = Check::error(
                    CheckKind::Compile,
                    format!("compile {}", src.name),
                    "the compiler could not read its own files",
                )
                .with_details(unconfirmed(&paths));
                (c, vec![])
            }
            Err(f) => {
                out.summary.ok = false;
                let printed = w.output().text();
                worker = None;
                (worker_failed(src, &f, &printed), vec![])
            }
        };
        check.seconds = Some(started.elapsed().as_secs_f64());
        out.checks.push(check);
        out.checks.extend(more);
    }
    Ok((out.modules, out.checks, out.summary))
}

/// What `compile_all` gathers.
struct Output {
    modules: Vec<(String, String)>,
    checks: Vec<Check>,
    summary: CompileSummary,
}

/// NVRTC ran on `src`: its log joins the summary, its PTX the modules; the file's compile
/// check, and one more per further error NVRTC reported.
fn compiled(
    src: &SourceFile,
    ok: bool,
    log: &str,
    ptx: Option<String>,
    opts: &Options,
    out: &mut Output,
) -> (Check, Vec<Check>) {
    let log = sanitize_log(log);
    if !out.summary.log.is_empty() {
        out.summary.log.push('\n');
    }
    out.summary.log.push_str(&log);
    out.summary.kernels.extend(compile::resources(&log));
    if let (true, Some(p)) = (ok, ptx.filter(|p| !p.is_empty())) {
        out.modules.push((src.name.clone(), p));
        let c = Check::pass(
            CheckKind::Compile,
            format!("compile {}", src.name),
            format!("{} compiled for {}", src.name, opts.arch),
        );
        return (c, vec![]);
    }
    out.summary.ok = false;
    let mut errors = error_checks(&src.name, &log);
    let more = errors.split_off(1.min(errors.len()));
    let first = errors.pop().unwrap_or_else(|| {
        let first = compile::diagnostics_only(&log)
            .lines()
            .find(|l| l.contains("error"))
            .unwrap_or("compilation failed")
            .to_string();
        Check::fail(CheckKind::Compile, format!("compile {}", src.name), first)
            .with_location(compile::first_location(&log))
            .with_hint(hints::COMPILE)
            .with_details(compile::diagnostics_only(&log))
    });
    (first, more)
}

/// The compile worker timed out or crashed on `src` (it is ended).
fn worker_failed(src: &SourceFile, f: &WorkerFailure, printed: &str) -> Check {
    match f {
        WorkerFailure::Timeout(d) => Check::fail(
            CheckKind::Compile,
            format!("compile {}", src.name),
            format!(
                "compilation did not finish within {:.0} s (a template or unroll bomb?)",
                d.as_secs_f64()
            ),
        )
        .with_hint("Keep templates and #pragma unroll bounded: compilation has a time limit."),
        f => Check::error(
            CheckKind::Compile,
            format!("compile {}", src.name),
            format!("the compiler crashed: {f}"),
        )
        .with_details(sanitize_log(printed)),
    }
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
/// student's: CUDA's headers missing from this machine, or NVRTC failing without naming a line
/// of the submission while it also fails on cugrade's own kernel in a fresh compile worker (a
/// missing or broken NVRTC, its builtins library, the sandbox around it). Only a trusted probe,
/// compiled without the student's files, decides: never a header's name or the compiler's text,
/// which the student controls (`#include <cub/cub.hpp>`, or an `#error` that reads like NVRTC's
/// "cannot open source file"). `Some` says what is wrong and how to fix it: the caller stops
/// grading (exit 3).
pub(super) fn machine_fault(checks: &[Check], opts: &Options) -> Option<String> {
    use crate::result::Status;
    let failed: Vec<&Check> = checks
        .iter()
        .filter(|c| c.kind == CheckKind::Compile && c.status == Status::Fail)
        .collect();
    let missing_header = failed.iter().any(|c| {
        let log = format!("{}\n{}", c.message, c.details.as_deref().unwrap_or(""));
        log.contains("open source file")
    });
    if missing_header && let Some(why) = headers_probe(opts) {
        return Some(why);
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
        crate::compile::toolchain::cache_root()
            .join("nvidia")
            .display()
    ))
}

/// After [`machine_fault`] found the machine's headers whole: a failed compile that could not
/// open a header named like one of CUDA's is the student's typo (`<cub/cub.hpp>`); say so, and
/// name the file of that name CUDA does have (`<cub/cub.cuh>`).
pub(super) fn hint_missing_headers(checks: &mut [Check]) {
    use crate::compile::toolchain;
    let dirs = toolchain::cuda_include_dirs();
    for c in checks
        .iter_mut()
        .filter(|c| c.kind == CheckKind::Compile && c.status == crate::result::Status::Fail)
    {
        let log = format!("{}\n{}", c.message, c.details.as_deref().unwrap_or(""));
        let Some(h) = toolchain::missing_cuda_header(&log, &dirs) else {
            continue;
        };
        let path = std::path::Path::new(&h);
        let stem = path.file_stem().map(|s| s.to_string_lossy().into_owned());
        let near = stem.and_then(|stem| {
            dirs.iter().find_map(|d| {
                let folder = d.join(path.parent().unwrap_or(std::path::Path::new("")));
                std::fs::read_dir(folder).ok()?.flatten().find_map(|e| {
                    let name = e.file_name().to_string_lossy().into_owned();
                    (name.split('.').next() == Some(stem.as_str())
                        && name != path.file_name()?.to_string_lossy())
                    .then(|| path.with_file_name(&name).to_string_lossy().into_owned())
                })
            })
        });
        c.hint = Some(match near {
            Some(n) => format!(
                "CUDA has no header <{h}>; did you mean <{n}>? This machine has CUDA's headers \
                 (cooperative groups, half and bfloat16, CCCL's CUB, Thrust and libcu++)."
            ),
            None => format!(
                "CUDA has no header <{h}> (this machine has CUDA's headers: cooperative groups, \
                 half and bfloat16, CCCL's CUB, Thrust and libcu++): check its name and folder."
            ),
        });
    }
}

/// CUDA's headers, as cugrade promises them to students (cooperative groups, half and bfloat16,
/// CUB, libcu++), compiled by cugrade's own kernel in a fresh compile worker: `Some` says what
/// the machine lacks and the fix. Once per run: a cohort of include typos asks once.
fn headers_probe(opts: &Options) -> Option<String> {
    use crate::compile::toolchain;
    static PROBED: std::sync::OnceLock<Option<String>> = std::sync::OnceLock::new();
    PROBED
        .get_or_init(|| {
            let probe = SourceFile {
                name: "cugrade-headers-probe.cu".into(),
                text: "#include <cooperative_groups.h>\n#include <cuda_fp16.h>\n\
                       #include <cuda_bf16.h>\n#include <cub/block/block_reduce.cuh>\n\
                       #include <cuda/std/cstdint>\n\
                       extern \"C\" __global__ void cugrade_probe(float* x) { x[threadIdx.x] = 1.0f; }\n"
                    .into(),
            };
            let compiled =
                compile_all(std::slice::from_ref(&probe), &[], &[], opts, Duration::from_secs(120));
            let (modules, checks, summary) = match compiled {
                Ok(c) => c,
                Err(e) => return Some(e.0),
            };
            if !modules.is_empty() {
                return None;
            }
            let why: Vec<String> = checks
                .iter()
                .map(|c| c.message.clone())
                .chain(std::iter::once(summary.log.clone()))
                .filter(|s| !s.trim().is_empty())
                .collect();
            Some(format!(
                "CUDA's own headers do not compile on this machine (cugrade's test kernel, which \
                 includes cooperative_groups.h, cuda_fp16.h, cuda_bf16.h, CUB and libcu++, \
                 fails): the grading machine's fault, not the submission's.\n{}\nfix: \
                 `cugrade doctor --install` (downloads CUDA's headers from PyPI into {}), or \
                 install the CUDA 13.0 toolkit",
                why.join("\n"),
                toolchain::headers_dir().display()
            ))
        })
        .clone()
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
    let mut worker: Option<Client> = None;
    for (name, ptx) in modules {
        if worker.is_none() {
            let read = library
                .parent()
                .map(Path::to_path_buf)
                .into_iter()
                .collect();
            match workers(opts).compile(read) {
                Ok(w) => worker = Some(w),
                Err(_) => return (kernels, logs),
            }
        }
        let Some(w) = worker.as_mut() else { break };
        match w.assemble(ptx, &opts.arch, &library, timeout) {
            Ok(Ok(log)) => {
                let log = sanitize_log(&log);
                kernels.extend(compile::resources(&log));
                logs.push_str(&format!(
                    "{name}: ptxas (nvJitLink, {})\n{log}\n",
                    opts.arch
                ));
            }
            Ok(Err(log)) => {
                logs.push_str(&format!(
                    "{name}: no ptxas facts: {}\n",
                    sanitize_log(&log).trim()
                ));
            }
            // A crash or a timeout of ptxas on this module: the next one gets a fresh worker.
            Err(_) => worker = None,
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
