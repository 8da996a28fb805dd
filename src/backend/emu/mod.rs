//! The PTX emulator backend (`--backend emu`): grades correctness on machines without a GPU.
//!
//! `parse` reads PTX text, `decode` lowers it into a compact program, `exec` runs thread
//! blocks warp by warp with memory checks and metrics, `mem` holds device memory. Blocks run
//! in parallel unless the kernel uses global atomics or printf, whose results would then
//! depend on scheduling; those run in block order so every launch is reproducible.
//! docs/emulator.md describes what is supported and what the diagnostics mean.

pub mod cost;
mod decode;
mod exec;
mod float;
mod l1;
mod lex;
mod mem;
mod merge;
mod parse;
pub mod profiled;
pub mod ranks;
mod sched;
mod specials;
mod vectorize;
mod xrace;

use super::{
    Backend, BackendError, BackendKind, Diagnostic, KernelInfo, LaunchDims, LaunchReport,
    ParamValue,
};
use decode::{ALLOC_BASE, CONST_WIN, MODULE_GLOBAL_BASE, Program};
use exec::{BlockOut, BlockRunner, DEADLINE_FAULT, LaunchCtx, PRINTF_CAP};
use mem::{GlobalMem, Region};
use merge::{Merge, emit_printf, hot_lines};
use parse::Space;
use rayon::prelude::*;
use std::sync::Arc;
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// Most device memory one worker may allocate.
const MAX_DEVICE_BYTES: u64 = 8 << 30;
/// sm_90's opt-in shared memory per block.
const MAX_SHARED_BYTES: u32 = 227 * 1024;

pub struct EmuBackend {
    prog: Option<Arc<Program>>,
    gmem: GlobalMem,
    cbank: Vec<u8>,
    next_alloc: u64,
    allocated: u64,
    /// Run independent blocks on the rayon pool (off: one block at a time, for baselines).
    pub parallel: bool,
    /// Where device printf goes; `None` means this process's stdout.
    printf_sink: Option<Vec<u8>>,
    /// Where the last launch stopped at its deadline was running (`Backend::failed_launch_report`).
    last_hung: Option<Diagnostic>,
}

impl Default for EmuBackend {
    fn default() -> Self {
        Self::new()
    }
}

impl EmuBackend {
    /// An allocation of `bytes` whose contents `fill` draws on first touch (the speed
    /// estimate's full-size inputs: a sample of blocks reads a few of their pages).
    pub fn alloc_drawn(
        &mut self,
        bytes: usize,
        fill: crate::inputs::Fill,
    ) -> Result<u64, BackendError> {
        let base = self.alloc(bytes)?;
        if let Some(r) = self.gmem.regions.last_mut() {
            *r = Arc::new(Region::drawn(base, bytes as u64, fill));
        }
        Ok(base)
    }

    pub fn new() -> Self {
        EmuBackend {
            prog: None,
            gmem: GlobalMem::default(),
            cbank: Vec::new(),
            next_alloc: ALLOC_BASE,
            allocated: 0,
            parallel: true,
            printf_sink: None,
            last_hung: None,
        }
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

    /// Names of the loaded module's kernels.
    pub fn kernels(&self) -> Vec<String> {
        self.prog
            .as_ref()
            .map(|p| p.kernels.iter().map(|k| k.name.clone()).collect())
            .unwrap_or_default()
    }

    /// Device address of a module `.global` variable (for reading `__device__` results).
    pub fn symbol_address(&self, name: &str) -> Option<u64> {
        let g = self
            .prog
            .as_ref()?
            .globals
            .iter()
            .find(|g| g.name == name)?;
        (g.space == Space::Global).then_some(g.addr)
    }

    fn prog(&self) -> Result<&Arc<Program>, BackendError> {
        self.prog
            .as_ref()
            .ok_or_else(|| BackendError::Load("no module loaded".into()))
    }

    fn region_for(&self, addr: u64, len: usize) -> Result<(usize, u64), BackendError> {
        let mut h = 0;
        self.gmem.locate(addr, len as u64, &mut h).ok_or_else(|| {
            BackendError::Other(format!(
                "device range {addr:#x}..+{len} is not inside one allocation (it {})",
                self.gmem.describe(addr, len as u64)
            ))
        })
    }
}

/// A block's index in x, y, z order (what `specials` places blocks on SMs by).
fn specials_linear(ctaid: [u32; 3], grid: [u32; 3]) -> u64 {
    ctaid[0] as u64 + grid[0] as u64 * (ctaid[1] as u64 + grid[1] as u64 * ctaid[2] as u64)
}

impl EmuBackend {
    /// Check a launch against the kernel and the device's limits; returns the module, the
    /// kernel's index in it and the packed parameter bytes.
    fn prepare(
        &self,
        kernel: &str,
        dims: LaunchDims,
        params: &[ParamValue],
    ) -> Result<(Arc<Program>, usize, Vec<u8>), BackendError> {
        let prog = self.prog()?.clone();
        let ki = prog
            .kernels
            .iter()
            .position(|k| k.name == kernel)
            .ok_or_else(|| BackendError::NoKernel(kernel.into()))?;
        let k = &prog.kernels[ki];
        let tpb = dims.threads_per_block();
        if dims.block.contains(&0) || dims.grid.contains(&0) {
            return Err(BackendError::Launch(
                "grid and block dimensions must be at least 1".into(),
            ));
        }
        if tpb > 1024 || dims.block[2] > 64 {
            return Err(BackendError::Launch(format!(
                "block {:?} has {tpb} threads; at most 1024 (and z <= 64) are allowed",
                dims.block
            )));
        }
        if dims.grid[1] > 65535 || dims.grid[2] > 65535 {
            return Err(BackendError::Launch(
                "grid y and z must be at most 65535".into(),
            ));
        }
        // Dynamic shared memory starts after the static variables (aligned), as on a GPU.
        let shared_total = exec::shared_block_bytes(k, dims.shared_bytes);
        if shared_total > MAX_SHARED_BYTES as u64 {
            return Err(BackendError::Launch(format!(
                "{shared_total} bytes of shared memory per block requested ({} static + {} dynamic, the dynamic array starting at offset {}); at most {MAX_SHARED_BYTES} (227 KiB)",
                k.static_shared, dims.shared_bytes, k.dyn_shared_base
            )));
        }
        // Local memory is allocated per thread of a running block.
        if k.local_bytes as u64 * tpb > 256 << 20 {
            return Err(BackendError::Launch(format!(
                "{} bytes of local memory per thread × {tpb} threads is more than the emulator allows (256 MiB per block)",
                k.local_bytes
            )));
        }
        if params.len() != k.param_sizes.len() {
            return Err(BackendError::Launch(format!(
                "kernel `{kernel}` takes {} parameters; {} given",
                k.param_sizes.len(),
                params.len()
            )));
        }
        let mut pbuf = vec![0u8; k.param_bytes];
        for (i, (p, (&off, &size))) in params
            .iter()
            .zip(k.param_offsets.iter().zip(&k.param_sizes))
            .enumerate()
        {
            let b = p.to_bytes();
            if b.len() != size {
                return Err(BackendError::Launch(format!(
                    "parameter {i} of `{kernel}` is {size} bytes; a {}-byte value was given",
                    b.len()
                )));
            }
            pbuf[off as usize..off as usize + size].copy_from_slice(&b);
        }
        Ok((prog, ki, pbuf))
    }
}

/// Parse and decode a PTX module.
fn decode_ptx(ptx: &str) -> Result<Program, BackendError> {
    let module = parse::parse_module(ptx).map_err(BackendError::Load)?;
    decode::decode_module(&module).map_err(BackendError::Load)
}

impl EmuBackend {
    /// Make `prog` the loaded module: its variables replace the previous module's (this
    /// device's own copy of them); allocations stay. A rank set installs one program on every
    /// rank.
    fn install(&mut self, prog: Arc<Program>) -> Result<(), BackendError> {
        // Replace the previous module's variables; allocations stay.
        self.gmem.regions.retain(|r| r.name.is_none());
        self.cbank = vec![0u8; prog.const_bytes as usize];
        let mut new_regions = Vec::new();
        for g in &prog.globals {
            let mut bytes = g.init.clone();
            for (off, sym) in &g.sym_init {
                let target = prog
                    .globals
                    .iter()
                    .find(|x| &x.name == sym)
                    .map(|x| match x.space {
                        Space::Const => CONST_WIN + x.addr,
                        _ => x.addr,
                    })
                    .ok_or_else(|| {
                        BackendError::Load(format!(
                            "initializer of `{}` names unknown symbol `{sym}`",
                            g.name
                        ))
                    })?;
                if let Some(s) = bytes.get_mut(*off..*off + 8) {
                    s.copy_from_slice(&target.to_le_bytes());
                }
            }
            bytes.truncate(g.size as usize);
            match g.space {
                Space::Const => {
                    let o = g.addr as usize;
                    self.cbank[o..o + bytes.len()].copy_from_slice(&bytes);
                }
                _ => {
                    let r = Region::new(g.addr, g.size, Some(g.name.clone()));
                    r.write_bytes(0, &bytes);
                    new_regions.push(Arc::new(r));
                }
            }
        }
        debug_assert!(
            new_regions
                .iter()
                .all(|r| r.base >= MODULE_GLOBAL_BASE && r.base < ALLOC_BASE)
        );
        let mut regions = new_regions;
        regions.append(&mut self.gmem.regions);
        regions.sort_by_key(|r| r.base);
        self.gmem.regions = regions;
        self.prog = Some(prog);
        Ok(())
    }
}

fn ctaid_of(b: u64, grid: [u32; 3]) -> [u32; 3] {
    let gx = grid[0] as u64;
    let gy = grid[1] as u64;
    [
        (b % gx) as u32,
        ((b / gx) % gy) as u32,
        (b / (gx * gy)) as u32,
    ]
}

impl Backend for EmuBackend {
    fn kind(&self) -> BackendKind {
        BackendKind::Emu
    }

    /// memcheck knows every allocation's exact bounds; guard regions would count as valid.
    fn wants_guards(&self) -> bool {
        false
    }

    fn failed_launch_report(&mut self) -> LaunchReport {
        LaunchReport {
            diagnostics: self.last_hung.take().into_iter().collect(),
            ..Default::default()
        }
    }

    fn device_name(&self) -> String {
        "PTX emulator (cugrade, sm_90 subset)".into()
    }

    fn load_module(&mut self, ptx: &str) -> Result<(), BackendError> {
        let prog = Arc::new(decode_ptx(ptx)?);
        self.install(prog)
    }

    fn kernel_info(&mut self, name: &str) -> Result<KernelInfo, BackendError> {
        let prog = self.prog()?;
        let k = prog
            .kernels
            .iter()
            .find(|k| k.name == name)
            .ok_or_else(|| BackendError::NoKernel(name.into()))?;
        Ok(KernelInfo {
            param_count: k.param_sizes.len(),
            param_sizes: k.param_sizes.clone(),
            max_threads_per_block: 1024,
            static_shared_bytes: k.static_shared,
            // The emulator sees PTX's virtual registers only, not what ptxas allocates (130
            // virtual registers may be 32 real ones): 0 says "unknown", and the resources
            // check takes ptxas's count (`compile::resources`, `compile::jitlink`).
            registers: 0,
            local_bytes: 0,
        })
    }

    fn alloc(&mut self, bytes: usize) -> Result<u64, BackendError> {
        let bytes = bytes as u64;
        if self.allocated + bytes > MAX_DEVICE_BYTES {
            return Err(BackendError::OutOfMemory(format!(
                "the emulator allows {} GiB of device memory; {bytes} more bytes requested",
                MAX_DEVICE_BYTES >> 30
            )));
        }
        let base = self.next_alloc;
        // 256-byte alignment like cudaMalloc, plus a gap so small overruns land nowhere.
        self.next_alloc = (base + bytes).next_multiple_of(256) + 256;
        self.allocated += bytes;
        self.gmem
            .regions
            .push(Arc::new(Region::new(base, bytes, None)));
        Ok(base)
    }

    fn free_all(&mut self) -> Result<(), BackendError> {
        self.gmem.regions.retain(|r| r.name.is_some());
        self.next_alloc = ALLOC_BASE;
        self.allocated = 0;
        Ok(())
    }

    fn write(&mut self, addr: u64, data: &[u8]) -> Result<(), BackendError> {
        if data.is_empty() {
            return Ok(());
        }
        let (r, off) = self.region_for(addr, data.len())?;
        self.gmem.regions[r].write_bytes(off, data);
        Ok(())
    }

    fn read(&mut self, addr: u64, len: usize) -> Result<Vec<u8>, BackendError> {
        let mut out = vec![0u8; len];
        if len == 0 {
            return Ok(out);
        }
        let (r, off) = self.region_for(addr, len)?;
        self.gmem.regions[r].read_bytes(off, &mut out);
        Ok(out)
    }

    fn set_global(&mut self, name: &str, data: &[u8]) -> Result<(), BackendError> {
        let prog = self.prog()?.clone();
        let g = prog
            .globals
            .iter()
            .find(|g| g.name == name)
            .ok_or_else(|| {
                BackendError::Other(format!(
                    "no __device__ or __constant__ variable `{name}` in the module"
                ))
            })?;
        if data.len() as u64 > g.size {
            return Err(BackendError::Other(format!(
                "`{name}` holds {} bytes; {} given",
                g.size,
                data.len()
            )));
        }
        match g.space {
            Space::Const => {
                let o = g.addr as usize;
                self.cbank[o..o + data.len()].copy_from_slice(data);
                Ok(())
            }
            _ => self.write(g.addr, data),
        }
    }

    fn launch(
        &mut self,
        kernel: &str,
        dims: LaunchDims,
        params: &[ParamValue],
        deadline: Instant,
    ) -> Result<LaunchReport, BackendError> {
        let started = Instant::now();
        let (prog, ki, pbuf) = self.prepare(kernel, dims, params)?;
        let k = &prog.kernels[ki];
        let abort = AtomicBool::new(false);
        let ctx = LaunchCtx {
            prog: &prog,
            kernel: k,
            dims,
            params: &pbuf,
            gmem: &self.gmem,
            cbank: &self.cbank,
            deadline,
            abort: &abort,
            cost: None,
            clocks: specials::Clocks::at_launch(),
        };
        let nblocks = dims.blocks();
        self.last_hung = None;
        let mut m = Merge::default();
        if self.parallel && !k.uses_global_atomics && nblocks > 1 {
            // Chunks bound the per-block results held at once on huge grids.
            const CHUNK: u64 = 4096;
            let mut start = 0;
            while start < nblocks {
                let end = (start + CHUNK).min(nblocks);
                let outs: Vec<BlockOut> = (start..end)
                    .into_par_iter()
                    .map(|b| BlockRunner::new(&ctx, ctaid_of(b, dims.grid)).run(PRINTF_CAP))
                    .collect();
                let mut stop = false;
                for o in outs {
                    stop |= m.add(o);
                }
                if stop {
                    break;
                }
                start = end;
            }
        } else {
            let mut room = PRINTF_CAP;
            for b in 0..nblocks {
                let o = BlockRunner::new(&ctx, ctaid_of(b, dims.grid)).run(room);
                room = room.saturating_sub(o.printf.len());
                if m.add(o) {
                    break;
                }
            }
        }
        ctx.clocks.finish(m.metrics.warp_instructions, nblocks);
        emit_printf(&mut self.printf_sink, std::mem::take(&mut m.printf));
        if let Some(f) = m.fault {
            // With parallel blocks, others stop with "aborted" once one hits the deadline.
            if abort.load(std::sync::atomic::Ordering::Relaxed) && Instant::now() > deadline {
                self.last_hung = m.hung;
                return Err(BackendError::Fault(DEADLINE_FAULT.into()));
            }
            return Err(BackendError::Fault(f));
        }
        let mut metrics = m.metrics;
        metrics.hot_lines = hot_lines(&prog, &m.hot);
        Ok(LaunchReport {
            diagnostics: m.diags,
            metrics: Some(metrics),
            seconds: started.elapsed().as_secs_f64(),
        })
    }
}
