//! Resource facts of a kernel: registers, shared memory, local-memory spills and theoretical
//! occupancy, with a note when occupancy is what limits it. Informational: no points.

use crate::backend::{KernelInfo, LaunchDims};
use crate::result::KernelResources;
use crate::result::{Check, CheckKind};

/// Per-SM limits of the device (Hopper, sm_90, unless measured otherwise).
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct SmLimits {
    pub max_warps: u32,
    pub max_blocks: u32,
    pub registers: u32,
    /// Registers are allocated per warp in units of this many.
    pub register_unit: u32,
    pub shared_bytes: u32,
    /// Shared memory the system reserves per block.
    pub shared_reserved: u32,
}

impl SmLimits {
    pub const SM90: SmLimits = SmLimits {
        max_warps: 64,
        max_blocks: 32,
        registers: 65536,
        register_unit: 256,
        shared_bytes: 228 * 1024,
        shared_reserved: 1024,
    };
}

/// Theoretical occupancy: resident blocks per SM, the fraction of warp slots they fill, and
/// what limits them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Occupancy {
    pub blocks: u32,
    pub fraction: f64,
    pub limiter: &'static str,
}

pub fn occupancy(threads: u32, registers: u32, shared: u32, l: SmLimits) -> Occupancy {
    let warps = threads.div_ceil(32).max(1);
    let per_warp_regs = (registers.max(1) * 32).div_ceil(l.register_unit) * l.register_unit;
    let mut limits = vec![
        (l.max_blocks, "the blocks-per-SM limit"),
        (l.max_warps / warps, "the block size"),
        ((l.registers / per_warp_regs) / warps, "registers"),
    ];
    if shared > 0 {
        limits.push((
            l.shared_bytes / (shared + l.shared_reserved),
            "shared memory",
        ));
    }
    let (blocks, limiter) = limits
        .into_iter()
        .min_by_key(|(b, _)| *b)
        .unwrap_or((0, "nothing"));
    Occupancy {
        blocks,
        fraction: f64::from(blocks * warps) / f64::from(l.max_warps),
        limiter,
    }
}

/// Registers per thread as the hardware allocates them: the driver's count of the loaded
/// kernel on a GPU (`info.registers`), else ptxas's (`compiled`: NVRTC's `-v` log for CUDA C++,
/// nvJitLink's for PTX and Numba). Never the emulator's count of PTX virtual registers (its
/// `info.registers` is 0). `None`: unknown.
pub fn real_registers(info: &KernelInfo, compiled: Option<&KernelResources>) -> Option<u32> {
    Some(info.registers)
        .filter(|&r| r > 0)
        .or_else(|| compiled.map(|k| k.registers).filter(|&r| r > 0))
}

/// The resources check of a kernel launched with `dims`.
pub(super) fn check(
    kernel: &str,
    info: &KernelInfo,
    compiled: Option<&KernelResources>,
    dims: LaunchDims,
) -> Check {
    let registers = real_registers(info, compiled);
    let shared = info.static_shared_bytes + dims.shared_bytes;
    let threads = dims.threads_per_block() as u32;
    // Unknown registers (no GPU and no ptxas facts) limit nothing we can name: the occupancy
    // is then what the block size and shared memory allow, and the message says so.
    let occ = occupancy(threads, registers.unwrap_or(1), shared, SmLimits::SM90);
    let spills = compiled.map(|k| k.spill_stores + k.spill_loads);
    let local = match (spills, info.local_bytes) {
        (Some(0), 0) => "no local memory (no spills)".to_string(),
        (None, 0) => "spills unknown".to_string(),
        (Some(0) | None, l) => format!("{l} bytes of local memory per thread"),
        (Some(s), l) => {
            format!("{s} bytes of register spills ({l} bytes of local memory per thread)")
        }
    };
    let regs = match registers {
        Some(r) => format!("{r} registers per thread"),
        None => "registers unknown (neither a GPU nor ptxas said)".to_string(),
    };
    let bound = if registers.is_some() { "" } else { "at most " };
    let mut msg = format!(
        "`{kernel}`: {regs}, {shared} bytes of shared memory per block, {local}; theoretical occupancy {bound}{:.0} % ({} blocks of {threads} threads per SM, limited by {})",
        100.0 * occ.fraction,
        occ.blocks,
        occ.limiter,
    );
    let mut hint = None;
    if occ.fraction < 0.5 && matches!(occ.limiter, "registers" | "shared memory") {
        msg.push_str(&format!(
            "; occupancy is limited by {}: fewer warps hide less memory latency",
            occ.limiter
        ));
        hint = Some(format!(
            "Few warps fit on an SM because of {}: use fewer per thread/block (smaller tiles, fewer live variables, __launch_bounds__) if the kernel is memory-bound.",
            occ.limiter
        ));
    }
    if spills.unwrap_or(0) > 0 {
        hint = Some("Registers spill to local memory (slow): reduce live variables or unrolling, or raise the register limit with __launch_bounds__.".into());
    }
    let mut c = Check::pass(CheckKind::Resources, format!("resources {kernel}"), msg);
    c.hint = hint;
    c
}

#[cfg(test)]
mod tests {
    use super::*;

    fn info(registers: u32) -> KernelInfo {
        KernelInfo {
            param_count: 3,
            param_sizes: vec![8, 8, 4],
            max_threads_per_block: 1024,
            static_shared_bytes: 0,
            registers,
            local_bytes: 0,
        }
    }

    fn dims() -> LaunchDims {
        LaunchDims {
            grid: [64, 1, 1],
            block: [256, 1, 1],
            shared_bytes: 0,
        }
    }

    #[test]
    fn registers_are_the_hardwares_or_unknown() {
        let ptxas = KernelResources {
            name: "k".into(),
            registers: 32,
            ..Default::default()
        };
        // The emulator (0) with ptxas's facts: ptxas's 32, full occupancy.
        let c = check("k", &info(0), Some(&ptxas), dims());
        assert!(
            c.message.contains("32 registers per thread"),
            "{}",
            c.message
        );
        assert!(c.message.contains("occupancy 100 %"), "{}", c.message);
        assert!(c.hint.is_none());
        // A GPU's driver count wins.
        let c = check("k", &info(40), Some(&ptxas), dims());
        assert!(
            c.message.contains("40 registers per thread"),
            "{}",
            c.message
        );
        // Nothing known: said so, and no register limit is invented.
        let c = check("k", &info(0), None, dims());
        assert!(c.message.contains("registers unknown"), "{}", c.message);
        assert!(c.message.contains("spills unknown"), "{}", c.message);
        assert!(
            c.message.contains("occupancy at most 100 %"),
            "{}",
            c.message
        );
        assert!(!c.message.contains("limited by registers"), "{}", c.message);
    }

    #[test]
    fn occupancy_and_its_limiter() {
        let l = SmLimits::SM90;
        // 256 threads, 32 registers: 8 blocks fill all 64 warps.
        let o = occupancy(256, 32, 0, l);
        assert_eq!(
            (o.blocks, o.fraction, o.limiter),
            (8, 1.0, "the block size")
        );
        // 255 registers per thread: 65536 / (255*32 rounded to 256 = 8192) = 8 warps.
        let o = occupancy(256, 255, 0, l);
        assert_eq!((o.blocks, o.limiter), (1, "registers"));
        assert_eq!(o.fraction, 0.125);
        // 100 KiB of shared memory per block: two blocks.
        let o = occupancy(128, 32, 100 * 1024, l);
        assert_eq!((o.blocks, o.limiter), (2, "shared memory"));
        // Tiny blocks hit the blocks-per-SM limit.
        let o = occupancy(32, 16, 0, l);
        assert_eq!((o.blocks, o.limiter), (32, "the blocks-per-SM limit"));
        assert_eq!(o.fraction, 0.5);
    }
}
