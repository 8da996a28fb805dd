//! Where a kernel runs: one launch's dimensions, a multi-kernel milestone's later launches, and the
//! GPU a check was timed on.

use serde::{Deserialize, Serialize};

/// A launch after the first of a multi-kernel milestone (a contract's `then`): another
/// kernel of the same module, on the same arguments, once the previous one has finished.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Then {
    pub kernel: String,
    pub dims: LaunchDims,
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

/// Which GPU graded a student and timed a check, as result.json records it (`run.gpu` and each
/// performance check's `timing.device`): the CUDA ordinal as `--gpus` numbered it, the model,
/// and the names that survive renumbering (`CUDA_VISIBLE_DEVICES`, another node).
#[derive(Debug, Clone, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GpuRecord {
    /// The CUDA device ordinal (as in `--gpus`).
    pub index: usize,
    /// The model, as the driver names it (`NVIDIA H200`).
    pub name: String,
    /// `nvidia-smi`'s `GPU-xxxxxxxx-...`, where the driver gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub uuid: Option<String>,
    /// `0000:17:00.0`, where the driver gives it.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub pci_bus_id: Option<String>,
}
