//! Stage 2 of a milestone: the kernel's module in the student's worker (the one kept from the
//! student's last milestone, else a fresh, confined one), the kernel's parameters against the
//! contract, and its resources at the launch its speed is measured with.

use super::context::{Ctx, Infrastructure, Kernel, Stage, Student, workers};
use super::locate::Located;
use super::resources;
use crate::backend::KernelInfo;
use crate::hints;
use crate::result::{Check, CheckKind};
use crate::rubric::ParamType;
use crate::worker::Client;
use std::time::Duration;

pub(super) fn stage<'b>(
    ctx: &Ctx,
    found: Located<'b>,
    student: &mut Student,
    sandbox: &mut Vec<String>,
) -> Result<Stage<Kernel<'b>>, Infrastructure> {
    // Starting a worker and loading a module use the GPU: never beside a timed section.
    let _gpu = ctx
        .opts
        .gpu
        .as_deref()
        .and_then(|k| crate::measure::lock::shared(k, "load").ok());
    // A worker that fails this stage ends here: the next milestone gets a fresh one.
    let mut worker = worker_for(ctx, student)?;
    if sandbox.is_empty() {
        *sandbox = worker.ready().sandbox.clone();
    }
    if let Some(c) = load_module(ctx, &mut worker, &found) {
        return Ok(Stage::stop(vec![c]));
    }
    let info = match kernel_info(ctx, &mut worker) {
        Ok(info) => info,
        Err(c) => return Ok(Stage::stop(vec![*c])),
    };
    let signature = signature_check(ctx, &ctx.plan.kernel, &info, found.numba.as_ref());
    if signature.status != crate::result::Status::Pass {
        return Ok(Stage::stop(vec![signature]));
    }
    // A multi-kernel milestone's later kernels: each present, each with the contract's
    // parameters.
    let mut later = Vec::new();
    for k in &ctx.plan.then {
        let c = match kernel_info_of(&mut worker, k) {
            Ok(info) => signature_check(ctx, k, &info, None),
            Err(c) => *c,
        };
        let stop = c.status != crate::result::Status::Pass;
        later.push(c);
        if stop {
            let mut checks = vec![signature];
            checks.extend(later);
            return Ok(Stage::stop(checks));
        }
    }
    student.worker = Some(worker);
    let kernel = Kernel {
        tensor_ops: found.ptx.contains("mma."),
        ptx: found.ptx,
        numba: found.numba,
        info,
    };
    let mut checks = vec![signature];
    checks.extend(later);
    // Resources at the launch the speed is measured with (else the first case's).
    let dims = ctx.plan.resource_case().and_then(|c| {
        let d = c.launch.clone().ok()?;
        crate::inputs::check_limits(&d, kernel.info.max_threads_per_block).ok()?;
        Some(d)
    });
    if let Some(dims) = dims {
        let compiled = ctx.compiled.iter().find(|k| k.name == ctx.plan.kernel);
        checks.push(resources::check(
            &ctx.plan.kernel,
            &kernel.info,
            compiled,
            dims,
        ));
    }
    Ok(Stage::go(checks, kernel))
}

/// Make the student's worker hold `kernel`'s module again (milestones' second halves run
/// after every first half: another module may be loaded since, or a fault ended the worker).
/// A failure leaves the worker gone; the timed section then says so.
pub(super) fn reload(ctx: &Ctx, kernel: &Kernel, student: &mut Student) {
    if student
        .worker
        .as_mut()
        .is_some_and(|w| w.is_alive() && w.holds(kernel.ptx))
    {
        return;
    }
    let _gpu = ctx
        .opts
        .gpu
        .as_deref()
        .and_then(|k| crate::measure::lock::shared(k, "load").ok());
    let Ok(mut worker) = worker_for(ctx, student) else {
        return;
    };
    if let Ok(Ok(())) = worker.load(kernel.ptx, Duration::from_secs(120)) {
        student.worker = Some(worker);
    }
}

/// The student's worker from an earlier milestone, else a fresh, confined one, whose CPU-time
/// limit covers every milestone's budget.
fn worker_for(ctx: &Ctx, student: &mut Student) -> Result<Client, Infrastructure> {
    if let Some(w) = student
        .worker
        .take()
        .and_then(|mut w| w.is_alive().then_some(w))
    {
        return Ok(w);
    }
    let all = ctx.rubric.timeouts.milestone_s * ctx.rubric.milestones.len() as f64;
    workers(ctx.opts)
        .run(Some((all + 600.0) as u64))
        .map_err(|e| Infrastructure(format!("cannot start a worker: {e}")))
}

/// Load the module; a check when it does not load.
fn load_module(ctx: &Ctx, worker: &mut Client, found: &Located) -> Option<Check> {
    let file = found.file;
    match worker.load(found.ptx, Duration::from_secs(120)) {
        Ok(Ok(())) => None,
        Ok(Err(e)) if ctx.caps().emulated => {
            // Our emulator's limit, not the student's mistake.
            Some(Check::error(CheckKind::Compile, format!("load {file}"), format!("the PTX emulator cannot run this module: {e}")).with_hint("Grade this submission on a GPU (--backend cuda), and report the unsupported instruction to the course staff."))
        }
        Ok(Err(e)) => Some(
            Check::fail(
                CheckKind::Compile,
                format!("load {file}"),
                format!("the module does not load: {e}"),
            )
            .with_hint(hints::COMPILE),
        ),
        Err(f) => Some(
            Check::error(
                CheckKind::Runtime,
                "load",
                format!("loading the module failed: {f}"),
            )
            .with_details(worker.output().text()),
        ),
    }
}

/// What the backend says of the kernel; a check when it has no such kernel.
fn kernel_info(ctx: &Ctx, worker: &mut Client) -> Result<KernelInfo, Box<Check>> {
    kernel_info_of(worker, &ctx.plan.kernel)
}

fn kernel_info_of(worker: &mut Client, kernel: &str) -> Result<KernelInfo, Box<Check>> {
    match worker.kernel_info(kernel, Duration::from_secs(30)) {
        Ok(Ok(info)) => Ok(info),
        Ok(Err(e)) => Err(Box::new(
            Check::fail(CheckKind::Kernel, format!("kernel {kernel}"), e.to_string())
                .with_hint(hints::MISSING_KERNEL.replace("NAME", kernel)),
        )),
        Err(f) => Err(Box::new(Check::error(
            CheckKind::Runtime,
            "kernel info",
            format!("{:?}", Some(f)),
        ))),
    }
}

/// The kernel's parameters (count and sizes) against the contract's (Numba's calling
/// convention for a Numba kernel).
fn signature_check(
    ctx: &Ctx,
    kernel: &str,
    info: &KernelInfo,
    numba: Option<&crate::rubric::convention::Signature>,
) -> Check {
    let contract = &ctx.plan.contract;
    let passed: Vec<_> = contract.params.iter().filter(|p| !p.symbol).collect();
    let expected_sizes: Vec<usize> = match numba {
        Some(sig) => crate::rubric::convention::param_sizes(sig, contract),
        None => passed
            .iter()
            .map(|p| match p.param_type() {
                Some(ParamType::Buffer(_)) => 8,
                Some(ParamType::Scalar(t)) => t.size(),
                None => 0,
            })
            .collect(),
    };
    let expected_params = if numba.is_some() {
        expected_sizes.len()
    } else {
        passed.len()
    };
    if info.param_count != expected_params
        || (info.param_sizes.len() == expected_sizes.len() && info.param_sizes != expected_sizes)
    {
        let sig: Vec<String> = passed
            .iter()
            .map(|p| format!("{} {}", p.ty, p.name))
            .collect();
        return Check::fail(
            CheckKind::Kernel,
            format!("kernel {kernel}"),
            format!("`{kernel}` takes {} parameters of sizes {:?}; the contract is ({}) with sizes {:?}", info.param_count, info.param_sizes, sig.join(", "), expected_sizes),
        )
        .with_hint(hints::MISSING_KERNEL.replace("NAME", kernel))
        .with_cause("signature");
    }
    Check::pass(
        CheckKind::Kernel,
        format!("kernel {kernel}"),
        format!(
            "`{kernel}` found with the contract's {} parameters",
            info.param_count
        ),
    )
}
