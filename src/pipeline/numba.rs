//! Numba submissions in the pipeline: compile each kernel the rubric asks for in one sandboxed
//! compile worker (student Python runs there only), turn the driver's answers into compile
//! checks that point at `file.py:LINE`, and carry each kernel's signature to the launches,
//! which use Numba's calling convention (`inputs::numba_invocation`).

use super::context::{Infrastructure, Options};
use crate::compile::numba::{self, NumbaKernel};
use crate::compile::toolchain;
use crate::result::{Check, CheckKind};
use crate::rubric::convention::Signature;
use crate::rubric::plan::Plan;
use crate::rubric::schema::Language;
use crate::submission::Submission;
use crate::worker::WorkerFailure;
use crate::worker::client::NumbaAnswer;
use crate::worker::pool::Workers;
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A Numba kernel after compilation.
#[derive(Debug, Clone)]
pub enum NumbaKernelState {
    /// PTX with the entry renamed to the Python name, and the signature it was compiled with.
    Compiled {
        file: String,
        ptx: String,
        signature: Signature,
        check: Check,
    },
    /// A compile finding (import error, typing error, toolchain failure).
    Failed(Check),
    /// No `@cuda.jit` function of that name.
    Missing(Check),
}

/// Every Numba kernel of the submission, by kernel name.
pub type NumbaKernels = HashMap<String, NumbaKernelState>;

const NUMBA_COMPILE_HINT: &str = "The kernel does not compile with Numba: read the first error and the line it names. Numba compiles a subset of Python: no lists, dicts or print of objects in kernels; every variable keeps one type; arrays come in as arguments or cuda.shared.array/cuda.local.array with constant shapes.";

/// Why a Numba compile worker gave no outcomes.
#[derive(Debug, Clone)]
pub enum NumbaFailure {
    /// The machine's fault, confirmed from the host's side (the workers cannot read the
    /// toolchain): the message says what and the fix. Grading stops with exit 3.
    Machine(String),
    /// The toolchain failed (not the submission): what Python printed.
    Toolchain(String),
    /// The worker did not start.
    Spawn(String),
    /// The worker answered something other than the request's answer.
    Answer(String),
    /// Importing and compiling did not finish in time.
    Timeout(Duration),
    /// The worker died while importing: how, and what it printed.
    Crashed(String, String),
}

/// Compile `kernels` from `files` in a sandboxed compile worker started with `wo`, as grading
/// does (and `cugrade doctor` does, with a test kernel): the outcomes with their PTX. `import`:
/// the student's modules' import budget; `timeout`: the whole call's.
pub fn compile_in_worker(
    tool: toolchain::NumbaToolchain,
    files: &[crate::compile::SourceFile],
    kernels: &[NumbaKernel],
    arch: &str,
    workers: &Workers,
    import: Duration,
    timeout: Duration,
) -> Result<Vec<numba::Outcome>, NumbaFailure> {
    let mut worker = workers
        .compile(tool.read_dirs.clone())
        .map_err(NumbaFailure::Spawn)?;
    let roots: Vec<std::path::PathBuf> = tool
        .read_dirs
        .iter()
        .chain(std::iter::once(&tool.site))
        .cloned()
        .collect();
    match worker.compile_numba(files, kernels, arch, tool, import, timeout) {
        Ok(NumbaAnswer::Compiled(Ok(o))) => Ok(o),
        Ok(NumbaAnswer::Compiled(Err(e))) => Err(NumbaFailure::Toolchain(e)),
        Ok(NumbaAnswer::Mismatch) => Err(NumbaFailure::Answer(
            "the compile worker's answer does not match the request".into(),
        )),
        Ok(NumbaAnswer::Unreadable(paths)) => Err(match worker.unreadable(&paths, &roots) {
            Some(why) => NumbaFailure::Machine(why),
            None => NumbaFailure::Toolchain(super::compiling::unconfirmed(&paths)),
        }),
        Err(WorkerFailure::Timeout(d)) => Err(NumbaFailure::Timeout(d)),
        Err(f) => Err(NumbaFailure::Crashed(f.to_string(), worker.output().text())),
    }
}

/// Compile every kernel of the rubric that the submission's `.py` files may define. A Numba
/// that cannot be installed or does not compile even cugrade's own test kernel is the grading
/// machine's fault (`Err`: exit 3), never the student's compile error.
pub fn compile(
    plan: &Plan,
    sub: &Submission,
    opts: &Options,
) -> Result<NumbaKernels, Infrastructure> {
    let mut out = NumbaKernels::new();
    if sub.python.is_empty() {
        return Ok(out);
    }
    let kernels = kernels_to_compile(plan);
    let started = Instant::now();
    let tool = crate::compile::install::ensure_numba().map_err(|e| {
        Infrastructure(format!(
            "the submission has Numba kernels (.py) and this machine cannot compile them \
             (the machine's fault, not the submission's): {e}"
        ))
    })?;
    let wo = Workers::new(&opts.protected, opts.backend, opts.device);
    // Starting Numba is the toolchain's time; the student's modules then get one import
    // budget (the worker stops Python when it runs out, whatever the number of kernels), and
    // each kernel the rubric's compile time. This deadline only matters if the worker itself
    // stops answering.
    let per_kernel = Duration::from_secs_f64(plan.timeouts.compile_s);
    let import = Duration::from_secs_f64(plan.timeouts.import_s.clamp(0.1, 3600.0));
    let timeout = crate::compile::numba::STARTUP
        + import
        + Duration::from_secs(5)
        + per_kernel * kernels.len() as u32;
    let answer = compile_in_worker(
        tool.clone(),
        &sub.python,
        &kernels,
        &opts.arch,
        &wo,
        import,
        timeout,
    );
    let seconds = started.elapsed().as_secs_f64();
    let outcomes = match answer {
        Ok(o) => o,
        Err(f) => {
            // Every kernel fails the same way.
            let check = failure_check(f, &wo, &tool, opts)?;
            for k in &kernels {
                out.insert(k.name.clone(), NumbaKernelState::Failed(check.clone()));
            }
            return Ok(out);
        }
    };
    for (o, k) in outcomes.into_iter().zip(&kernels) {
        out.insert(k.name.clone(), kernel_state(o, k, opts));
    }
    for s in out.values_mut() {
        if let NumbaKernelState::Compiled { check, .. } | NumbaKernelState::Failed(check) = s {
            check.seconds = Some(seconds);
        }
    }
    Ok(out)
}

/// Every kernel of the rubric, once, with the signatures to try.
fn kernels_to_compile(plan: &Plan) -> Vec<NumbaKernel> {
    let mut kernels: Vec<NumbaKernel> = vec![];
    for m in &plan.milestones {
        if kernels.iter().any(|k| k.name == m.kernel) {
            continue;
        }
        kernels.push(NumbaKernel {
            name: m.kernel.clone(),
            signatures: m.numba_signatures.clone(),
            params: m.contract.params.iter().map(|p| p.name.clone()).collect(),
        });
    }
    kernels
}

/// The check every kernel gets when the compile worker gave no outcomes; `Err` when the
/// machine is at fault.
fn failure_check(
    f: NumbaFailure,
    wo: &Workers,
    tool: &toolchain::NumbaToolchain,
    opts: &Options,
) -> Result<Check, Infrastructure> {
    Ok(match f {
        NumbaFailure::Machine(why) => return Err(Infrastructure(why)),
        NumbaFailure::Toolchain(e) => {
            // The driver says the toolchain failed. Student code ran in that worker (it may
            // have exited early or written the answer itself): a fresh worker compiling only
            // cugrade's own kernel decides whose fault it is.
            if let Err(probe) = probe(wo, tool, opts) {
                return Err(Infrastructure(format!(
                    "Numba does not work on this machine (the toolchain, not the submission): \
                     {}\n{e}\nfix: run `cugrade doctor`; remove {} and let cugrade install it \
                     again (`cugrade doctor --install`)",
                    probe.lines().next().unwrap_or("").trim(),
                    tool.site.display()
                )));
            }
            Check::fail(
                    CheckKind::Compile,
                    "compile numba",
                    "importing the submission's Python files stopped the compiler before it answered",
                )
                .with_details(e)
                .with_hint("Code at the top level of a module runs when it is imported: keep it to definitions (no sys.exit, no os._exit, no writing files).")
        }
        NumbaFailure::Spawn(e) => {
            Check::error(
                    CheckKind::Compile,
                    "compile numba",
                    format!("could not start the compile worker: {e}"),
                )
        }
        NumbaFailure::Answer(e) => {
            Check::error(CheckKind::Compile, "compile numba", e)
        }
        NumbaFailure::Timeout(d) => {
            Check::fail(
                    CheckKind::Compile,
                    "compile numba",
                    format!(
                        "the module did not finish importing and compiling within {:.0} s (the compile worker stopped answering)",
                        d.as_secs_f64()
                    ),
                )
                .with_hint("Code at the top level of a module runs when it is imported: keep it to definitions (no loops, no input(), no kernel launches).")
        }
        NumbaFailure::Crashed(f, printed) => {
            Check::fail(
                    CheckKind::Compile,
                    "compile numba",
                    format!("Python crashed while importing the submission: {f}"),
                )
                .with_details(printed)
                .with_hint("Code at the top level of a module runs when it is imported: keep it to definitions.")
        }
    })
}

/// What one kernel's outcome means.
fn kernel_state(o: numba::Outcome, k: &NumbaKernel, opts: &Options) -> NumbaKernelState {
    let location = match (&o.file, o.line) {
        (Some(f), Some(l)) => Some(format!("{f}:{l}")),
        (Some(f), None) => Some(f.clone()),
        _ => None,
    };
    let name = format!(
        "compile {} ({})",
        o.file.clone().unwrap_or_else(|| "numba".into()),
        k.name
    );
    if o.ok {
        let file = o.file.clone().unwrap_or_default();
        let signature = k.signatures.get(o.signature).cloned();
        match (o.ptx, signature) {
            (Some(ptx), Some(signature)) => NumbaKernelState::Compiled {
                ptx: numba::rename_entry(&ptx, &k.name, &file),
                check: Check::pass(
                    CheckKind::Compile,
                    name,
                    format!("`{}` {} for {}", k.name, o.message, opts.arch),
                )
                .with_location(location),
                file,
                signature,
            },
            _ => NumbaKernelState::Failed(Check::error(
                CheckKind::Compile,
                name,
                "the compile worker's answer is incomplete",
            )),
        }
    } else if o.missing {
        NumbaKernelState::Missing(
                Check::fail(CheckKind::Kernel, format!("kernel {}", k.name), o.message)
                    .with_location(location)
                    .with_hint(format!(
                        "Define the kernel with the contract's name: `@cuda.jit` above `def {}(...)`, taking the contract's parameters in order.",
                        k.name
                    )),
            )
    } else {
        let mut c = Check::fail(CheckKind::Compile, name, o.message)
            .with_location(location)
            .with_hint(NUMBA_COMPILE_HINT);
        if !o.details.is_empty() {
            c = c.with_details(o.details);
        }
        NumbaKernelState::Failed(c)
    }
}

/// cugrade's own trivial kernel through a fresh compile worker like the student's: `Err` with
/// what failed when even that does not compile.
fn probe(wo: &Workers, tool: &toolchain::NumbaToolchain, opts: &Options) -> Result<(), String> {
    let file = crate::compile::SourceFile {
        name: "cugrade_probe.py".into(),
        text: "from numba import cuda\n\n@cuda.jit\ndef cugrade_probe(a):\n    a[0] = 1.0\n".into(),
    };
    let kernel = NumbaKernel {
        name: "cugrade_probe".into(),
        signatures: vec![Signature {
            text: "(float32[::1],)".into(),
            ndims: vec![1],
        }],
        params: vec![],
    };
    // cugrade's own module imports at once; 30 s is plenty.
    match compile_in_worker(
        tool.clone(),
        &[file],
        &[kernel],
        &opts.arch,
        wo,
        Duration::from_secs(30),
        Duration::from_secs(120),
    ) {
        Ok(o) if o.iter().all(|x| x.ok) => Ok(()),
        Ok(o) => Err(o.first().map_or("no answer".into(), |x| x.message.clone())),
        Err(NumbaFailure::Machine(e) | NumbaFailure::Toolchain(e)) => Err(e),
        Err(NumbaFailure::Spawn(e) | NumbaFailure::Answer(e)) => Err(e),
        Err(NumbaFailure::Timeout(d)) => Err(format!("no answer within {:.0} s", d.as_secs_f64())),
        Err(NumbaFailure::Crashed(f, _)) => Err(f),
    }
}

/// Languages of the submission the rubric does not accept: one failing check each.
pub fn refused_languages(plan: &Plan, sub: &Submission) -> Vec<(Language, Check)> {
    let Some(accepted) = &plan.languages else {
        return vec![];
    };
    let names: Vec<&str> = accepted.iter().map(|l| l.as_str()).collect();
    sub.languages()
        .into_iter()
        .filter(|l| !accepted.contains(l))
        .map(|l| {
            (
                l,
                Check::fail(
                    CheckKind::Compile,
                    format!("language {}", l.as_str()),
                    format!(
                        "this assignment does not accept {} submissions (it accepts: {})",
                        l.as_str(),
                        names.join(", ")
                    ),
                )
                .with_hint("Hand in the kernels in one of the languages the assignment accepts."),
            )
        })
        .collect()
}

/// A check on a Numba kernel: hints and sanitizer messages in Numba's terms, and the Python
/// line a location names shown with it.
pub fn speak_numba(check: &mut Check, sub: &Submission) {
    check.hint = check.hint.as_deref().map(translate_hint);
    if check.kind == CheckKind::Sanitizer {
        check.message = translate_hint(&check.message);
    }
    let Some((file, line)) = check
        .location
        .as_deref()
        .and_then(|l| l.rsplit_once(':'))
        .and_then(|(f, l)| Some((f, l.parse::<usize>().ok()?)))
    else {
        return;
    };
    let text = sub
        .python
        .iter()
        .find(|f| f.name == file || f.name.ends_with(&format!("/{file}")))
        .and_then(|f| f.text.lines().nth(line.checked_sub(1)?));
    if let Some(text) = text {
        let shown = format!("{file}:{line} │ {}", text.trim_end());
        check.details = Some(match check.details.take() {
            Some(d) if !d.is_empty() => format!("{shown}\n{d}"),
            _ => shown,
        });
    }
}

/// The course's hints speak CUDA C++; for a Numba kernel, say it in Numba.
pub fn translate_hint(hint: &str) -> String {
    const PAIRS: &[(&str, &str)] = &[
        ("__syncthreads()", "cuda.syncthreads()"),
        ("__syncthreads", "cuda.syncthreads"),
        ("atomicAdd", "cuda.atomic.add"),
        ("__shfl_down_sync", "cuda.shfl_down_sync"),
        ("__shfl_xor_sync", "cuda.shfl_xor_sync"),
        ("`if (i < n)`", "`if i < n:`"),
        ("if (i < n)", "if i < n:"),
        ("__shared__", "cuda.shared.array"),
    ];
    let mut s = hint.to_string();
    for (c, py) in PAIRS {
        s = s.replace(c, py);
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::hints;

    #[test]
    fn hints_speak_numba() {
        assert_eq!(
            translate_hint(hints::RACE),
            "Threads read shared memory another thread writes without a cuda.syncthreads() between the write and the read."
        );
        assert!(translate_hint(hints::WRONG_RESULTS).contains("`if i < n:`"));
    }
}
