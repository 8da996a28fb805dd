//! Compilation of a submission's sources in a sandboxed compile worker.

use super::*;
use crate::compile::{self, SourceFile};
use crate::hints;
use crate::result::{Check, CheckKind, CompileSummary};
use crate::worker::protocol::{Request, Response};
use crate::worker::{Role, Worker, WorkerFailure};
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
