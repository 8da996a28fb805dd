//! CuPy submissions in the pipeline: read the kernel definitions of the CuPy `.py` files in a
//! sandboxed compile worker (`compile::cupy::extract`), turn the ones the rubric's kernels need
//! into CUDA C++ (`compile::cupy::kernel_source`), and hand those to the same NVRTC stage as
//! `.cu` files. Everything after that (loading, launches, checks, speed) is CUDA C++'s path;
//! findings name the Python line through the sources' `#line` directives.

use super::context::Options;
use crate::compile::SourceFile;
use crate::compile::cupy::{self, PyLang};
use crate::result::{Check, CheckKind};
use crate::rubric::plan::Plan;
use crate::submission::Submission;
use crate::worker::protocol::{Request, Response};
use crate::worker::{Role, Worker, WorkerFailure, WorkerOptions};
use std::time::Duration;

const CUPY_HINT: &str = "CuPy kernels are graded with the assignment's kernel signature: a RawKernel's CUDA source takes the contract's parameters in order; an ElementwiseKernel's or ReductionKernel's parameters are matched to the contract's by name, else in order (docs/submissions.md#cupy-submissions).";

/// A check of a CuPy-only submission: a missing kernel's hint says how to define it in CuPy.
pub fn speak_cupy(check: &mut Check, kernel: &str) {
    if check.kind == CheckKind::Kernel && check.status != crate::result::Status::Pass {
        check.hint = Some(format!(
            "Define the kernel under the contract's name: `{kernel} = cp.RawKernel(code, \"{kernel}\")` with `extern \"C\" __global__ void {kernel}(...)` in the code (or a RawModule holding it), or `cp.ElementwiseKernel(in_params, out_params, operation, \"{kernel}\")` / `cp.ReductionKernel(...)`, at the top level of a module."
        ));
    }
}

/// Whether any `.py` file of the submission is CuPy.
pub fn has_cupy(sub: &Submission) -> bool {
    sub.python
        .iter()
        .any(|f| matches!(sub.python_language(f), PyLang::Cupy | PyLang::Both))
}

/// The CUDA sources implementing the rubric's kernels, and checks for what went wrong.
pub fn sources(plan: &Plan, sub: &Submission, opts: &Options) -> (Vec<SourceFile>, Vec<Check>) {
    if !has_cupy(sub) {
        return (vec![], vec![]);
    }
    let entries: Vec<String> = sub
        .python
        .iter()
        .filter(|f| matches!(sub.python_language(f), PyLang::Cupy | PyLang::Both))
        .map(|f| f.name.clone())
        .collect();
    let error = |msg: String| {
        (
            vec![],
            vec![Check::error(CheckKind::Compile, "compile cupy", msg)],
        )
    };
    let interpreter = match cupy::interpreter() {
        Ok(i) => i,
        Err(e) => return error(e),
    };
    let mut wo = WorkerOptions::new(Role::Compile, opts.backend, opts.device);
    wo.protected = opts.protected.clone();
    wo.extra_read = interpreter.read_dirs.clone();
    let mut worker = match Worker::spawn(&wo) {
        Ok(w) => w,
        Err(e) => return error(format!("could not start the compile worker: {e}")),
    };
    let req = Request::ExtractCupy {
        files: sub.python.clone(),
        entries,
        interpreter,
    };
    let found = match worker.call(&req, &[], Duration::from_secs(30)) {
        Ok((Response::CupyExtracted(Ok(x)), _)) => x,
        Ok((Response::CupyExtracted(Err(e)), _)) => {
            return error(format!("reading the CuPy kernels failed: {e}"));
        }
        Ok((other, _)) => {
            return error(format!(
                "unexpected answer from the compile worker: {}",
                super::run::variant(&other)
            ));
        }
        Err(WorkerFailure::Timeout(d)) => {
            return (
                vec![],
                vec![Check::fail(
                    CheckKind::Compile,
                    "compile cupy",
                    format!(
                        "importing the Python files did not finish within {:.0} s",
                        d.as_secs_f64()
                    ),
                )
                .with_hint("Code at the top level of a module runs when it is imported: keep it to definitions (no loops, no input(), no kernel launches).")],
            );
        }
        Err(f) => {
            let printed = worker.output().text();
            return (
                vec![],
                vec![
                    Check::fail(
                        CheckKind::Compile,
                        "compile cupy",
                        format!("Python crashed while importing the submission: {f}"),
                    )
                    .with_details(printed),
                ],
            );
        }
    };
    let mut out: Vec<SourceFile> = vec![];
    let mut checks = vec![];
    let mut missing = false;
    let mut done: Vec<String> = vec![];
    for m in &plan.milestones {
        if done.contains(&m.kernel) {
            continue;
        }
        done.push(m.kernel.clone());
        let Some((def, entry)) = cupy::find(&found.definitions, &m.kernel) else {
            missing = true;
            continue;
        };
        match cupy::kernel_source(def, &entry, &m.kernel, &m.contract) {
            // One module serves every kernel of a RawModule (or RawKernel) it defines as is.
            Ok(src) if out.iter().any(|s| s.text == src.text) => {}
            Ok(src) => out.push(src),
            Err(r) => {
                let location = match (&r.file, r.line) {
                    (Some(f), Some(l)) => Some(format!("{f}:{l}")),
                    (Some(f), None) => Some(f.clone()),
                    _ => None,
                };
                checks.push(
                    Check::fail(
                        CheckKind::Compile,
                        format!(
                            "compile {} ({})",
                            r.file.as_deref().unwrap_or("cupy"),
                            m.kernel
                        ),
                        r.message,
                    )
                    .with_location(location)
                    .with_hint(CUPY_HINT),
                );
            }
        }
    }
    for e in found.errors {
        // Top-level code that launches a kernel fails without a GPU: only worth saying when
        // a kernel is missing (it may be defined after that code).
        if e.no_gpu && !missing {
            continue;
        }
        let location = match (&e.file, e.line) {
            (Some(f), Some(l)) => Some(format!("{f}:{l}")),
            (Some(f), None) => Some(f.clone()),
            _ => None,
        };
        let mut c = Check::fail(
            CheckKind::Compile,
            format!("compile {}", e.file.as_deref().unwrap_or("cupy")),
            e.message,
        )
        .with_location(location)
        .with_hint("Importing the module failed: kernels defined after this line are not found. Code at the top level of a module runs when it is imported: keep it to definitions, and put tests under `if __name__ == \"__main__\":`.");
        if !e.details.is_empty() {
            c = c.with_details(e.details);
        }
        checks.push(c);
    }
    (out, checks)
}
