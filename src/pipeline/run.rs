//! One request to a worker, and what its failures mean for grading.

use crate::backend::{BackendError, LaunchDims};
use crate::hints;
use crate::inputs::Invocation;
use crate::result::{Check, CheckKind};
use crate::worker::protocol::RunSpec;
use crate::worker::{Client, WorkerFailure};
use std::time::Duration;

pub(super) use crate::worker::client::{Ran, RunError};

/// Run `kernel` (then a multi-kernel milestone's later kernels, `then`) on `inv` in
/// `worker`: the launches may take `limit` together (see `Client::run`).
pub(super) fn run_on(
    worker: &mut Client,
    kernel: &str,
    inv: &Invocation,
    dims: LaunchDims,
    then: &[crate::backend::Then],
    limit: Duration,
    gpu_lock: Option<&str>,
) -> Result<Ran, RunError> {
    let spec = RunSpec {
        kernel: kernel.to_string(),
        dims,
        then: then.to_vec(),
        args: inv.args.clone(),
        buffers: inv.specs(),
        symbols: inv.symbols.clone(),
        deadline_ms: limit.as_millis() as u64,
    };
    worker.run(spec, &inv.allocations(), limit, gpu_lock)
}

/// The student's view of an invocation: as is for CUDA C++ and PTX, Numba's array
/// descriptors for a Numba kernel.
pub(super) fn student_invocation<'i>(
    numba: &Option<crate::rubric::convention::Signature>,
    inv: &'i Invocation,
    contract: &crate::rubric::schema::Contract,
) -> Result<std::borrow::Cow<'i, Invocation>, super::context::Infrastructure> {
    match numba {
        None => Ok(std::borrow::Cow::Borrowed(inv)),
        Some(sig) => crate::inputs::numba_invocation(inv, contract, sig)
            .map(std::borrow::Cow::Owned)
            .map_err(|e| super::context::Infrastructure(format!("Numba arguments: {e}"))),
    }
}

pub(super) fn describe_run_error(e: &RunError) -> String {
    match e {
        RunError::Backend(b, _) => b.to_string(),
        RunError::Worker(f) => f.to_string(),
    }
}

/// A run that did not complete: timeout, fault or crash. The bool says the worker is gone.
pub(super) fn runtime_check(
    e: &RunError,
    case: &str,
    printed: &crate::worker::Captured,
) -> (Check, bool) {
    let name = format!("runtime {case}");
    let (c, fatal) = match e {
        RunError::Worker(WorkerFailure::Timeout(d)) => (
            Check::error(
                CheckKind::Runtime,
                name,
                format!(
                    "timeout: the kernel did not finish within {:.1} s; the worker was killed",
                    d.as_secs_f64()
                ),
            )
            .with_hint(hints::DEADLOCK),
            true,
        ),
        RunError::Backend(BackendError::Timeout(m), _) => (
            Check::error(CheckKind::Runtime, name, format!("timeout: {m}"))
                .with_hint(hints::DEADLOCK),
            true,
        ),
        RunError::Backend(BackendError::Fault(m), _) if m.contains("deadline") => (
            Check::error(CheckKind::Runtime, name, format!("timeout: {m}"))
                .with_hint(hints::DEADLOCK),
            true,
        ),
        RunError::Backend(BackendError::Fault(m), _)
            if m.contains("deadlock") || m.contains("barrier") =>
        {
            (
                Check::error(CheckKind::Runtime, name, format!("deadlock: {m}"))
                    .with_hint(hints::DEADLOCK),
                true,
            )
        }
        RunError::Backend(BackendError::Fault(m), _) => (
            Check::error(CheckKind::Runtime, name, format!("the kernel crashed: {m}"))
                .with_hint(hints::FAULT),
            true,
        ),
        RunError::Backend(BackendError::OutOfMemory(m), _) => (
            Check::error(CheckKind::Runtime, name, format!("out of memory: {m}"))
                .with_hint(hints::RESOURCES),
            false,
        ),
        RunError::Backend(BackendError::Launch(m), _) => (
            Check::fail(
                CheckKind::Launch,
                format!("launch {case}"),
                format!("the launch was refused: {m}"),
            )
            .with_hint(hints::RESOURCES),
            false,
        ),
        RunError::Backend(other, _) => (
            Check::error(CheckKind::Runtime, name, other.to_string()),
            false,
        ),
        RunError::Worker(f) => (
            Check::error(CheckKind::Runtime, name, f.to_string()).with_hint(hints::FAULT),
            true,
        ),
    };
    (
        c.with_case(case.to_string()).with_details(printed.text()),
        fatal,
    )
}

pub(super) trait AppendDetails {
    fn with_details_append(self, printed: &crate::worker::Captured) -> Self;
}

impl AppendDetails for Check {
    /// Attach what the kernel printed, so a student sees their own printf next to the failure.
    fn with_details_append(mut self, printed: &crate::worker::Captured) -> Self {
        let text = printed.text();
        if !text.trim().is_empty() {
            let d = self.details.take().unwrap_or_default();
            self.details = Some(
                format!("{d}\n\nOutput of the kernel:\n{text}")
                    .trim_start()
                    .to_string(),
            );
        }
        self
    }
}
