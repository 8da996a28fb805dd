//! Sampled emulation: which blocks of a grid to emulate, and how what they counted scales to
//! the whole grid. Runs in a worker (`Request::Estimate`), on the emulator, whatever backend
//! the worker has.
//!
//! Blocks fall into strata by whether they are the last in each grid dimension (edge blocks
//! hold the partial tiles of shapes that are not a multiple of the block). A pilot block from
//! the interior runs first; its instruction count sets how many more interior blocks fit in
//! the budget (deterministic: the same kernel and case sample the same blocks on any machine).
//! Interior samples are spread evenly over the interior; each edge stratum gets one. Each
//! sample stands for its stratum's blocks. A grid whose whole cost fits the budget runs whole.

use super::model::{BlockAverages, KernelProfile};
use crate::backend::emu::EmuBackend;
use crate::backend::emu::cost::CostConfig;
use crate::backend::emu::profiled::Profiled;
use crate::backend::{Arg, Backend, BufferSpec, LaunchDims, ParamValue};
use serde::{Deserialize, Serialize};
use std::collections::HashMap;
use std::time::{Duration, Instant};

/// One kernel to profile: the launch and its inputs (blobs: the module's PTX, then each
/// buffer's whole allocation, guards included, or nothing for an output whose first contents
/// do not matter: it starts zeroed), the GPU's latencies and L1, and the budget.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct EstimateSpec {
    pub kernel: String,
    pub dims: LaunchDims,
    pub args: Vec<Arg>,
    pub buffers: Vec<BufferSpec>,
    /// Per buffer, the generator of an input sent as one (its blob is empty): drawn by the
    /// emulator where the sampled blocks read it.
    #[serde(default)]
    pub fills: Vec<Option<crate::inputs::Fill>>,
    pub symbols: Vec<(String, usize)>,
    pub cost: CostConfig,
    /// Warp instructions to emulate at most (beyond the pilot and one block per edge stratum).
    pub budget: u64,
    /// Milliseconds the whole profile may take.
    pub deadline_ms: u64,
}

/// Warp instructions a profile may emulate by default: about 1.5 s of emulation per kernel on
/// one core of the development machine.
pub const BUDGET: u64 = 2_500_000;
/// Interior samples at most (before refinement).
const MAX_INTERIOR: u64 = 15;
/// Blocks that refinement may add, and its rounds.
const MAX_REFINED: usize = 32;
const REFINE_ROUNDS: usize = 14;

/// A stratum of the grid: for each dimension with more than one block, whether its blocks are
/// the last in that dimension; `n` blocks.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Stratum {
    pub last: [bool; 3],
    pub n: u64,
}

/// Blocks to emulate: `(stratum, j)` is the `j`-th block of a stratum (x fastest). `whole`:
/// every block of the grid, each standing for itself.
#[derive(Debug, Clone, PartialEq)]
pub struct Plan {
    pub grid: [u32; 3],
    pub strata: Vec<Stratum>,
    pub samples: Vec<(usize, u64)>,
    pub whole: bool,
}

/// A stratum: for each dimension with more than one block, whether its blocks are the last.
fn strata(grid: [u32; 3]) -> Vec<Stratum> {
    let dims: Vec<usize> = (0..3).filter(|&d| grid[d] > 1).collect();
    (0..1u32 << dims.len())
        .map(|mask| {
            let mut last = [false; 3];
            for (i, &d) in dims.iter().enumerate() {
                last[d] = mask >> i & 1 != 0;
            }
            Stratum {
                last,
                n: stratum_size(grid, last),
            }
        })
        .collect()
}

/// Blocks in a stratum, and its `j`-th block (x fastest) as a linear index.
fn stratum_size(grid: [u32; 3], last: [bool; 3]) -> u64 {
    (0..3)
        .map(|d| {
            if grid[d] <= 1 || last[d] {
                1
            } else {
                grid[d] as u64 - 1
            }
        })
        .product()
}

fn stratum_block(grid: [u32; 3], last: [bool; 3], j: u64) -> u64 {
    let mut rest = j;
    let mut coord = [0u64; 3];
    for d in 0..3 {
        let g = grid[d] as u64;
        if g <= 1 {
            continue;
        }
        if last[d] {
            coord[d] = g - 1;
        } else {
            coord[d] = rest % (g - 1);
            rest /= g - 1;
        }
    }
    coord[0] + grid[0] as u64 * (coord[1] + grid[1] as u64 * coord[2])
}

/// `k` indices spread evenly over `0..n` (the middle one among them when `k` is odd).
fn spread(n: u64, k: u64) -> Vec<u64> {
    let k = k.clamp(1, n.max(1));
    let mut v: Vec<u64> = (0..k).map(|i| ((2 * i + 1) * n) / (2 * k)).collect();
    v.dedup();
    v
}

/// The pilot: the interior's middle block (or the grid's first when it has no interior).
pub fn pilot(grid: [u32; 3]) -> u64 {
    let interior = [false; 3];
    let n = stratum_size(grid, interior);
    stratum_block(grid, interior, n / 2)
}

impl Plan {
    /// The linear block index of every sample.
    pub fn blocks(&self) -> Vec<u64> {
        if self.whole {
            return (0..self.strata_total()).collect();
        }
        self.samples
            .iter()
            .map(|&(s, j)| stratum_block(self.grid, self.strata[s].last, j))
            .collect()
    }

    fn strata_total(&self) -> u64 {
        self.grid.iter().map(|&g| g.max(1) as u64).product()
    }

    /// Grid blocks each sample stands for: within its stratum, the blocks nearer to it (in
    /// stratum order) than to the stratum's other samples.
    pub fn weights(&self) -> Vec<f64> {
        if self.whole {
            return vec![1.0; self.strata_total() as usize];
        }
        let mut w = vec![0.0; self.samples.len()];
        for (si, st) in self.strata.iter().enumerate() {
            let mut mine: Vec<(u64, usize)> = self
                .samples
                .iter()
                .enumerate()
                .filter(|(_, s)| s.0 == si)
                .map(|(i, s)| (s.1, i))
                .collect();
            mine.sort_unstable();
            for (k, &(j, i)) in mine.iter().enumerate() {
                let lo = if k == 0 {
                    0.0
                } else {
                    (mine[k - 1].0 + j) as f64 / 2.0
                };
                let hi = if k + 1 == mine.len() {
                    st.n as f64
                } else {
                    (j + mine[k + 1].0) as f64 / 2.0
                };
                w[i] = hi - lo;
            }
        }
        w
    }

    /// Samples to add where neighbouring samples of a stratum differ by more than twice in
    /// emulated instructions (`insts` by linear block index): the midpoint between them, so
    /// that a region of blocks that work (or idle) is not missed between evenly spaced ones.
    pub fn refine(&self, insts: &HashMap<u64, u64>) -> Vec<(usize, u64)> {
        if self.whole {
            return vec![];
        }
        let mut add = Vec::new();
        for (si, st) in self.strata.iter().enumerate() {
            let mut mine: Vec<u64> = self
                .samples
                .iter()
                .filter(|s| s.0 == si)
                .map(|s| s.1)
                .collect();
            mine.sort_unstable();
            for pair in mine.windows(2) {
                let (a, b) = (pair[0], pair[1]);
                if b - a < 2 {
                    continue;
                }
                let get = |j: u64| {
                    insts
                        .get(&stratum_block(self.grid, st.last, j))
                        .copied()
                        .unwrap_or(0) as f64
                        + 1.0
                };
                let (x, y) = (get(a), get(b));
                if x.max(y) > 2.0 * x.min(y) {
                    add.push((si, (a + b) / 2));
                }
            }
        }
        add
    }
}

/// The blocks to emulate after a pilot that ran `pilot_insts` warp instructions: the whole
/// grid if it fits the budget; else evenly spread interior blocks (the pilot among them) and
/// the first, and one block per edge stratum.
pub fn plan(grid: [u32; 3], pilot_insts: u64, budget: u64) -> Plan {
    let total: u64 = grid.iter().map(|&g| g.max(1) as u64).product();
    let per = pilot_insts.max(1);
    let strata = strata(grid);
    if total.saturating_mul(per) <= budget.max(per) {
        return Plan {
            grid,
            strata,
            samples: vec![],
            whole: true,
        };
    }
    let mut samples = Vec::new();
    for (si, st) in strata.iter().enumerate() {
        if st.last == [false; 3] {
            // Odd, so that the middle block (the pilot) is one of them.
            let k = (budget / per).clamp(1, MAX_INTERIOR);
            let mut picks = spread(st.n, k - (1 - k % 2));
            if !picks.contains(&0) {
                picks.insert(0, 0);
            }
            samples.extend(picks.into_iter().map(|j| (si, j)));
        } else {
            samples.push((si, st.n / 2));
        }
    }
    Plan {
        grid,
        strata,
        samples,
        whole: false,
    }
}

/// Worker side of `Request::Estimate`: load the module (blob 0) into a fresh emulator, set
/// up the buffers (blobs 1..), run the pilot and the plan, and summarise.
pub fn run(spec: &EstimateSpec, blobs: &[Vec<u8>]) -> Result<KernelProfile, String> {
    let deadline = Instant::now() + Duration::from_millis(spec.deadline_ms);
    let trace = std::env::var_os("CUGRADE_ESTIMATE_TRACE").is_some();
    let t0 = Instant::now();
    let ptx = blobs.first().ok_or("no module")?;
    let mut emu = EmuBackend::new();
    emu.load_module(&String::from_utf8_lossy(ptx))
        .map_err(|e| e.to_string())?;
    let bufs = &blobs[1..];
    if bufs.len() != spec.buffers.len()
        || bufs
            .iter()
            .zip(&spec.buffers)
            .any(|(b, s)| !b.is_empty() && b.len() != s.total())
    {
        return Err("request buffers do not match their specs".into());
    }
    let fill = |i: usize| spec.fills.get(i).cloned().flatten();
    let mut addrs = Vec::with_capacity(bufs.len());
    for (i, (blob, s)) in bufs.iter().zip(&spec.buffers).enumerate() {
        let a = match fill(i) {
            Some(f) if blob.is_empty() => emu.alloc_drawn(s.bytes, f),
            _ => emu.alloc(s.bytes),
        }
        .map_err(|e| e.to_string())?;
        if !blob.is_empty() {
            emu.write(a, &blob[s.guard..s.guard + s.bytes])
                .map_err(|e| e.to_string())?;
        }
        addrs.push(a);
    }
    for (sym, i) in &spec.symbols {
        let s = spec.buffers[*i];
        let data = match (bufs[*i].is_empty(), fill(*i)) {
            (true, Some(f)) => f.all(),
            (true, None) => vec![0; s.bytes],
            (false, _) => bufs[*i][s.guard..s.guard + s.bytes].to_vec(),
        };
        emu.set_global(sym, &data).map_err(|e| e.to_string())?;
    }
    let params: Vec<ParamValue> = spec
        .args
        .iter()
        .map(|a| match a {
            Arg::Buffer(i) => ParamValue::Ptr(addrs[*i]),
            Arg::Value(v) => *v,
        })
        .collect();
    if trace {
        eprintln!("estimate worker: setup {:?}", t0.elapsed());
    }
    let grid = spec.dims.grid;
    let first = pilot(grid);
    let fault = |e: crate::backend::BackendError| match e {
        crate::backend::BackendError::Fault(_) if Instant::now() > deadline => format!(
            "the emulated blocks did not finish within {:.0} s: a block may wait for another block's writes (which a sample does not run), or one block does too much work to emulate",
            spec.deadline_ms as f64 / 1000.0
        ),
        e => e.to_string(),
    };
    let p0 = emu
        .launch_profiled(
            &spec.kernel,
            spec.dims,
            &params,
            &[first],
            &spec.cost,
            deadline,
        )
        .map_err(fault)?;
    let pilot_insts = p0.blocks.first().map_or(1, |b| b.1.warp_insts);
    let mut plan = plan(grid, pilot_insts, spec.budget);
    // The pilot is one of a sample's blocks: it does not run again.
    let rest: Vec<u64> = if plan.whole {
        plan.blocks()
    } else {
        plan.blocks().into_iter().filter(|&b| b != first).collect()
    };
    let mut run = emu
        .launch_profiled(
            &spec.kernel,
            spec.dims,
            &params,
            &rest,
            &spec.cost,
            deadline,
        )
        .map(|r| if plan.whole { r } else { p0.merge(r) })
        .map_err(fault)?;
    let mut added = 0;
    for _ in 0..REFINE_ROUNDS {
        let insts: HashMap<u64, u64> = run.blocks.iter().map(|(b, p)| (*b, p.warp_insts)).collect();
        let spent: u64 = insts.values().sum();
        let mut more = plan.refine(&insts);
        more.truncate(MAX_REFINED - added);
        if more.is_empty() || spent > 3 * spec.budget {
            break;
        }
        added += more.len();
        let blocks: Vec<u64> = more
            .iter()
            .map(|&(si, j)| stratum_block(grid, plan.strata[si].last, j))
            .collect();
        plan.samples.extend(more);
        let r = emu
            .launch_profiled(
                &spec.kernel,
                spec.dims,
                &params,
                &blocks,
                &spec.cost,
                deadline,
            )
            .map_err(fault)?;
        run = run.merge(r);
    }
    if trace {
        eprintln!(
            "estimate worker: {} blocks emulated {:?}",
            run.blocks.len(),
            t0.elapsed()
        );
    }
    let shared = emu
        .block_shared_bytes(&spec.kernel, spec.dims.shared_bytes)
        .unwrap_or(spec.dims.shared_bytes);
    Ok(summarise(&run, &plan, spec.dims, shared))
}

/// Scale what the planned blocks counted to the grid.
pub fn summarise(run: &Profiled, plan: &Plan, dims: LaunchDims, shared: u32) -> KernelProfile {
    let total = dims.blocks();
    let exhaustive = plan.whole;
    let weight: HashMap<u64, f64> = plan.blocks().into_iter().zip(plan.weights()).collect();
    let weights: Vec<f64> = run
        .blocks
        .iter()
        .map(|(b, _)| weight.get(b).copied().unwrap_or(0.0))
        .collect();
    let mut pb = BlockAverages::default();
    let mut cp_max = 0.0f64;
    let mut cp_max_l2 = 0.0f64;
    let mut insts = 0u64;
    for ((_, p), &w) in run.blocks.iter().zip(&weights) {
        pb.add(p, w);
        cp_max = cp_max.max(p.cp_cycles as f64);
        cp_max_l2 = cp_max_l2.max(p.cp_l2_cycles as f64);
        insts += p.warp_insts;
    }
    pb.scale(total as f64);
    let mut read = 0.0;
    let mut write = 0.0;
    for r in &run.regions {
        let sectors = (r.bytes as f64 / 32.0).ceil();
        let scaled = |per: &[u64], union: u64| {
            if exhaustive {
                union as f64
            } else {
                let s: f64 = per.iter().zip(&weights).map(|(&x, &w)| x as f64 * w).sum();
                s.min(sectors).max(union as f64)
            }
        };
        read += 32.0 * scaled(&r.loaded, r.loaded_union);
        write += 32.0 * scaled(&r.stored, r.stored_union);
    }
    let sampled = run.blocks.len() as u64;
    let hot = run
        .hot
        .iter()
        .map(|h| {
            if exhaustive {
                h.ops as f64
            } else if h.blocks >= 2 {
                // An address many blocks share: every block of the grid hits it alike.
                h.ops as f64 * total as f64 / sampled.max(1) as f64
            } else {
                h.max_in_block as f64
            }
        })
        .fold(0.0, f64::max);
    KernelProfile {
        blocks: total,
        sampled,
        threads_per_block: dims.threads_per_block() as u32,
        registers: None,
        shared_bytes: shared,
        per_block: pb,
        cp_max,
        cp_max_l2,
        dram_read_bytes: read,
        dram_write_bytes: write,
        hot_atomic_ops: hot,
        communicating: run.communicating,
        emulated_warp_insts: insts,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn small_grids_run_whole() {
        let p = plan([4, 2, 1], 1000, 1_000_000);
        assert!(p.whole);
        assert_eq!(p.blocks(), (0..8).collect::<Vec<_>>());
        assert!(p.weights().iter().all(|&w| w == 1.0));
    }

    #[test]
    fn large_grids_sample_every_stratum_and_weights_cover_the_grid() {
        let grid = [256, 256, 1];
        let p = plan(grid, 100_000, 1_000_000);
        let blocks = p.blocks();
        // 9 interior blocks (odd: the pilot is one) and the first, one per edge stratum.
        assert_eq!(blocks.len(), 13);
        assert!(blocks.contains(&pilot(grid)) && blocks.contains(&0));
        let sum: f64 = p.weights().iter().sum();
        assert!((sum - 65536.0).abs() < 1e-6, "{sum}");
        assert!(blocks.contains(&65535), "the corner block");
        let mut sorted = blocks.clone();
        sorted.sort();
        sorted.dedup();
        assert_eq!(sorted.len(), blocks.len(), "no block twice");
        // The same inputs give the same plan.
        assert_eq!(plan(grid, 100_000, 1_000_000), p);
        // A heavy pilot still samples the interior.
        assert_eq!(plan(grid, 1 << 40, 1_000_000).blocks().len(), 5);
    }

    #[test]
    fn one_dimensional_and_pilot() {
        let p = plan([65536, 1, 1], 2000, 1_000_000);
        let blocks = p.blocks();
        assert_eq!(blocks.len(), 17);
        assert!(blocks.contains(&pilot([65536, 1, 1])) && blocks.contains(&65535));
        assert_eq!(pilot([65536, 1, 1]), 32767);
        assert_eq!(pilot([1, 1, 1]), 0);
        assert_eq!(pilot([1, 64, 1]), 31);
        assert!(blocks.iter().any(|&b| b > 60000 && b < 65535));
    }

    #[test]
    fn refinement_finds_the_few_blocks_that_work() {
        // The first 256 of 262144 blocks do all the work (one thread per row of a table).
        let grid = [262144, 1, 1];
        let work = |b: u64| if b < 256 { 100_000 } else { 10 };
        let mut p = plan(grid, work(pilot(grid)), 2_500_000);
        for _ in 0..REFINE_ROUNDS {
            let insts: HashMap<u64, u64> = p.blocks().into_iter().map(|b| (b, work(b))).collect();
            let more = p.refine(&insts);
            if more.is_empty() {
                break;
            }
            p.samples.extend(more);
        }
        let total: f64 = p
            .blocks()
            .iter()
            .zip(p.weights())
            .map(|(&b, w)| work(b) as f64 * w)
            .sum();
        let truth = 256.0 * 100_000.0 + (262144.0 - 256.0) * 10.0;
        assert!((total / truth - 1.0).abs() < 0.05, "{total} vs {truth}");
    }
}
