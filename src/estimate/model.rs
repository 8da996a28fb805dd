//! The cost model: a kernel's time on a GPU from what its sampled emulation counted.
//!
//! Bounds, each a time: the SM's busiest pipe (issued instructions per pipe over its rate),
//! the L1's wavefronts (shared-memory passes, global-memory lines, shuffles), latency (the
//! blocks' critical paths, one wave of resident blocks after another), L2 traffic (sectors
//! loaded past L1, sectors stored, atomics), DRAM traffic (the bytes the kernel must move,
//! inferred from its footprint) and atomics on one address (serialised in L2). They combine as
//! `(sum of bound^p)^(1/p)` (a roofline that rounds its corners), plus the launch's overhead.
//! docs/estimate.md derives each term.

use super::gpu::{Gpu, Occupancy};
use crate::backend::emu::cost::{self, BlockProfile, CLASSES};

const _: () = assert!(CLASSES == crate::model::estimate::CLASSES);
pub use crate::model::estimate::{BlockAverages, KernelProfile};
use serde::{Deserialize, Serialize};

impl BlockAverages {
    /// Add block `p` with weight `w` (blocks of the grid it stands for).
    pub fn add(&mut self, p: &BlockProfile, w: f64) {
        for (a, b) in self.issue.iter_mut().zip(p.issue) {
            *a += w * b;
        }
        let f = |x: u64| w * x as f64;
        self.warp_insts += f(p.warp_insts);
        self.lane_insts += f(p.lane_insts);
        self.gld_requests += f(p.gld_requests);
        self.gld_sectors += f(p.gld_sectors);
        self.gld_lines += f(p.gld_lines);
        self.gld_wavefronts += f(p.gld_wavefronts);
        self.gst_requests += f(p.gst_requests);
        self.gst_sectors += f(p.gst_sectors);
        self.gst_lines += f(p.gst_lines);
        self.l2_load_sectors += f(p.l1_miss_sectors);
        self.atom_requests += f(p.gatom_requests);
        self.atom_ops += f(p.gatom_ops);
        self.atom_serial += f(p.gatom_serial);
        self.shared_requests += f(p.shared_requests);
        self.shared_wavefronts += f(p.shared_wavefronts);
        self.shared_atom_serial += f(p.shared_atom_serial);
        self.local_wavefronts += f(p.local_wavefronts);
        self.barriers += f(p.barriers);
        self.cp += f(p.cp_cycles);
        self.cp_l2 += f(p.cp_l2_cycles);
        self.first_touch_sectors += f(p.l1_first_touch_sectors);
    }

    /// Divide every sum by `n` (the grid's blocks).
    pub fn scale(&mut self, n: f64) {
        let k = 1.0 / n.max(1.0);
        for a in self.issue.iter_mut() {
            *a *= k;
        }
        for x in [
            &mut self.warp_insts,
            &mut self.lane_insts,
            &mut self.gld_requests,
            &mut self.gld_sectors,
            &mut self.gld_lines,
            &mut self.gld_wavefronts,
            &mut self.gst_requests,
            &mut self.gst_sectors,
            &mut self.gst_lines,
            &mut self.l2_load_sectors,
            &mut self.atom_requests,
            &mut self.atom_ops,
            &mut self.atom_serial,
            &mut self.shared_requests,
            &mut self.shared_wavefronts,
            &mut self.shared_atom_serial,
            &mut self.local_wavefronts,
            &mut self.barriers,
            &mut self.cp,
            &mut self.cp_l2,
            &mut self.first_touch_sectors,
        ] {
            *x *= k;
        }
    }
}

/// A kernel's estimated time and what bounds it.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Breakdown {
    pub ms: f64,
    /// Each bound, ms, by name: `compute`, `l1`, `latency`, `l2`, `dram`, `atomics`.
    pub bounds: Vec<(String, f64)>,
    /// The largest bound.
    pub limiter: String,
    /// Resident blocks per SM and what limits them.
    pub blocks_per_sm: u32,
    pub occupancy_limiter: String,
}

/// Registers assumed when ptxas's count is unknown (hand-written PTX, Numba).
pub const DEFAULT_REGISTERS: u32 = 32;

/// The time of kernel `k` on `gpu`.
pub fn time(k: &KernelProfile, gpu: &Gpu) -> Breakdown {
    let occ: Occupancy = gpu.occupancy(
        k.threads_per_block,
        k.registers.unwrap_or(DEFAULT_REGISTERS),
        k.shared_bytes,
    );
    let pb = &k.per_block;
    let sms = gpu.sms.value.max(1.0);
    let n = k.blocks.max(1) as f64;
    // The busiest SM's blocks: ceil(n / sms); they run `resident` at a time.
    let per_sm = (n / sms).ceil();
    let b = occ.blocks.max(1) as f64;
    let resident = b.min(per_sm);
    let warps = k.threads_per_block.div_ceil(32).max(1) as f64;
    // Schedulers with a warp to issue from (4 per SM).
    let busy = (resident * warps).min(gpu.issue_rate.value).max(1.0) / gpu.issue_rate.value;
    let rate = |p: &super::gpu::Param| p.value.max(1e-9) * busy;
    let total_issue: f64 = pb.issue.iter().sum();
    let compute_cycles = [
        total_issue / rate(&gpu.issue_rate),
        pb.issue[cost::FMA] / rate(&gpu.fma_rate),
        pb.issue[cost::ALU] / rate(&gpu.alu_rate),
        pb.issue[cost::FP64] / rate(&gpu.fp64_rate),
        pb.issue[cost::SFU] / rate(&gpu.sfu_rate),
        pb.issue[cost::CONV] / rate(&gpu.conv_rate),
        pb.issue[cost::CTRL] / rate(&gpu.ctrl_rate),
    ]
    .into_iter()
    .fold(0.0, f64::max)
        * per_sm;
    // Profiles from before `gld_wavefronts` counted the L1's lines.
    let gld_wavefronts = if pb.gld_wavefronts > 0.0 {
        pb.gld_wavefronts
    } else {
        pb.gld_lines
    };
    let l1_cycles = per_sm
        * (pb.shared_wavefronts
            + gld_wavefronts
            + pb.gst_lines
            + pb.local_wavefronts
            + pb.atom_requests
            + pb.issue[cost::SHFL]
            + 2.0 * pb.shared_atom_serial)
        / gpu.l1_wavefront_rate.value.max(1e-9);
    let waves = (per_sm / b).ceil();
    // The share of first-touch misses that really come from DRAM: the kernel's footprint over
    // what its blocks first-touch (blocks that share data find it in L2).
    let first = n * pb.first_touch_sectors * 32.0;
    let from_dram = if first > 0.0 {
        (k.dram_read_bytes / first).clamp(0.0, 1.0)
    } else {
        1.0
    };
    let cp = pb.cp_l2 + from_dram * (pb.cp - pb.cp_l2);
    let cp_max = k.cp_max_l2 + from_dram * (k.cp_max - k.cp_max_l2);
    let latency_cycles = (waves * cp).max(cp_max) * gpu.latency_scale.value;
    let cycle_ms = 1.0 / (gpu.clock_mhz.value.max(1.0) * 1e3);
    let ns = 1e-6;
    let l2_ms = n
        * (pb.l2_load_sectors / gpu.l2_load_sectors_per_ns.value.max(1e-9)
            + pb.gst_sectors / gpu.l2_store_sectors_per_ns.value.max(1e-9)
            + pb.atom_ops / gpu.l2_atomic_ops_per_ns.value.max(1e-9))
        * ns;
    let dram_ms = (k.dram_read_bytes + k.dram_write_bytes) / (gpu.dram_gbs.value.max(1e-9) * 1e6);
    let atomics_ms = k.hot_atomic_ops * gpu.same_address_atomic_ns.value * ns;
    let bounds: Vec<(String, f64)> = vec![
        ("compute".into(), compute_cycles * cycle_ms),
        ("l1".into(), l1_cycles * cycle_ms),
        ("latency".into(), latency_cycles * cycle_ms),
        ("l2".into(), l2_ms),
        ("dram".into(), dram_ms),
        ("atomics".into(), atomics_ms),
    ];
    let p = gpu.combine_p.value.max(1.0);
    let combine = |skip: &str| {
        let top = bounds
            .iter()
            .filter(|b| b.0 != skip)
            .map(|b| b.1)
            .fold(0.0, f64::max);
        if top > 0.0 {
            top * bounds
                .iter()
                .filter(|b| b.0 != skip)
                .map(|b| (b.1 / top).powf(p))
                .sum::<f64>()
                .powf(1.0 / p)
        } else {
            0.0
        }
    };
    // Atomics on one address come at the end of a block's work (a reduction's last step), so
    // those of the last wave of blocks queue up after everything else: they overlap the other
    // bounds only while earlier waves' atomics meet later waves' work.
    let combined = combine("").max(combine("atomics") + atomics_ms / waves.max(1.0));
    let limiter = bounds
        .iter()
        .max_by(|a, b| a.1.total_cmp(&b.1))
        .map(|b| b.0.clone())
        .unwrap_or_default();
    Breakdown {
        ms: combined + gpu.launch_us.value * 1e-3,
        bounds,
        limiter,
        blocks_per_sm: occ.blocks,
        occupancy_limiter: occ.limiter.to_string(),
    }
}

/// cuBLAS SGEMM of `m x n x k` (not emulated: the data file's rate).
pub fn cublas_ms(m: f64, n: f64, k: f64, gpu: &Gpu) -> f64 {
    2.0 * m * n * k / (gpu.cublas_sgemm_tflops.value.max(1e-9) * 1e9) + gpu.launch_us.value * 1e-3
}

/// A device-to-device copy of `bytes` (read and written once each).
pub fn copy_ms(bytes: f64, gpu: &Gpu) -> f64 {
    2.0 * bytes / (gpu.copy_gbs.value.max(1e-9) * 1e6) + gpu.launch_us.value * 1e-3
}

/// What each bound means, for a sentence: "limited by ...".
/// What usually makes a kernel bound by `limiter` faster: the hint of an estimate that is
/// likely to fail its bar.
pub fn limiter_advice(limiter: &str) -> &'static str {
    match limiter {
        "compute" => {
            "Most of the estimated time is instruction throughput: do less work per element (hoist what does not change out of loops, reuse loaded values, avoid 64-bit or integer division in the inner loop)."
        }
        "l1" => {
            "Most of the estimated time is L1/shared-memory traffic: remove bank conflicts (pad shared arrays) and let each thread reuse what it loads instead of loading it again."
        }
        "latency" => {
            "Most of the estimated time is waiting on memory: give each thread more independent work in flight (several loads before their use), and check that enough warps are resident (block size, registers, shared memory)."
        }
        "l2" => {
            "Most of the estimated time is L2 traffic: keep reused data in shared memory or registers instead of loading it from global memory again."
        }
        "dram" => {
            "Most of the estimated time is DRAM traffic: coalesce the accesses (consecutive threads, consecutive addresses) and read each byte once."
        }
        "atomics" => {
            "Most of the estimated time is atomics on one address, which the GPU serialises: combine values within each warp (shuffles) and each block (shared memory) first, then one atomic per block."
        }
        _ => {
            "The estimate is far from the bar: compare the kernel with the lab's hint and with `cugrade check --profile`."
        }
    }
}

pub fn limiter_words(limiter: &str) -> &'static str {
    match limiter {
        "compute" => "instruction throughput",
        "l1" => "L1/shared-memory traffic (wavefronts)",
        "latency" => "latency (dependent memory accesses, too few warps to hide them)",
        "l2" => "L2 traffic",
        "dram" => "DRAM bandwidth",
        "atomics" => "atomics on one address",
        _ => "nothing in particular",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::estimate::gpu::named;

    fn streaming(bytes: f64) -> KernelProfile {
        let blocks = (bytes / 4.0 / 256.0) as u64;
        KernelProfile {
            blocks,
            sampled: 4,
            threads_per_block: 256,
            registers: Some(16),
            per_block: BlockAverages {
                issue: [0.0, 16.0, 0.0, 0.0, 0.0, 16.0, 8.0, 0.0],
                warp_insts: 40.0,
                gld_requests: 8.0,
                gld_sectors: 32.0,
                gld_lines: 8.0,
                gld_wavefronts: 8.0,
                gst_requests: 8.0,
                gst_sectors: 32.0,
                gst_lines: 8.0,
                l2_load_sectors: 32.0,
                cp: 800.0,
                ..BlockAverages::default()
            },
            cp_max: 800.0,
            cp_max_l2: 800.0,
            dram_read_bytes: bytes,
            dram_write_bytes: bytes,
            ..KernelProfile::default()
        }
    }

    #[test]
    fn a_large_copy_is_bound_by_dram_and_scales_with_its_size() {
        let g = named("h100").unwrap();
        let small = time(&streaming(64e6), &g);
        let big = time(&streaming(256e6), &g);
        assert!(
            ["dram", "l2"].contains(&big.limiter.as_str()),
            "{}",
            big.limiter
        );
        // Four times the bytes: close to four times the time (overheads aside).
        let r = big.ms / small.ms;
        assert!((3.5..4.1).contains(&r), "{r}");
        // 512 MB at 2.97 TB/s is 0.17 ms; the other bounds add some.
        assert!((0.17..0.3).contains(&big.ms), "{}", big.ms);
        // The H200's bandwidth makes it faster.
        assert!(time(&streaming(256e6), &named("h200").unwrap()).ms < big.ms * 0.95);
    }

    #[test]
    fn one_address_atomics_serialise() {
        let g = named("h100").unwrap();
        let mut k = streaming(64e6);
        k.hot_atomic_ops = (1u64 << 24) as f64;
        let t = time(&k, &g);
        assert_eq!(t.limiter, "atomics");
        assert!((t.ms - 29.4).abs() < 2.0, "{}", t.ms);
    }

    #[test]
    fn one_wave_of_blocks_pays_for_its_atomics_after_its_traffic() {
        let g = named("h100").unwrap();
        // 132 x 8 blocks of 256 threads: one wave; 8448 atomics on one address at the end.
        let mut k = streaming(64e6);
        k.blocks = 132 * 8;
        let alone = time(&k, &g).ms;
        k.hot_atomic_ops = 8448.0;
        let t = time(&k, &g).ms;
        let atomics = 8448.0 * 1.75e-6;
        assert!(
            (t - alone - atomics).abs() < 0.1 * atomics,
            "{t} {alone} {atomics}"
        );
        // Many waves: the atomics hide behind later blocks' traffic.
        let mut many = streaming(64e6);
        let alone = time(&many, &g).ms;
        many.hot_atomic_ops = 8448.0;
        assert!(time(&many, &g).ms - alone < 0.2 * atomics);
    }

    #[test]
    fn baselines() {
        let g = named("h100").unwrap();
        // 137 GFLOP at 52 TFLOPS: 2.6 ms.
        assert!((cublas_ms(4096.0, 4096.0, 4096.0, &g) - 2.645).abs() < 0.05);
        // 256 MB read and 256 MB written at the 3.0 TB/s a cudaMemcpy reached on the H100.
        assert!((copy_ms(256e6, &g) - 0.173).abs() < 0.005);
    }
}
