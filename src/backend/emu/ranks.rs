//! N emulated devices with peer memory (`--ranks N` on the emulator): the `RankSet` the
//! multi-GPU lab grades on without GPUs.
//!
//! Each rank is an `EmuBackend` of its own: its own copy of the module's `__device__`
//! variables and `__constant__` bank, and its own allocations, in an address window of its
//! own (rank r allocates from `ALLOC_BASE + r * RANK_WINDOW`). Every rank's view of global
//! memory holds every rank's allocations (the regions' words are shared), so a pointer to any
//! rank's buffer is valid in every rank's kernel, and memcheck still catches an access outside
//! every allocation, naming the rank whose allocation it is nearest to.
//!
//! `launch_all` runs every rank's grid at once from one thread (`sched`), deterministically,
//! with the cross-device race check (`xrace`). There is no speed estimate for rank sets
//! (`timer()` is `None`). docs/emulator.md ("Rank sets") describes the model and its limits.

use super::decode::{ALLOC_BASE, Program};
use super::exec::{DEADLINE_FAULT, LaunchCtx};
use super::mem::Region;
use super::merge::{emit_printf, hot_lines};
use super::xrace::XRace;
use super::{EmuBackend, MAX_DEVICE_BYTES, decode_ptx, sched};
use crate::backend::ranks::RankSet;
use crate::backend::{
    Backend, BackendError, BackendKind, KernelInfo, LaunchDims, LaunchReport, ParamValue,
};
use std::cell::RefCell;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

pub use super::xrace::MAX_RANKS;
/// Each rank's address window for allocations (64 GiB, far more than `MAX_DEVICE_BYTES`).
pub const RANK_WINDOW: u64 = 1 << 36;

pub struct EmuRanks {
    devs: Vec<EmuBackend>,
    /// Per rank, where its next allocation starts.
    next: Vec<u64>,
    /// Bytes allocated on all ranks together (bounded by `MAX_DEVICE_BYTES`: the emulator's
    /// device memory is this process's memory).
    allocated: u64,
    /// Where device printf goes; `None` means this process's stdout.
    printf_sink: Option<Vec<u8>>,
    /// What the last failed launch left to say, per rank.
    failed: Vec<LaunchReport>,
}

impl EmuRanks {
    /// `n` emulated devices (1 to `MAX_RANKS`).
    pub fn new(n: usize) -> Result<EmuRanks, BackendError> {
        if !(1..=MAX_RANKS).contains(&n) {
            return Err(BackendError::Other(format!(
                "the emulator runs 1 to {MAX_RANKS} ranks; {n} asked for"
            )));
        }
        Ok(EmuRanks {
            devs: (0..n).map(|_| EmuBackend::new()).collect(),
            next: (0..n).map(window).collect(),
            allocated: 0,
            printf_sink: None,
            failed: Vec::new(),
        })
    }

    /// Keep device printf output in memory instead of writing it to stdout (tests).
    pub fn capture_printf(&mut self) {
        self.printf_sink = Some(Vec::new());
    }

    /// Take what device printf wrote since the last call (with `capture_printf`).
    pub fn take_printf(&mut self) -> Vec<u8> {
        self.printf_sink
            .as_mut()
            .map(std::mem::take)
            .unwrap_or_default()
    }

    fn dev(&mut self, rank: usize) -> Result<&mut EmuBackend, BackendError> {
        let n = self.devs.len();
        self.devs
            .get_mut(rank)
            .ok_or_else(|| BackendError::Other(format!("rank {rank} of a set of {n}")))
    }

    /// Each rank's launch context, checked as `EmuBackend::launch` checks one.
    fn prepare_all(
        &self,
        kernel: &str,
        dims: LaunchDims,
        params: &[Vec<ParamValue>],
    ) -> Result<Vec<Prepared>, BackendError> {
        if params.len() != self.devs.len() {
            return Err(BackendError::Launch(format!(
                "{} ranks, {} parameter lists",
                self.devs.len(),
                params.len()
            )));
        }
        self.devs
            .iter()
            .zip(params)
            .map(|(d, p)| d.prepare(kernel, dims, p))
            .collect()
    }
}

/// One rank's launch as `EmuBackend::prepare` checks it: the module, the kernel's index and
/// the packed parameters.
type Prepared = (Arc<Program>, usize, Vec<u8>);

/// Where rank `r`'s allocations start.
fn window(r: usize) -> u64 {
    ALLOC_BASE + r as u64 * RANK_WINDOW
}

impl RankSet for EmuRanks {
    fn kind(&self) -> BackendKind {
        BackendKind::Emu
    }

    fn ranks(&self) -> usize {
        self.devs.len()
    }

    fn device_name(&self) -> String {
        format!(
            "{} emulated devices (PTX emulator, peer memory)",
            self.devs.len()
        )
    }

    fn load_module(&mut self, ptx: &str) -> Result<(), BackendError> {
        let prog = Arc::new(decode_ptx(ptx)?);
        for d in &mut self.devs {
            d.install(prog.clone())?;
        }
        Ok(())
    }

    fn kernel_info(&mut self, name: &str) -> Result<KernelInfo, BackendError> {
        self.dev(0)?.kernel_info(name)
    }

    fn alloc(&mut self, rank: usize, bytes: usize) -> Result<u64, BackendError> {
        self.dev(rank)?;
        let bytes = bytes as u64;
        if self.allocated.saturating_add(bytes) > MAX_DEVICE_BYTES {
            return Err(BackendError::OutOfMemory(format!(
                "the emulator allows {} GiB of device memory for all ranks together; {bytes} more bytes requested",
                MAX_DEVICE_BYTES >> 30
            )));
        }
        let base = self.next[rank];
        // 256-byte alignment like cudaMalloc, plus a gap so small overruns land nowhere.
        let next = (base + bytes).next_multiple_of(256) + 256;
        if next > window(rank) + RANK_WINDOW {
            return Err(BackendError::OutOfMemory(format!(
                "rank {rank}'s address window is full"
            )));
        }
        self.next[rank] = next;
        self.allocated += bytes;
        let mut region = Region::new(base, bytes, None);
        region.owner = Some(rank as u8);
        let region = Arc::new(region);
        for d in &mut self.devs {
            let regions = &mut d.gmem.regions;
            let at = regions.partition_point(|r| r.base < base);
            regions.insert(at, region.clone());
        }
        Ok(base)
    }

    fn write(&mut self, rank: usize, addr: u64, data: &[u8]) -> Result<(), BackendError> {
        self.dev(rank)?.write(addr, data)
    }

    fn read(&mut self, rank: usize, addr: u64, len: usize) -> Result<Vec<u8>, BackendError> {
        self.dev(rank)?.read(addr, len)
    }

    fn free_all(&mut self) -> Result<(), BackendError> {
        for d in &mut self.devs {
            d.gmem.regions.retain(|r| r.name.is_some());
        }
        self.next = (0..self.devs.len()).map(window).collect();
        self.allocated = 0;
        Ok(())
    }

    fn launch_all(
        &mut self,
        kernel: &str,
        dims: LaunchDims,
        params: &[Vec<ParamValue>],
        deadline: Instant,
    ) -> Result<Vec<LaunchReport>, BackendError> {
        let started = Instant::now();
        self.failed.clear();
        let prepared = self.prepare_all(kernel, dims, params)?;
        let abort = AtomicBool::new(false);
        let ctxs: Vec<LaunchCtx> = self
            .devs
            .iter()
            .zip(&prepared)
            .map(|(d, (prog, ki, pbuf))| LaunchCtx {
                prog,
                kernel: &prog.kernels[*ki],
                dims,
                params: pbuf,
                gmem: &d.gmem,
                cbank: &d.cbank,
                deadline,
                abort: &abort,
                cost: None,
                clocks: super::specials::Clocks::at_launch(),
            })
            .collect();
        let xrace = RefCell::new(XRace::new(ctxs.len()));
        let out = sched::run_ranks(&ctxs, &xrace, deadline);
        let mut printf = Vec::new();
        for (ctx, m) in ctxs.iter().zip(&out.merges) {
            ctx.clocks
                .finish(m.metrics.warp_instructions, dims.blocks());
            printf.extend_from_slice(&m.printf);
        }
        emit_printf(&mut self.printf_sink, printf);
        if let Some((rank, f)) = out.fault {
            if out.timed_out {
                self.failed = out
                    .hung
                    .into_iter()
                    .map(|h| LaunchReport {
                        diagnostics: h.into_iter().collect(),
                        ..Default::default()
                    })
                    .collect();
                return Err(BackendError::Fault(DEADLINE_FAULT.into()));
            }
            return Err(BackendError::Fault(format!("rank {rank}: {f}")));
        }
        let seconds = started.elapsed().as_secs_f64();
        Ok(out
            .merges
            .into_iter()
            .zip(&prepared)
            .map(|(m, (prog, _, _))| {
                let mut metrics = m.metrics;
                metrics.hot_lines = hot_lines(prog, &m.hot);
                LaunchReport {
                    diagnostics: m.diags,
                    metrics: Some(metrics),
                    seconds,
                }
            })
            .collect())
    }

    /// memcheck knows every allocation's exact bounds; guard regions would count as valid.
    fn wants_guards(&self) -> bool {
        false
    }

    fn failed_launch_report(&mut self) -> Vec<LaunchReport> {
        std::mem::take(&mut self.failed)
    }
}

#[cfg(test)]
#[path = "ranks_tests.rs"]
mod tests;
