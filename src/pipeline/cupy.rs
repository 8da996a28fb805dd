//! CuPy submissions in the pipeline: read the kernel definitions of the CuPy `.py` files in a
//! sandboxed compile worker (`compile::cupy::extract`), turn the ones the rubric's kernels need
//! into CUDA C++ (`compile::cupy::kernel_source`), and hand those to the same NVRTC stage as
//! `.cu` files. Everything after that (loading, launches, checks, speed) is CUDA C++'s path;
//! findings name the Python line through the sources' `#line` directives.

use super::context::{Options, workers};
use crate::compile::SourceFile;
use crate::compile::cupy::{self, PyLang};
use crate::result::{Check, CheckKind};
use crate::rubric::plan::Plan;
use crate::submission::Submission;
use crate::worker::WorkerFailure;
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
    let found = match extract(sub, opts) {
        Ok(found) => found,
        Err(check) => return (vec![], vec![*check]),
    };
    let (out, mut checks, missing) = kernel_sources(plan, &found);
    checks.extend(import_errors(found.errors, missing));
    (out, checks)
}

/// The submission's CuPy kernel definitions, read in a sandboxed compile worker; or the
/// check saying why they could not be.
fn extract(sub: &Submission, opts: &Options) -> Result<cupy::Extracted, Box<Check>> {
    let entries: Vec<String> = sub
        .python
        .iter()
        .filter(|f| matches!(sub.python_language(f), PyLang::Cupy | PyLang::Both))
        .map(|f| f.name.clone())
        .collect();
    let error = |msg: String| Box::new(Check::error(CheckKind::Compile, "compile cupy", msg));
    let interpreter = cupy::interpreter().map_err(error)?;
    let mut worker = workers(opts)
        .compile(interpreter.read_dirs.clone())
        .map_err(|e| error(format!("could not start the compile worker: {e}")))?;
    match worker.extract_cupy(&sub.python, entries, interpreter, Duration::from_secs(30)) {
        Ok(Ok(x)) => Ok(x),
        Ok(Err(e)) => Err(error(format!("reading the CuPy kernels failed: {e}"))),
        Err(WorkerFailure::Timeout(d)) => Err(Box::new(Check::fail(
            CheckKind::Compile,
            "compile cupy",
            format!(
                "importing the Python files did not finish within {:.0} s",
                d.as_secs_f64()
            ),
        )
        .with_hint("Code at the top level of a module runs when it is imported: keep it to definitions (no loops, no input(), no kernel launches)."))),
        Err(f) => {
            let printed = worker.output().text();
            Err(Box::new(
                Check::fail(
                    CheckKind::Compile,
                    "compile cupy",
                    format!("Python crashed while importing the submission: {f}"),
                )
                .with_details(printed),
            ))
        }
    }
}

/// The CUDA C++ of every kernel the rubric asks for that the module defines, the checks of
/// the ones that cannot be translated, and whether some kernel is missing.
fn kernel_sources(plan: &Plan, found: &cupy::Extracted) -> (Vec<SourceFile>, Vec<Check>, bool) {
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
    (out, checks, missing)
}

/// The errors importing the modules raised: a check each (a launch without a GPU only where
/// a kernel is missing).
fn import_errors(errors: Vec<cupy::ImportError>, missing: bool) -> Vec<Check> {
    let mut checks = vec![];
    for e in errors {
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
    checks
}
