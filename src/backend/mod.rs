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
pub mod ranks;

pub use crate::model::launch::{GpuRecord, LaunchDims, Then};
use serde::{Deserialize, Serialize};

/// Which backend to use, as the user says it on the command line.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum BackendKind {
    Cuda,
    Emu,
}

/// What a backend can do. The stages ask for a capability, never for a backend by name, so a
/// new backend is its module, its `BackendKind` and its row here.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Capabilities {
    /// Runs student code on a GPU: a run worker opens the device (and smoke-tests it), its
    /// sandbox reaches `/dev/nvidia*`, and the run records which GPU it was.
    pub device: bool,
    /// Times kernels: performance checks are measured and graded (else estimated, as feedback).
    pub timed: bool,
    /// NVIDIA's compute-sanitizer checks the student's kernels, and the emulator runs the
    /// smallest cases again beside it (the cross-check).
    pub device_sanitizer: bool,
    /// Hardware counters (Nsight Compute) answer metric checks (else the emulator's own).
    pub counters: bool,
    /// cugrade's own emulator: a module it cannot load is cugrade's limit, not the student's.
    pub emulated: bool,
}

impl BackendKind {
    /// What this backend can do.
    pub const fn caps(self) -> Capabilities {
        match self {
            BackendKind::Cuda => Capabilities {
                device: true,
                timed: true,
                device_sanitizer: true,
                counters: true,
                emulated: false,
            },
            BackendKind::Emu => Capabilities {
                device: false,
                timed: false,
                device_sanitizer: false,
                counters: false,
                emulated: true,
            },
        }
    }

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
    U8(u8),
    I8(i8),
    U16(u16),
    I16(i16),
    /// A half or a bfloat16, as its bits.
    Bits16(u16),
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
            ParamValue::U8(v) => vec![v],
            ParamValue::I8(v) => v.to_le_bytes().to_vec(),
            ParamValue::U16(v) | ParamValue::Bits16(v) => v.to_le_bytes().to_vec(),
            ParamValue::I16(v) => v.to_le_bytes().to_vec(),
        }
    }
}

/// One kernel argument: a buffer (by index into the request's buffers) or a value.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub enum Arg {
    Buffer(usize),
    Value(ParamValue),
}

/// A device allocation: `guard` bytes, `bytes` of payload, `guard` bytes. The kernel gets the
/// address of the payload. The blob sent with the request holds the whole allocation.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct BufferSpec {
    pub bytes: usize,
    pub guard: usize,
}

impl BufferSpec {
    pub fn total(&self) -> usize {
        self.bytes + 2 * self.guard
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
    /// Local memory per thread (register spills and local arrays), where the backend knows it.
    #[serde(default)]
    pub local_bytes: u32,
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
    /// Where a metric's cost is largest (the emulator's; empty on a GPU): the source line
    /// with the most bank conflicts, unused bytes of the global sectors its loads fetch or its
    /// stores write, or divergent branches. A failed metric check points there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hot_lines: Vec<HotLine>,
}

/// The source line that costs a metric most, and its share of the launch's total.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct HotLine {
    /// The metric's name as rubrics write it (`shared_bank_conflicts`).
    pub metric: String,
    pub file: String,
    pub line: u32,
    /// This line's part of the metric's cost, 0 to 1.
    pub share: f64,
}

impl Metrics {
    /// The line that costs `metric` most; the sectors-per-request metrics share their
    /// efficiency's.
    pub fn hot_line(&self, metric: &str) -> Option<&HotLine> {
        let metric = match metric {
            "global_load_sectors_per_request" => "global_load_efficiency",
            "global_store_sectors_per_request" => "global_store_efficiency",
            m => m,
        };
        self.hot_lines.iter().find(|h| h.metric == metric)
    }

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
    /// The kernel's time, seconds: on a GPU between events around the launch (module loading
    /// excluded), on the emulator its wall time. The reference's sets a correctness launch's
    /// deadline (`Timeouts::correctness_deadline`).
    #[serde(default)]
    pub seconds: f64,
}

impl LaunchReport {
    /// This launch's report followed by `next`'s (a multi-kernel milestone's): findings of
    /// both, counters summed, times added.
    pub fn then(mut self, next: LaunchReport) -> LaunchReport {
        self.diagnostics.extend(next.diagnostics);
        self.metrics = match (self.metrics, next.metrics) {
            (Some(a), Some(b)) => Some(a.then(b)),
            (a, b) => a.or(b),
        };
        self.seconds += next.seconds;
        self
    }
}

impl Metrics {
    /// Counters of two launches in sequence, summed; the hot lines of the one that costs more.
    pub fn then(self, next: Metrics) -> Metrics {
        let hot_lines = if next.lane_instructions > self.lane_instructions {
            next.hot_lines.clone()
        } else {
            self.hot_lines.clone()
        };
        Metrics {
            lane_instructions: self.lane_instructions + next.lane_instructions,
            warp_instructions: self.warp_instructions + next.warp_instructions,
            global_load_requests: self.global_load_requests + next.global_load_requests,
            global_load_sectors: self.global_load_sectors + next.global_load_sectors,
            global_store_requests: self.global_store_requests + next.global_store_requests,
            global_store_sectors: self.global_store_sectors + next.global_store_sectors,
            global_load_bytes_requested: self.global_load_bytes_requested
                + next.global_load_bytes_requested,
            global_store_bytes_requested: self.global_store_bytes_requested
                + next.global_store_bytes_requested,
            shared_requests: self.shared_requests + next.shared_requests,
            shared_bank_conflicts: self.shared_bank_conflicts + next.shared_bank_conflicts,
            branches: self.branches + next.branches,
            divergent_branches: self.divergent_branches + next.divergent_branches,
            hot_lines,
        }
    }
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
    /// Whether the harness should surround buffers with guard regions. The emulator says no:
    /// it checks every access against the exact allocation itself (memcheck), and a guard
    /// would count as valid memory.
    fn wants_guards(&self) -> bool {
        true
    }
    /// The timing protocol's primitives, where the backend can time (the CUDA backend).
    fn timer(&mut self) -> Option<&mut dyn Timer> {
        None
    }
    /// What the last launch that returned an error leaves to say: the emulator's
    /// [`HUNG`] diagnostic, where the threads of a kernel that ran past its deadline were.
    fn failed_launch_report(&mut self) -> LaunchReport {
        LaunchReport::default()
    }
}

/// The `tool` of the diagnostic that says where a kernel stopped at its deadline was running
/// (`Backend::failed_launch_report`): the timeout's location, not a sanitizer's finding.
pub const HUNG: &str = "hung";

/// Which loaded module a timed-section launch uses.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum Slot {
    /// The student's module (`Backend::load_module`).
    Student,
    /// The rubric's reference kernels.
    Reference,
    /// cugrade's own kernels (input generation, comparison): src/measure/harness.cu.
    Harness,
}

/// Facts about the device that the timing protocol and the roofline need.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct DeviceFacts {
    pub name: String,
    pub sms: u32,
    pub l2_bytes: usize,
    /// Peak DRAM bandwidth from the memory clock and bus width, GB/s.
    pub peak_gbs: f64,
    /// Peak FP32 throughput (FMA = 2 flops) at the maximum SM clock, GFLOP/s.
    pub peak_fp32_gflops: f64,
    pub compute_capability: (i32, i32),
    /// `cuDeviceGetPCIBusId`, the key of the per-GPU timing lock and of NVML.
    pub pci_bus_id: String,
}

/// The timing protocol's device primitives (see `measure::session`). Work is queued in order on
/// one stream; `download` and `wait` wait for it, bounded by a deadline.
pub trait Timer {
    /// Load a module into a slot other than the student's, replacing what was there.
    fn load_slot(&mut self, slot: Slot, ptx: &str) -> Result<(), BackendError>;
    fn facts(&mut self) -> Result<DeviceFacts, BackendError>;
    /// Allocate device memory that lives until `Backend::free_all`.
    fn alloc(&mut self, bytes: usize) -> Result<u64, BackendError>;
    fn upload(&mut self, addr: u64, data: &[u8]) -> Result<(), BackendError>;
    /// Queue: set `len` bytes at `addr` to `byte`.
    fn fill(&mut self, addr: u64, byte: u8, len: usize) -> Result<(), BackendError>;
    /// Queue: copy `len` bytes from `src` to `dst`.
    fn copy(&mut self, dst: u64, src: u64, len: usize) -> Result<(), BackendError>;
    /// Queue a kernel of a slot.
    fn enqueue(
        &mut self,
        slot: Slot,
        kernel: &str,
        dims: LaunchDims,
        params: &[ParamValue],
    ) -> Result<(), BackendError>;
    /// Queue cuBLAS SGEMM, row-major `C[MxN] = A[MxK] B[KxN]`.
    fn enqueue_sgemm(
        &mut self,
        m: usize,
        n: usize,
        k: usize,
        abc: [u64; 3],
    ) -> Result<(), BackendError>;
    /// Queue an L2 flush (writes a scratch buffer larger than L2).
    fn flush_l2(&mut self) -> Result<(), BackendError>;
    /// Queue a timestamp; returns its handle (valid until `clear_marks`).
    fn mark(&mut self) -> Result<usize, BackendError>;
    /// Milliseconds between two completed marks.
    fn elapsed_ms(&mut self, from: usize, to: usize) -> Result<f64, BackendError>;
    fn clear_marks(&mut self);
    /// Wait for everything queued, giving up at `deadline` (`BackendError::Timeout`).
    fn wait(&mut self, deadline: std::time::Instant) -> Result<(), BackendError>;
    /// Wait, then read `len` bytes at `addr`.
    fn download(
        &mut self,
        addr: u64,
        len: usize,
        deadline: std::time::Instant,
    ) -> Result<Vec<u8>, BackendError>;
    /// Device address and size of a `__device__`/`__constant__` global of a slot's module.
    fn global(&mut self, slot: Slot, name: &str) -> Result<(u64, usize), BackendError>;
    /// Queue: put every `__device__` global of the student's module back to its value at load
    /// time, so no launch can keep state for a later one.
    fn restore_globals(&mut self) -> Result<(), BackendError>;
}

/// The module-scope `.global` variables of a PTX module, and the module with every one of
/// internal linkage made `.visible` (so that the driver can find it by name: the timing
/// protocol resets them between launches). `.extern` declarations hold no storage and are left
/// out.
pub fn ptx_globals(ptx: &str) -> (String, Vec<String>) {
    let mut out = String::with_capacity(ptx.len() + 64);
    let mut names = Vec::new();
    let mut depth = 0i32;
    for line in ptx.split_inclusive('\n') {
        let code = line.split("//").next().unwrap_or("");
        let mut rewritten = None;
        if depth == 0 {
            let toks: Vec<&str> = code.split_whitespace().collect();
            let linkage = toks
                .first()
                .filter(|t| matches!(**t, ".visible" | ".weak" | ".common" | ".extern"));
            let at = usize::from(linkage.is_some());
            if toks.get(at) == Some(&".global") && linkage != Some(&".extern") {
                let name = toks[at + 1..]
                    .iter()
                    .find(|t| !t.starts_with('.') && !t.chars().all(|c| c.is_ascii_digit()))
                    .map(|t| {
                        t.split(['[', ';', '=', ','])
                            .next()
                            .unwrap_or_default()
                            .to_string()
                    });
                if let Some(n) = name.filter(|n| !n.is_empty()) {
                    names.push(n);
                    if linkage.is_none() {
                        let indent = line.len() - line.trim_start().len();
                        rewritten =
                            Some(format!("{}.visible {}", &line[..indent], &line[indent..]));
                    }
                }
            }
        }
        depth += code.matches('{').count() as i32 - code.matches('}').count() as i32;
        out.push_str(rewritten.as_deref().unwrap_or(line));
    }
    (out, names)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn globals_are_found_and_made_visible() {
        let ptx = "\
.version 8.0
.target sm_90
.address_size 64
.global .align 4 .u32 _ZL7counter;
.visible .global .align 4 .b8 table[64] = {1, 2, 3};
.extern .global .align 4 .u32 elsewhere;
.common .global .align 8 .u64 _ZN08NumbaEnv;
.const .align 4 .f32 scale;
.visible .entry k(.param .u64 p)
{
\tld.global.u32 %r1, [_ZL7counter];
\t.global .u32 not_module_scope;
}
";
        let (text, names) = ptx_globals(ptx);
        assert_eq!(names, vec!["_ZL7counter", "table", "_ZN08NumbaEnv"]);
        assert!(text.contains(".visible .global .align 4 .u32 _ZL7counter;"));
        assert!(text.contains("\n.visible .global .align 4 .b8 table[64]"));
        assert!(text.contains("\n.extern .global"));
        assert!(text.contains("\tld.global.u32 %r1, [_ZL7counter];"));
        assert_eq!(text.lines().count(), ptx.lines().count());
    }
}
