//! The first stage of a grading: every kernel the submission hands in, to PTX. CUDA C++ (and
//! CuPy's kernels, turned into CUDA C++) through NVRTC, PTX files as they are, Numba's `.py`
//! kernels through Numba, each in a sandboxed compile worker; then ptxas's resource facts of
//! the PTX NVRTC did not assemble. Languages the rubric does not accept are not compiled.

use super::compiling::{self, compile_all};
use super::context::{Infrastructure, Options};
use super::{cupy, numba};
use crate::compile::SourceFile;
use crate::result::{Check, CompileSummary, Flag};
use crate::rubric::plan::Plan;
use crate::rubric::schema::Language;
use crate::submission::Submission;
use std::time::Duration;

/// Every module the submission compiled to, and what compiling it found.
pub(super) struct Built {
    /// (file, PTX) of every CUDA C++ and PTX module.
    pub(super) modules: Vec<(String, String)>,
    /// Compile findings of every file (and of languages the rubric refuses).
    pub(super) checks: Vec<Check>,
    pub(super) summary: CompileSummary,
    pub(super) numba: numba::NumbaKernels,
    /// The submission is CuPy kernels only: messages speak CuPy.
    pub(super) cupy_only: bool,
    /// Some CUDA C++ (or CuPy) source was handed to NVRTC.
    pub(super) compiled_sources: bool,
}

/// Compile the submission. `Err` when the machine cannot compile for anyone.
pub(super) fn stage(
    plan: &Plan,
    sub: &Submission,
    opts: &Options,
) -> Result<Built, Infrastructure> {
    let refused = numba::refused_languages(plan, sub);
    let accepts = |l: Language| !refused.iter().any(|(r, _)| *r == l);
    let compile_s = Duration::from_secs_f64(plan.timeouts.compile_s);
    // CuPy kernels become CUDA C++ and compile with the `.cu` files.
    let (cupy_sources, cupy_checks) = if accepts(Language::Cupy) {
        cupy::sources(plan, sub, opts)
    } else {
        (vec![], vec![])
    };
    let mut sources = if accepts(Language::Cuda) {
        sub.sources.clone()
    } else {
        vec![]
    };
    sources.extend(cupy_sources);
    let ptx: &[SourceFile] = if accepts(Language::Ptx) {
        &sub.ptx
    } else {
        &[]
    };
    let numba_wanted = accepts(Language::Numba);
    let (modules, mut checks, mut summary) =
        compile_all(&sources, &sub.headers, ptx, opts, compile_s)?;
    checks.extend(refused.into_iter().map(|(_, c)| c));
    if let Some(fault) = compiling::machine_fault(&checks, opts) {
        return Err(Infrastructure(fault));
    }
    compiling::hint_missing_headers(&mut checks);
    checks.extend(cupy_checks);
    let numba = if numba_wanted && sub.languages().contains(&Language::Numba) {
        numba::compile(plan, sub, opts)?
    } else {
        numba::NumbaKernels::new()
    };
    assemble_foreign(&modules, &numba, sub, opts, compile_s, &mut summary);
    Ok(Built {
        cupy_only: sub.sources.is_empty()
            && sub.ptx.is_empty()
            && sub.languages() == [Language::Cupy],
        compiled_sources: !sources.is_empty(),
        modules,
        checks,
        summary,
        numba,
    })
}

/// Registers and spills of PTX that NVRTC did not assemble (PTX files, Numba's kernels) come
/// from ptxas too, never from the emulator's count of virtual registers.
fn assemble_foreign(
    modules: &[(String, String)],
    numba: &numba::NumbaKernels,
    sub: &Submission,
    opts: &Options,
    compile_s: Duration,
    summary: &mut CompileSummary,
) {
    let mut numba_ptx: Vec<(String, String)> = numba
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
    if foreign.is_empty() {
        return;
    }
    let (kernels, log) = compiling::assemble_all(&foreign, opts, compile_s);
    summary.kernels.extend(kernels);
    if !log.is_empty() {
        if !summary.log.is_empty() {
            summary.log.push('\n');
        }
        summary.log.push_str(log.trim_end());
    }
}

impl Built {
    /// The compile summary result.json carries, when anything was compiled.
    pub(super) fn summary_if_compiled(&self) -> Option<CompileSummary> {
        (self.compiled_sources || !self.summary.kernels.is_empty()).then(|| self.summary.clone())
    }

    /// The integrity flags of the submission's device code (`integrity::device`), each with
    /// the milestone whose kernel it is in.
    pub(super) fn device_flags(&self, plan: &Plan) -> Vec<Flag> {
        let mut found: Vec<(Option<String>, Flag)> = self
            .modules
            .iter()
            .flat_map(|(file, ptx)| crate::integrity::device::scan(file, ptx))
            .collect();
        let mut names: Vec<&String> = self.numba.keys().collect();
        names.sort();
        for k in names.into_iter().filter_map(|n| self.numba.get(n)) {
            if let numba::NumbaKernelState::Compiled { file, ptx, .. } = k {
                found.extend(crate::integrity::device::scan(file, ptx));
            }
        }
        let mut out: Vec<Flag> = Vec::new();
        for (kernel, mut f) in found {
            f.milestone = kernel.as_ref().and_then(|k| {
                plan.milestones
                    .iter()
                    .find(|m| &m.kernel == k)
                    .map(|m| m.milestone.id.clone())
            });
            if !out.contains(&f) {
                out.push(f);
            }
        }
        out
    }
}
