//! One request to a worker, and what its failures mean for grading.

use crate::backend::{BackendError, LaunchDims, LaunchReport};
use crate::hints;
use crate::inputs::Invocation;
use crate::result::{Check, CheckKind};
use crate::worker::protocol::{Request, Response, RunSpec};
use crate::worker::{Worker, WorkerFailure};
use std::time::Duration;

/// A kernel run's outcome, as the parent validated it.
pub(super) struct Ran {
    /// Whole allocations (guards included), in buffer order.
    pub(super) allocations: Vec<Vec<u8>>,
    pub(super) report: LaunchReport,
    /// The launch itself, start to the kernel's end, as the worker timed it (seconds).
    pub(super) seconds: f64,
}

pub(super) enum RunError {
    Backend(BackendError, Box<LaunchReport>),
    Worker(WorkerFailure),
}

pub(super) fn run_on(
    worker: &mut Worker,
    kernel: &str,
    inv: &Invocation,
    dims: LaunchDims,
    limit: Duration,
    gpu_lock: Option<&str>,
) -> Result<Ran, RunError> {
    let specs = inv.specs();
    let spec = RunSpec {
        kernel: kernel.to_string(),
        dims,
        args: inv.args.clone(),
        buffers: specs.clone(),
        symbols: inv.symbols.clone(),
        deadline_ms: limit.as_millis() as u64,
    };
    let allocs = inv.allocations();
    let refs: Vec<&[u8]> = allocs.iter().map(Vec::as_slice).collect();
    let bytes: usize = allocs.iter().map(Vec::len).sum();
    // Transfers take time too: allow ~1 s per 200 MB each way on top of the kernel's limit.
    let slack = Duration::from_secs(5) + Duration::from_millis((bytes / 100_000) as u64);
    // A correctness run shares the GPU with other correctness runs, never with a timed section.
    let _shared = gpu_lock.and_then(|k| crate::measure::lock::shared(k).ok());
    match worker.call(&Request::Run(spec), &refs, limit + slack) {
        Ok((
            Response::Ran {
                error: None,
                report,
            },
            blobs,
        )) => {
            if blobs.len() != specs.len()
                || blobs.iter().zip(&specs).any(|(b, s)| b.len() != s.total())
            {
                return Err(RunError::Worker(WorkerFailure::Protocol(
                    "returned buffers do not match what was sent".into(),
                )));
            }
            Ok(Ran {
                seconds: report.seconds,
                allocations: blobs,
                report,
            })
        }
        Ok((
            Response::Ran {
                error: Some(e),
                report,
                ..
            },
            _,
        )) => Err(RunError::Backend(e, Box::new(report))),
        Ok((other, _)) => Err(RunError::Worker(WorkerFailure::Protocol(format!(
            "unexpected answer {}",
            variant(&other)
        )))),
        Err(f) => Err(RunError::Worker(f)),
    }
}

pub(super) fn variant(r: &Response) -> &'static str {
    match r {
        Response::Ready { .. } => "Ready",
        Response::Compiled { .. } => "Compiled",
        Response::Loaded { .. } => "Loaded",
        Response::NumbaCompiled(_) => "NumbaCompiled",
        Response::CupyExtracted(_) => "CupyExtracted",
        Response::KernelInfo(_) => "KernelInfo",
        Response::Ran { .. } => "Ran",
        Response::Staged => "Staged",
        Response::Timed(_) => "Timed",
        Response::Estimated(_) => "Estimated",
        Response::Unreadable { .. } => "Unreadable",
        Response::Failed { .. } => "Failed",
        Response::Unpacked(_) => "Unpacked",
    }
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
