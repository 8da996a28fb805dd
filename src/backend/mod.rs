//! Backends: where kernels actually run.
//!
//! A backend loads one PTX module, owns device memory, launches kernels and times them. It
//! runs inside a worker process (see `worker`), never in the grading parent. Two exist:
//! `cuda` (the real driver through cudarc) and `emu` (our PTX emulator).
//!
//! Device memory is addressed by plain `u64` device addresses, so that a kernel parameter that
//! is a pointer is just the address of (an offset into) an allocation on either backend.

pub mod cuda;
pub mod emu;

use serde::{Deserialize, Serialize};

/// Which backend to use, as the user says it on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Cuda,
    Emu,
}

impl BackendKind {
    pub fn as_str(self) -> &'static str {
        match self {
            BackendKind::Cuda => "cuda",
            BackendKind::Emu => "emu",
        }
    }
}

/// One kernel argument, already resolved to its value.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub enum ParamValue {
    /// A device address (pointer parameter).
    Ptr(u64),
    I32(i32),
    U32(u32),
    I64(i64),
    U64(u64),
    F32(f32),
    F64(f64),
}

impl ParamValue {
    /// Little-endian bytes as the kernel's parameter space holds them.
    pub fn to_bytes(self) -> Vec<u8> {
        match self {
            ParamValue::Ptr(v) | ParamValue::U64(v) => v.to_le_bytes().to_vec(),
            ParamValue::I64(v) => v.to_le_bytes().to_vec(),
            ParamValue::I32(v) => v.to_le_bytes().to_vec(),
            ParamValue::U32(v) => v.to_le_bytes().to_vec(),
            ParamValue::F32(v) => v.to_le_bytes().to_vec(),
            ParamValue::F64(v) => v.to_le_bytes().to_vec(),
        }
    }
}

/// Grid, block and dynamic shared memory of one launch.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct LaunchDims {
    pub grid: [u32; 3],
    pub block: [u32; 3],
    pub shared_bytes: u32,
}

impl LaunchDims {
    pub fn threads_per_block(&self) -> u64 {
        self.block.iter().map(|&d| d as u64).product()
    }
    pub fn blocks(&self) -> u64 {
        self.grid.iter().map(|&d| d as u64).product()
    }
}

/// Static facts about a kernel in the loaded module.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelInfo {
    /// Number of parameters the entry declares.
    pub param_count: usize,
    /// Size in bytes of each parameter, in order.
    pub param_sizes: Vec<usize>,
    pub max_threads_per_block: u32,
    pub static_shared_bytes: u32,
    pub registers: u32,
}

/// A problem the emulator saw while running a kernel (memcheck, racecheck, ...).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Diagnostic {
    /// `memcheck`, `racecheck`, `synccheck`, `initcheck`, `shfl`, `trap`.
    pub tool: String,
    pub message: String,
    /// `(x, y, z)` of the first offending thread and its block.
    pub thread: [u32; 3],
    pub block: [u32; 3],
    /// The PTX instruction, as text.
    pub instruction: String,
    /// Student source location from `.loc` (`file`, `line`), where known.
    pub file: Option<String>,
    pub line: Option<u32>,
    /// How many more times the same problem was seen (reports show the first only).
    pub repeats: u64,
}

/// Deterministic counters the emulator collects (see docs/emulator.md).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Metrics {
    /// Dynamic instructions × active lanes.
    pub lane_instructions: u64,
    /// Dynamic warp-level instructions.
    pub warp_instructions: u64,
    pub global_load_requests: u64,
    pub global_load_sectors: u64,
    pub global_store_requests: u64,
    pub global_store_sectors: u64,
    /// Bytes the active lanes actually asked for (for efficiency = requested / (sectors*32)).
    pub global_load_bytes_requested: u64,
    pub global_store_bytes_requested: u64,
    pub shared_requests: u64,
    /// Extra shared-memory wavefronts caused by bank conflicts.
    pub shared_bank_conflicts: u64,
    pub branches: u64,
    pub divergent_branches: u64,
}

impl Metrics {
    /// Percent of fetched global-load bytes that lanes asked for (100 = fully coalesced).
    pub fn global_load_efficiency(&self) -> Option<f64> {
        ratio(
            self.global_load_bytes_requested,
            self.global_load_sectors * 32,
        )
    }
    pub fn global_store_efficiency(&self) -> Option<f64> {
        ratio(
            self.global_store_bytes_requested,
            self.global_store_sectors * 32,
        )
    }
    pub fn branch_divergence(&self) -> Option<f64> {
        ratio(self.divergent_branches, self.branches)
    }
    /// Look a metric up by the name rubrics use.
    pub fn by_name(&self, name: &str) -> Option<f64> {
        match name {
            "global_load_efficiency" => self.global_load_efficiency(),
            "global_store_efficiency" => self.global_store_efficiency(),
            "branch_divergence" => self.branch_divergence(),
            "shared_bank_conflicts" => Some(self.shared_bank_conflicts as f64),
            "lane_instructions" => Some(self.lane_instructions as f64),
            "warp_instructions" => Some(self.warp_instructions as f64),
            "global_load_sectors_per_request" => {
                ratio(self.global_load_sectors, self.global_load_requests).map(|p| p / 100.0)
            }
            "global_store_sectors_per_request" => {
                ratio(self.global_store_sectors, self.global_store_requests).map(|p| p / 100.0)
            }
            _ => None,
        }
    }
    pub const NAMES: &'static [&'static str] = &[
        "global_load_efficiency",
        "global_store_efficiency",
        "branch_divergence",
        "shared_bank_conflicts",
        "lane_instructions",
        "warp_instructions",
        "global_load_sectors_per_request",
        "global_store_sectors_per_request",
    ];
}

fn ratio(num: u64, den: u64) -> Option<f64> {
    (den > 0).then(|| 100.0 * num as f64 / den as f64)
}

/// What a launch reports besides the memory it changed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct LaunchReport {
    pub diagnostics: Vec<Diagnostic>,
    pub metrics: Option<Metrics>,
}

/// Why a backend operation failed.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize, thiserror::Error)]
pub enum BackendError {
    /// The module would not load (bad PTX, unsupported instruction in the emulator).
    #[error("module load failed: {0}")]
    Load(String),
    /// No such kernel in the module.
    #[error("kernel `{0}` not found in the module")]
    NoKernel(String),
    /// The launch itself was refused (bad configuration, too many resources).
    #[error("launch failed: {0}")]
    Launch(String),
    /// The kernel faulted while running (illegal address, trap, misaligned access). The
    /// context is unusable afterwards on CUDA.
    #[error("kernel fault: {0}")]
    Fault(String),
    /// The operation did not finish before its deadline.
    #[error("timeout: {0}")]
    Timeout(String),
    /// Out of device memory.
    #[error("out of memory: {0}")]
    OutOfMemory(String),
    /// Anything else the driver said.
    #[error("{0}")]
    Other(String),
}

/// The interface both backends implement. One instance per worker process.
pub trait Backend {
    /// Short name: `cuda` or `emu`.
    fn kind(&self) -> BackendKind;
    /// Human description of the device (`NVIDIA H200 (sm_90)`, `PTX emulator`).
    fn device_name(&self) -> String;
    /// Load a PTX module, replacing any loaded before.
    fn load_module(&mut self, ptx: &str) -> Result<(), BackendError>;
    /// Facts about a kernel of the loaded module; `NoKernel` if absent.
    fn kernel_info(&mut self, name: &str) -> Result<KernelInfo, BackendError>;
    /// Allocate `bytes` of device memory; returns its device address.
    fn alloc(&mut self, bytes: usize) -> Result<u64, BackendError>;
    /// Free all allocations (between trials).
    fn free_all(&mut self) -> Result<(), BackendError>;
    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), BackendError>;
    fn read(&mut self, addr: u64, len: usize) -> Result<Vec<u8>, BackendError>;
    /// Set a `__device__` or `__constant__` global of the module by symbol name.
    fn set_global(&mut self, name: &str, data: &[u8]) -> Result<(), BackendError>;
    /// Launch and wait for completion. The worker's parent enforces the deadline by killing
    /// the process; `deadline` lets a backend give up cleanly before that where it can.
    fn launch(
        &mut self,
        kernel: &str,
        dims: LaunchDims,
        params: &[ParamValue],
        deadline: std::time::Instant,
    ) -> Result<LaunchReport, BackendError>;
    /// Launch `reps` times back to back and return each launch's device time in milliseconds.
    /// `None` when the backend cannot time (the emulator).
    fn time(
        &mut self,
        kernel: &str,
        dims: LaunchDims,
        params: &[ParamValue],
        reps: u32,
        deadline: std::time::Instant,
    ) -> Result<Option<Vec<f64>>, BackendError>;
    /// Whether the harness should surround buffers with guard regions. The emulator says no:
    /// it checks every access against the exact allocation itself (memcheck), and a guard
    /// would count as valid memory.
    fn wants_guards(&self) -> bool {
        true
    }
    /// Device-to-device copy bandwidth in GB/s (bytes read + written), measured on `bytes`.
    fn copy_bandwidth(&mut self, _bytes: usize) -> Result<Option<f64>, BackendError> {
        Ok(None)
    }
    /// cuBLAS SGEMM time in ms for row-major `C[MxN] = A[MxK] B[KxN]`, if the backend has it.
    fn sgemm_ms(
        &mut self,
        _m: usize,
        _n: usize,
        _k: usize,
        _reps: u32,
    ) -> Result<Option<f64>, BackendError> {
        Ok(None)
    }
}
