//! A rank set: N devices that run one kernel together, each rank's kernel able to address
//! every rank's memory (peer memory). The multi-GPU lab (`rubrics/allreduce.yaml`) runs on
//! one: students write device code only, so cugrade allocates each rank's buffers on its own
//! device, hands each rank's kernel the addresses of its peers' buffers and flags, launches the
//! kernel on every rank at once and checks every rank's result.
//!
//! Two implementations: `emu::ranks` (N emulated devices in one process, their blocks
//! interleaved, with a cross-device race check) and `cuda::ranks` (N GPUs with peer access
//! enabled between them only, one stream each). Like `Backend`, a rank set lives inside a
//! worker process.
//!
//! Addresses are plain `u64` device addresses, unique across the set: an address names one
//! rank's allocation whichever rank's kernel uses it.

use super::ParamValue;
use super::{BackendError, BackendKind, DeviceFacts, KernelInfo, LaunchDims, LaunchReport};
use std::time::Instant;

/// N devices with peer memory (see the module's documentation).
pub trait RankSet {
    fn kind(&self) -> BackendKind;
    /// How many ranks (devices) the set has.
    fn ranks(&self) -> usize;
    /// Human description (`2 x NVIDIA H100 80GB HBM3 (peer access)`, `4 emulated devices`).
    fn device_name(&self) -> String;
    /// Load one PTX module on every rank (each rank its own copy of the module's globals).
    fn load_module(&mut self, ptx: &str) -> Result<(), BackendError>;
    /// Facts about a kernel of the loaded module (the same on every rank).
    fn kernel_info(&mut self, name: &str) -> Result<KernelInfo, BackendError>;
    /// Allocate `bytes` on `rank`'s device. Every rank's kernels can address it.
    fn alloc(&mut self, rank: usize, bytes: usize) -> Result<u64, BackendError>;
    fn write(&mut self, rank: usize, addr: u64, data: &[u8]) -> Result<(), BackendError>;
    fn read(&mut self, rank: usize, addr: u64, len: usize) -> Result<Vec<u8>, BackendError>;
    /// Whether the worker should surround buffers with guard regions (GPUs); the emulator
    /// checks every access against the exact allocation itself and says no.
    fn wants_guards(&self) -> bool {
        true
    }
    /// Free every allocation on every rank (between trials).
    fn free_all(&mut self) -> Result<(), BackendError>;
    /// Launch `kernel` on every rank at once, rank `r` with `params[r]`, and wait for all of
    /// them. A kernel waiting for a peer that never signals runs into `deadline`
    /// (`BackendError::Timeout` or `Fault`, on every rank). The report holds one
    /// `LaunchReport` per rank, in rank order (its diagnostics: what was found on that rank).
    fn launch_all(
        &mut self,
        kernel: &str,
        dims: LaunchDims,
        params: &[Vec<ParamValue>],
        deadline: Instant,
    ) -> Result<Vec<LaunchReport>, BackendError>;
    /// What the last launch that returned an error leaves to say, per rank (where each
    /// rank's threads were when the deadline passed).
    fn failed_launch_report(&mut self) -> Vec<LaunchReport> {
        Vec::new()
    }
    /// The timed section's primitives, where the set can time (GPUs).
    fn timer(&mut self) -> Option<&mut dyn RankTimer> {
        None
    }
}

/// A byte range on one rank: `(rank, address, bytes)`.
pub type RankRange = (usize, u64, usize);

/// Timing a rank set: every rank's launch timed by events on its own stream, a repetition's
/// time the slowest rank's (as NCCL's tests time a collective).
pub trait RankTimer {
    /// Each device's facts, in rank order.
    fn facts(&mut self) -> Result<Vec<DeviceFacts>, BackendError>;
    /// `reps` timed launches of `kernel` on every rank. Before each (outside the timed
    /// interval) every range of `zero` is set to 0 and every range of `restore` gets back the
    /// bytes it held when the call began (so each repetition starts from the same inputs and
    /// flags), and all ranks are synchronised. Returns each repetition's seconds.
    #[allow(clippy::too_many_arguments)]
    fn time_all(
        &mut self,
        kernel: &str,
        dims: LaunchDims,
        params: &[Vec<ParamValue>],
        zero: &[RankRange],
        restore: &[RankRange],
        reps: usize,
        deadline: Instant,
    ) -> Result<Vec<f64>, BackendError>;
    /// NCCL's all-reduce (float32 sum) of `count` elements from `send[rank]` into
    /// `recv[rank]` on every rank, `reps` times, timed as `time_all` times a kernel. `Err`
    /// says plainly when NCCL cannot be loaded. NVLink multicast stays off
    /// (`NCCL_NVLS_ENABLE=0`).
    fn nccl_allreduce(
        &mut self,
        send: &[u64],
        recv: &[u64],
        count: usize,
        reps: usize,
        deadline: Instant,
    ) -> Result<Vec<f64>, BackendError>;
    /// Which NCCL `nccl_allreduce` used (version and file), once it has run.
    fn nccl_version(&self) -> Option<String> {
        None
    }
}

/// Bus bandwidth as NCCL's tests define it for an all-reduce: 2 (n - 1) / n x bytes / time,
/// in GB/s (10^9 bytes a second).
pub fn allreduce_bus_gbs(ranks: usize, bytes: usize, seconds: f64) -> f64 {
    if ranks == 0 || seconds <= 0.0 {
        return 0.0;
    }
    let n = ranks as f64;
    2.0 * (n - 1.0) / n * bytes as f64 / seconds / 1e9
}

#[cfg(test)]
mod tests {
    #[test]
    fn bus_bandwidth_is_nccl_tests_formula() {
        // nccl-tests: 2 GPUs, 512 MiB in 2.0 ms -> algbw 268.4 GB/s, busbw = algbw x 2(n-1)/n.
        let b = super::allreduce_bus_gbs(2, 512 << 20, 2.0e-3);
        assert!((b - 268.435456).abs() < 1e-6, "{b}");
        let b8 = super::allreduce_bus_gbs(8, 1 << 30, 1.0);
        assert!((b8 - 1.073741824 * 1.75).abs() < 1e-9, "{b8}");
        assert_eq!(super::allreduce_bus_gbs(1, 100, 1.0), 0.0);
    }
}
