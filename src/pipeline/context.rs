//! What the stages of grading share: the options a grading runs with, the failure that stops
//! it (exit 3), and the context every stage of one milestone reads.

use crate::backend::{BackendKind, KernelInfo};
use crate::result::Check;
use crate::rubric::convention::Signature;
use crate::rubric::plan::{CasePlan, MilestonePlan, Plan};
use crate::submission::Submission;
use crate::worker::Client;
use crate::worker::pool::Workers;

/// How to grade.
#[derive(Debug, Clone)]
pub struct Options {
    pub backend: BackendKind,
    pub device: usize,
    pub seed: u64,
    /// Compile target: the device's (`sm_90` on an H200), or `sm_90` without a device.
    pub arch: String,
    pub device_name: String,
    /// The GPU's PCI bus id on the cuda backend: the key of the per-GPU timing lock
    /// (`measure::lock`) and of NVML's clock readings.
    pub gpu: Option<String>,
    /// The GPU this grading runs on (cuda backend), recorded in result.json as `run.gpu` and
    /// in each performance check's `timing.device`.
    pub gpu_record: Option<crate::backend::GpuRecord>,
    /// Where measured CPU baselines are cached (`measure::calibration`); `None`: the user's
    /// cache directory.
    pub baseline_cache: Option<std::path::PathBuf>,
    /// Directories no worker may read (rubric, cohort, outputs): see `sandbox::Policy`.
    pub protected: Vec<std::path::PathBuf>,
    /// Where to keep each milestone's module, for `check --profile` (which profiles the kernel
    /// again under Nsight Compute); `None`: nothing is kept.
    pub keep_kernels: Option<Kept>,
    /// The GPU the emulator's speed estimates are for (`estimate::gpu`'s id, e.g. `h100`).
    pub estimate_gpu: String,
    /// A multi-GPU lab's rank set (`setup::ranks`): its GPUs, one a rank, or on the emulator
    /// as many emulated devices. Empty for every other lab: then workers have one device.
    pub ranks: Vec<usize>,
    /// The timing-lock keys of the rank set's GPUs (cuda backend).
    pub rank_locks: Vec<String>,
}

/// A milestone's kernel as it was graded: its module and, for Numba, its calling convention.
#[derive(Debug, Clone)]
pub struct KeptKernel {
    pub milestone: String,
    pub kernel: String,
    pub ptx: String,
    pub numba: Option<crate::rubric::convention::Signature>,
    /// On the emulator: the counters of the largest correctness case it ran (the case's name
    /// and the first trial's metrics), for `check --profile` without a GPU.
    pub emulator: Option<(String, crate::backend::Metrics)>,
}

/// The kernels `grade` keeps (see [`Options::keep_kernels`]).
pub type Kept = std::sync::Arc<std::sync::Mutex<Vec<KeptKernel>>>;

/// How this run's workers start (`worker::pool`): the protected folders, backend, device and
/// GPU lock of `opts`.
pub(super) fn workers(opts: &Options) -> Workers {
    Workers::new(&opts.protected, opts.backend, opts.device)
        .with_gpu_lock(opts.gpu.clone())
        .with_ranks(opts.ranks.clone())
}

/// A failure of the grading machinery itself (not of the student's code): exit 3.
#[derive(Debug, Clone, thiserror::Error)]
#[error("{0}")]
pub struct Infrastructure(pub String);

/// What every stage of one milestone reads: the rubric's plan, the milestone's, the
/// submission and the options.
pub(super) struct Ctx<'a> {
    pub(super) rubric: &'a Plan,
    pub(super) plan: &'a MilestonePlan,
    pub(super) sub: &'a Submission,
    pub(super) opts: &'a Options,
    /// `ptxas -v` facts of the submission's kernels (registers, spills).
    pub(super) compiled: &'a [crate::result::KernelResources],
}

/// The student's kernel as the milestone grades it.
pub(super) struct Kernel<'a> {
    /// Its module.
    pub(super) ptx: &'a str,
    /// A Numba kernel's signature: launches use Numba's calling convention.
    pub(super) numba: Option<Signature>,
    /// What the worker's backend says of it (parameters, block limit).
    pub(super) info: KernelInfo,
    /// The module uses tensor-core instructions (for the roofline's arithmetic peak).
    pub(super) tensor_ops: bool,
}

/// The student's worker, kept across the student's milestones while it stays healthy (a fault
/// or a timeout ends it; the next milestone gets a fresh one). On a GPU the driver creates and
/// destroys contexts one at a time across processes (about 0.2 s each on an H100 with 16
/// processes at once), so a worker per milestone made context churn a cohort's bottleneck.
/// Nothing crosses students, and within one student every launch still starts from fresh
/// inputs, poisoned outputs and the module's own `__device__` values.
#[derive(Default)]
pub(super) struct Student {
    /// It remembers whether it holds the reference and harness modules of timed sections.
    pub(super) worker: Option<Client>,
    /// The PTX emulator's worker for the sanitizer pass after a GPU run and the emulator's
    /// counters (metric checks), kept across the student's milestones.
    pub(super) emulator: Option<Client>,
}

/// What one stage of a milestone found, and whether the milestone goes on (`next`: what the
/// following stages need) or stops here (`None`).
pub(super) struct Stage<T> {
    pub(super) checks: Vec<Check>,
    pub(super) next: Option<T>,
}

impl<T> Stage<T> {
    pub(super) fn go(checks: Vec<Check>, next: T) -> Self {
        Stage {
            checks,
            next: Some(next),
        }
    }

    pub(super) fn stop(checks: Vec<Check>) -> Self {
        Stage { checks, next: None }
    }
}

impl Ctx<'_> {
    /// What the backend can do, for stages that differ by backend.
    pub(super) fn caps(&self) -> crate::backend::Capabilities {
        self.opts.backend.caps()
    }
}

/// The reference kernel always runs with the contract's own launch.
pub(super) fn reference_launch(
    case: &CasePlan,
) -> Result<crate::backend::LaunchDims, Infrastructure> {
    case.reference_launch
        .clone()
        .map_err(|e| Infrastructure(format!("reference launch for case {}: {e}", case.name)))
}
