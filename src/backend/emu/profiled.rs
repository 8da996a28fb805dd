//! Profiled launches for the speed estimate: run chosen blocks of a grid (a sample, or all of
//! them) with the cost counters of `cost` on, and summarise what they touched: per
//! allocation, the sectors each block loaded and stored and the union over the blocks run;
//! per global-atomic address, how many blocks hit it and how often.

use super::cost::{self, BlockProfile, CostConfig};
use super::exec::{BlockOut, BlockRunner, LaunchCtx};
use super::{EmuBackend, ctaid_of};
use crate::backend::{BackendError, LaunchDims, ParamValue};
use rayon::prelude::*;
use serde::{Deserialize, Serialize};
use std::collections::{HashMap, HashSet};
use std::sync::atomic::AtomicBool;
use std::time::Instant;

/// One allocation's traffic in a profiled launch, in 32-byte sectors.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct RegionUse {
    pub bytes: u64,
    /// Per block run (in [`Profiled::blocks`] order): distinct sectors loaded, stored.
    pub loaded: Vec<u64>,
    pub stored: Vec<u64>,
    /// Distinct sectors over all the blocks run.
    pub loaded_union: u64,
    pub stored_union: u64,
}

/// A global-atomic address: blocks (of those run) that hit it, operations in all of them, and
/// the most in one block.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct HotAddress {
    pub addr: u64,
    pub blocks: u64,
    pub ops: u64,
    pub max_in_block: u64,
}

/// What a profiled launch found.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Profiled {
    /// Linear block index and counters of every block run.
    pub blocks: Vec<(u64, BlockProfile)>,
    pub regions: Vec<RegionUse>,
    /// The most contended global-atomic addresses (at most 16, most operations first).
    pub hot: Vec<HotAddress>,
    /// Whether the kernel has global atomics whose old value it uses (`atom`, not `red`):
    /// blocks that may hand out work or signal one another through them.
    pub communicating: bool,
    /// Whether blocks ran in parallel.
    pub parallel: bool,
}

impl EmuBackend {
    /// Run the blocks `blocks` (linear indices, x fastest) of a launch with cost counters.
    /// Blocks run in parallel unless the kernel uses global atomics (then in the order given).
    pub fn launch_profiled(
        &mut self,
        kernel: &str,
        dims: LaunchDims,
        params: &[ParamValue],
        blocks: &[u64],
        cfg: &CostConfig,
        deadline: Instant,
    ) -> Result<Profiled, BackendError> {
        let (prog, ki, pbuf) = self.prepare(kernel, dims, params)?;
        let k = &prog.kernels[ki];
        if let Some(&b) = blocks.iter().find(|&&b| b >= dims.blocks()) {
            return Err(BackendError::Launch(format!(
                "block {b} is outside the grid of {} blocks",
                dims.blocks()
            )));
        }
        let prices = cost::prices(&prog, &cfg.latencies);
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
            cost: Some((&prices, cfg)),
            clocks: super::specials::Clocks::at_launch(),
        };
        let run = |b: u64| BlockRunner::new(&ctx, ctaid_of(b, dims.grid)).run(0);
        let parallel = self.parallel && !k.uses_global_atomics && blocks.len() > 1;
        let outs: Vec<BlockOut> = if parallel {
            blocks.par_iter().map(|&b| run(b)).collect()
        } else {
            let mut outs = Vec::with_capacity(blocks.len());
            for &b in blocks {
                let o = run(b);
                let stop = o.fault.is_some();
                outs.push(o);
                if stop {
                    break;
                }
            }
            outs
        };
        if let Some(f) = outs.iter().find_map(|o| o.fault.clone()) {
            return Err(BackendError::Fault(f));
        }
        let communicating = k.uses_global_atomics && atomics_read_back(&prog);
        let mut regions: Vec<(u64, u64)> =
            self.gmem.regions.iter().map(|r| (r.base, r.len)).collect();
        regions.sort_unstable();
        let find = |sector: u64| {
            let a = sector << 5;
            let i = regions.partition_point(|&(base, _)| base <= a);
            (i > 0 && a < regions[i - 1].0 + regions[i - 1].1.max(1)).then(|| i - 1)
        };
        let mut uses: Vec<RegionUse> = regions
            .iter()
            .map(|&(_, len)| RegionUse {
                bytes: len,
                ..RegionUse::default()
            })
            .collect();
        let mut unions: Vec<(HashSet<u64>, HashSet<u64>)> =
            vec![(HashSet::new(), HashSet::new()); regions.len()];
        let mut hot: HashMap<u64, HotAddress> = HashMap::new();
        let mut done = Vec::with_capacity(outs.len());
        for (&b, o) in blocks.iter().zip(outs) {
            let Some(c) = o.cost else { continue };
            let (profile, touched) = *c;
            let mut loaded = vec![0u64; regions.len()];
            let mut stored = vec![0u64; regions.len()];
            for &s in &touched.loaded {
                if let Some(r) = find(s) {
                    loaded[r] += 1;
                    unions[r].0.insert(s);
                }
            }
            for &s in &touched.stored {
                if let Some(r) = find(s) {
                    stored[r] += 1;
                    unions[r].1.insert(s);
                }
            }
            for (r, u) in uses.iter_mut().enumerate() {
                u.loaded.push(loaded[r]);
                u.stored.push(stored[r]);
            }
            for (addr, n) in touched.atomics {
                let h = hot.entry(addr).or_insert(HotAddress {
                    addr,
                    ..HotAddress::default()
                });
                h.blocks += 1;
                h.ops += n;
                h.max_in_block = h.max_in_block.max(n);
            }
            done.push((b, profile));
        }
        for (u, (l, s)) in uses.iter_mut().zip(&unions) {
            u.loaded_union = l.len() as u64;
            u.stored_union = s.len() as u64;
        }
        let mut hot: Vec<HotAddress> = hot.into_values().collect();
        sort_hot(&mut hot);
        Ok(Profiled {
            blocks: done,
            regions: uses,
            hot,
            communicating,
            parallel,
        })
    }

    /// Shared memory one block of `kernel` holds with `dynamic` bytes of dynamic shared
    /// memory, static variables included.
    pub fn block_shared_bytes(&self, kernel: &str, dynamic: u32) -> Option<u32> {
        let prog = self.prog.as_ref()?;
        let k = prog.kernels.iter().find(|k| k.name == kernel)?;
        Some(super::exec::shared_block_bytes(k, dynamic).min(u32::MAX as u64) as u32)
    }
}

/// Whether some atomic's old value is read by another instruction (a ticket, a work queue, a
/// flag: blocks that talk), rather than dropped (an accumulation).
fn atomics_read_back(prog: &super::decode::Program) -> bool {
    use super::decode::{NOREG, Op, Src};
    let mut read = HashSet::new();
    for i in &prog.insts {
        for s in [i.a, i.b, i.c, i.e] {
            if let Src::R(r) = s {
                read.insert(r);
            }
        }
        read.insert(i.guard);
        if matches!(i.op, Op::St | Op::Pack | Op::Atom(_)) {
            read.extend(i.vregs[..(i.vec as usize).min(4)].iter().copied());
        }
    }
    prog.insts
        .iter()
        .any(|i| matches!(i.op, Op::Atom(_)) && i.d != NOREG && read.contains(&i.d))
}

fn sort_hot(hot: &mut Vec<HotAddress>) {
    hot.sort_unstable_by(|a, b| b.ops.cmp(&a.ops).then(a.addr.cmp(&b.addr)));
    hot.truncate(16);
}

impl Profiled {
    /// Both launches' blocks as one. The unions of the two are not kept: the larger of the
    /// two stands for their union (a lower bound).
    pub fn merge(mut self, other: Profiled) -> Profiled {
        self.blocks.extend(other.blocks);
        for (a, b) in self.regions.iter_mut().zip(other.regions) {
            a.loaded.extend(b.loaded);
            a.stored.extend(b.stored);
            a.loaded_union = a.loaded_union.max(b.loaded_union);
            a.stored_union = a.stored_union.max(b.stored_union);
        }
        for h in other.hot {
            match self.hot.iter_mut().find(|x| x.addr == h.addr) {
                Some(x) => {
                    x.blocks += h.blocks;
                    x.ops += h.ops;
                    x.max_in_block = x.max_in_block.max(h.max_in_block);
                }
                None => self.hot.push(h),
            }
        }
        sort_hot(&mut self.hot);
        self.communicating |= other.communicating;
        self.parallel |= other.parallel;
        self
    }
}
