//! Stage 1 of a milestone: the module that defines its kernel (CUDA C++ or PTX first, then
//! Numba), with the compile check of that file; or why there is none (the submission does not
//! compile, the kernel is missing), which stops the milestone.

use super::build::Built;
use super::context::{Ctx, KeptKernel, Stage};
use super::numba::NumbaKernelState;
use crate::compile;
use crate::hints;
use crate::result::{Check, CheckKind, Status};
use crate::rubric::convention::Signature;

/// The kernel's module, before it is loaded.
pub(super) struct Located<'a> {
    pub(super) file: &'a str,
    pub(super) ptx: &'a str,
    pub(super) numba: Option<Signature>,
}

/// Find the milestone's kernel. Also says whether the kernel is (or should have been) a
/// Numba kernel, so that the milestone's hints speak Numba.
pub(super) fn stage<'b>(ctx: &Ctx, built: &'b Built) -> (Stage<Located<'b>>, bool) {
    let kernel = &ctx.plan.kernel;
    let cuda = built
        .modules
        .iter()
        .find(|(_, ptx)| compile::ptx_entries(ptx).iter().any(|e| e == kernel));
    if let Some((file, ptx)) = cuda {
        let compiled = built
            .checks
            .iter()
            .find(|c| c.name == format!("compile {file}"))
            .cloned();
        if let Some(c) = later_kernel_missing(ctx, built, file, ptx) {
            return (
                Stage::stop(compiled.into_iter().chain([c]).collect()),
                false,
            );
        }
        let found = Located {
            file,
            ptx,
            numba: None,
        };
        return (Stage::go(compiled.into_iter().collect(), found), false);
    }
    if !ctx.plan.then.is_empty() && built.numba.contains_key(kernel) {
        return (Stage::stop(vec![numba_sequence(ctx)]), true);
    }
    match built.numba.get(kernel) {
        Some(NumbaKernelState::Compiled {
            file,
            ptx,
            signature,
            check,
        }) => {
            let found = Located {
                file,
                ptx,
                numba: Some(signature.clone()),
            };
            let compiled = built
                .checks
                .iter()
                .find(|c| c.name == format!("compile {file}"))
                .unwrap_or(check);
            return (Stage::go(vec![compiled.clone()], found), true);
        }
        Some(NumbaKernelState::Failed(c)) if built.modules.is_empty() => {
            let not_run = Check::skipped(
                CheckKind::Correctness,
                "correctness",
                "not run: the kernel does not compile",
            );
            return (Stage::stop(vec![c.clone(), not_run]), true);
        }
        Some(NumbaKernelState::Missing(c))
            if built.modules.is_empty() && built.checks.is_empty() =>
        {
            return (Stage::stop(vec![c.clone()]), true);
        }
        _ => {}
    }
    (Stage::stop(not_found(ctx, built)), false)
}

/// A multi-kernel milestone's kernels run from one module, the first one's (`file`): the first
/// later kernel it lacks, said with where it is instead.
fn later_kernel_missing(ctx: &Ctx, built: &Built, file: &str, ptx: &str) -> Option<Check> {
    let entries = compile::ptx_entries(ptx);
    let missing = ctx.plan.then.iter().find(|k| !entries.contains(k))?;
    let elsewhere = built
        .modules
        .iter()
        .find(|(_, p)| compile::ptx_entries(p).contains(missing))
        .map(|(f, _)| format!(" (it is in `{f}`)"))
        .unwrap_or_default();
    let order = ctx
        .plan
        .kernels()
        .map(|k| format!("`{k}`"))
        .collect::<Vec<_>>()
        .join(", then ");
    Some(
        Check::fail(
            CheckKind::Kernel,
            format!("kernel {missing}"),
            format!(
                "kernel `{missing}` is not in `{file}`{elsewhere}: milestone `{}` launches {order} in this order, and they must be defined in one file",
                ctx.plan.milestone.id,
            ),
        )
        .with_hint(hints::MISSING_KERNEL.replace("NAME", missing)),
    )
}

/// Numba compiles each kernel into a module of its own; a sequence of kernels runs from one.
fn numba_sequence(ctx: &Ctx) -> Check {
    Check::error(
        CheckKind::Kernel,
        format!("kernel {}", ctx.plan.kernel),
        format!(
            "milestone `{}` launches several kernels in sequence, which cugrade grades in CUDA C++ or PTX only: write `{}` in a .cu file",
            ctx.plan.milestone.id,
            ctx.plan.kernels().collect::<Vec<_>>().join("`, `")
        ),
    )
}

/// No module defines the kernel: the compile failures, or "not found".
fn not_found(ctx: &Ctx, built: &Built) -> Vec<Check> {
    let kernel = &ctx.plan.kernel;
    let failed: Vec<Check> = built
        .checks
        .iter()
        .filter(|c| c.status != Status::Pass)
        .cloned()
        .collect();
    if failed.is_empty() {
        return vec![
            Check::fail(
                CheckKind::Kernel,
                format!("kernel {kernel}"),
                format!("kernel `{kernel}` not found in the submission"),
            )
            .with_hint(hints::MISSING_KERNEL.replace("NAME", kernel)),
        ];
    }
    let mut out = failed;
    out.push(Check::skipped(
        CheckKind::Correctness,
        "correctness",
        "not run: the submission does not compile",
    ));
    out
}

/// Keep the milestone's kernel for `check --profile` when asked to.
pub(super) fn keep(ctx: &Ctx, found: &Located) {
    let Some(kept) = &ctx.opts.keep_kernels else {
        return;
    };
    kept.lock()
        .unwrap_or_else(std::sync::PoisonError::into_inner)
        .push(KeptKernel {
            milestone: ctx.plan.milestone.id.clone(),
            kernel: ctx.plan.kernel.clone(),
            ptx: found.ptx.to_string(),
            numba: found.numba.clone(),
            emulator: None,
        });
}
