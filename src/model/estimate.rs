//! What a speed estimate without a GPU found: the records a performance check carries into
//! result.json (the emulator and cost model that fill them are `estimate`).

use serde::{Deserialize, Serialize};

/// The emulator's instruction classes a block's issue counts are kept by
/// (`backend::emu::cost::CLASSES`; `estimate::model` checks that the two agree).
pub const CLASSES: usize = 8;

/// What a speed estimate found for one performance check (result.json's `estimate`).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Estimate {
    /// The modelled GPU's short name ("H100") and its data file id ("h100").
    pub gpu: String,
    pub gpu_id: String,
    /// The kernel's estimated time and its likely range, ms.
    pub ms: f64,
    pub low_ms: f64,
    pub high_ms: f64,
    /// The bar's quantity (a speed-up, a percent of copy bandwidth) and its likely range.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_low: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ratio_high: Option<f64>,
    /// The bar (`min`) and its unit (`x`, `%`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub needs: Option<f64>,
    pub unit: String,
    /// What the ratio is taken against, in words ("the reference `reduce_naive`").
    pub against: String,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub baseline: Option<BaselineEstimate>,
    /// Why there is no ratio although the bar has one (a CPU baseline that is not pinned).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub no_ratio: Option<String>,
    /// The bound that dominates: `compute`, `l1`, `latency`, `l2`, `dram`, `atomics`.
    pub limiter: String,
    /// Every bound, ms.
    pub bounds: Vec<(String, f64)>,
    /// Resident blocks per SM on the modelled GPU, and what limits them.
    pub blocks_per_sm: u32,
    pub occupancy_limiter: String,
    /// Caveats that widen the range or qualify the number.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<String>,
    /// Seconds the estimate took (emulation included).
    pub seconds: f64,
    /// The model's inputs, kept so that the model can be re-fitted without emulating again.
    pub profile: KernelProfile,
}

/// The baseline side of an estimated ratio.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct BaselineEstimate {
    /// `cpu`, `cpu_parallel`, `reference:<kernel>`, `cublas`, `copy`.
    pub kind: String,
    pub ms: f64,
    /// Whether `ms` is the model's (a GPU baseline) or pinned for the course (the CPU).
    pub estimated: bool,
    /// A device copy's bytes (read once and written once), for `copy`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bytes: Option<f64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub profile: Option<KernelProfile>,
}

/// Per-block averages over the whole grid (sample weights applied), warp-level counts.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct BlockAverages {
    /// SASS-equivalent warp instructions per pipe: fma, alu, fp64, sfu, conv, mem, ctrl, shfl.
    pub issue: [f64; CLASSES],
    pub warp_insts: f64,
    pub lane_insts: f64,
    pub gld_requests: f64,
    pub gld_sectors: f64,
    pub gld_lines: f64,
    /// The L1's cycles for global loads (banks and tags).
    #[serde(default)]
    pub gld_wavefronts: f64,
    pub gst_requests: f64,
    pub gst_sectors: f64,
    pub gst_lines: f64,
    /// Global-load sectors that missed the block's L1 (they go to L2).
    pub l2_load_sectors: f64,
    pub atom_requests: f64,
    pub atom_ops: f64,
    pub atom_serial: f64,
    pub shared_requests: f64,
    pub shared_wavefronts: f64,
    pub shared_atom_serial: f64,
    pub local_wavefronts: f64,
    pub barriers: f64,
    /// Critical path, cycles, with the block's first-touch misses from DRAM, and from L2.
    pub cp: f64,
    pub cp_l2: f64,
    /// Global-load sectors that missed L1 on their first touch by the block.
    pub first_touch_sectors: f64,
}

/// What the cost model needs of one kernel on one case: the grid, the resources of a block,
/// per-block averages, and whole-kernel traffic. `result.json` keeps it with each estimate so
/// that the model can be re-fitted without emulating again.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct KernelProfile {
    pub blocks: u64,
    /// Blocks emulated (all of them when `blocks == sampled`).
    pub sampled: u64,
    pub threads_per_block: u32,
    /// Registers per thread (ptxas), when known.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub registers: Option<u32>,
    /// Shared memory per block, static and dynamic, bytes.
    pub shared_bytes: u32,
    pub per_block: BlockAverages,
    /// The slowest sampled block's critical path, cycles (DRAM and L2 scenarios).
    pub cp_max: f64,
    pub cp_max_l2: f64,
    /// Bytes the kernel must read from and write to DRAM (its footprint: distinct sectors).
    pub dram_read_bytes: f64,
    pub dram_write_bytes: f64,
    /// Atomic operations on the most contended address, whole grid.
    pub hot_atomic_ops: f64,
    /// The kernel's blocks may talk through global atomics (`atom` with its old value used).
    pub communicating: bool,
    /// Warp instructions the emulator ran for this profile.
    pub emulated_warp_insts: u64,
}
