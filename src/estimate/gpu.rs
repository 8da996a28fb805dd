//! The modelled GPUs: their parameters, read from `gpus.yaml` (built into the binary), each
//! with its source; and theoretical occupancy on them.

use crate::backend::emu::cost::Latencies;
use serde::Deserialize;

/// One parameter and where its value comes from.
#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct Param {
    pub value: f64,
    pub source: String,
}

#[derive(Debug, Clone, PartialEq, Deserialize)]
pub struct LatencyParams {
    pub alu: Param,
    pub fma: Param,
    pub fp64: Param,
    pub sfu: Param,
    pub shared: Param,
    pub l1_hit: Param,
    pub l2_hit: Param,
    pub dram: Param,
    pub atomic: Param,
    pub barrier: Param,
}

/// A GPU the estimate can model (see `gpus.yaml` for what each field means).
#[derive(Debug, Clone, PartialEq, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Gpu {
    pub id: String,
    /// Short name for sentences: "H100".
    pub name: String,
    pub long_name: String,
    pub calibrated: String,
    #[serde(default)]
    pub same_as: Option<String>,
    pub sms: Param,
    pub clock_mhz: Param,
    pub max_warps_per_sm: Param,
    pub max_blocks_per_sm: Param,
    pub registers_per_sm: Param,
    pub register_unit: Param,
    pub shared_per_sm: Param,
    pub shared_reserved_per_block: Param,
    pub l1_shared_per_sm: Param,
    pub l2_bytes: Param,
    pub issue_rate: Param,
    pub fma_rate: Param,
    pub alu_rate: Param,
    pub fp64_rate: Param,
    pub sfu_rate: Param,
    pub conv_rate: Param,
    pub ctrl_rate: Param,
    pub l1_wavefront_rate: Param,
    pub l2_load_sectors_per_ns: Param,
    pub l2_store_sectors_per_ns: Param,
    pub l2_atomic_ops_per_ns: Param,
    pub dram_gbs: Param,
    pub copy_gbs: Param,
    pub same_address_atomic_ns: Param,
    pub launch_us: Param,
    pub latency_scale: Param,
    pub combine_p: Param,
    pub cublas_sgemm_tflops: Param,
    pub range_low: Param,
    pub range_high: Param,
    pub latencies: LatencyParams,
}

const DATA: &str = include_str!("gpus.yaml");

/// Every modelled GPU, in the data file's order. A GPU with `same_as` takes the other's
/// parameters and overrides the ones it lists.
pub fn all() -> Result<Vec<Gpu>, String> {
    let doc: serde_yaml::Value =
        serde_yaml::from_str(DATA).map_err(|e| format!("estimate/gpus.yaml: {e}"))?;
    let list = doc
        .get("gpus")
        .and_then(|g| g.as_sequence())
        .ok_or("estimate/gpus.yaml: no `gpus` list")?;
    let mut out: Vec<Gpu> = Vec::new();
    let mut raw: Vec<serde_yaml::Mapping> = Vec::new();
    for v in list {
        let mut m = v
            .as_mapping()
            .cloned()
            .ok_or("estimate/gpus.yaml: a GPU is not a mapping")?;
        if let Some(base) = m
            .get("same_as")
            .and_then(|b| b.as_str())
            .map(str::to_string)
        {
            let idx = out.iter().position(|g| g.id == base).ok_or(format!(
                "estimate/gpus.yaml: same_as `{base}` is not listed before it"
            ))?;
            let mut merged = raw[idx].clone();
            for (k, v) in m {
                merged.insert(k, v);
            }
            m = merged;
        }
        let g: Gpu = serde_yaml::from_value(serde_yaml::Value::Mapping(m.clone()))
            .map_err(|e| format!("estimate/gpus.yaml: {e}"))?;
        raw.push(m);
        out.push(g);
    }
    Ok(out)
}

/// The GPU called `name` (its id, short or long name, any case: `h100`, `H200`).
pub fn named(name: &str) -> Result<Gpu, String> {
    let gpus = all()?;
    let want = name.trim().to_ascii_lowercase();
    gpus.iter()
        .find(|g| {
            g.id == want
                || g.name.to_ascii_lowercase() == want
                || g.long_name.to_ascii_lowercase() == want
        })
        .cloned()
        .ok_or_else(|| {
            let ids: Vec<&str> = gpus.iter().map(|g| g.id.as_str()).collect();
            format!(
                "no GPU model `{name}`; the estimate knows {}",
                ids.join(", ")
            )
        })
}

/// The GPU estimates are for unless asked otherwise.
pub const DEFAULT: &str = "h100";
/// `--estimate-gpu none`: no estimates.
pub const NONE: &str = "none";

impl Gpu {
    /// Latencies in cycles, as the emulator's cost counters take them.
    pub fn latencies(&self) -> Latencies {
        let l = &self.latencies;
        let c = |p: &Param| p.value.max(0.0).round() as u32;
        Latencies {
            alu: c(&l.alu),
            fma: c(&l.fma),
            fp64: c(&l.fp64),
            sfu: c(&l.sfu),
            shared: c(&l.shared),
            l1_hit: c(&l.l1_hit),
            l2_hit: c(&l.l2_hit),
            dram: c(&l.dram),
            atomic: c(&l.atomic),
            barrier: c(&l.barrier),
        }
    }

    /// Theoretical occupancy of blocks of `threads` threads using `registers` registers per
    /// thread and `shared` bytes of shared memory.
    pub fn occupancy(&self, threads: u32, registers: u32, shared: u32) -> Occupancy {
        let v = |p: &Param| p.value as u32;
        let warps = threads.div_ceil(32).max(1);
        let unit = v(&self.register_unit).max(1);
        let per_warp = (registers.max(1) * 32).div_ceil(unit) * unit;
        let mut limits = vec![
            (v(&self.max_blocks_per_sm), "the blocks-per-SM limit"),
            (v(&self.max_warps_per_sm) / warps, "the block size"),
            ((v(&self.registers_per_sm) / per_warp) / warps, "registers"),
        ];
        if shared > 0 {
            limits.push((
                v(&self.shared_per_sm) / (shared + v(&self.shared_reserved_per_block)),
                "shared memory",
            ));
        }
        let (blocks, limiter) = limits
            .into_iter()
            .min_by_key(|(b, _)| *b)
            .unwrap_or((0, "nothing"));
        Occupancy {
            blocks,
            warps: blocks * warps,
            fraction: f64::from(blocks * warps) / self.max_warps_per_sm.value.max(1.0),
            limiter,
        }
    }
}

/// Resident blocks per SM and what limits them.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Occupancy {
    pub blocks: u32,
    pub warps: u32,
    pub fraction: f64,
    pub limiter: &'static str,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_data_file_parses_and_every_value_names_a_source() {
        let gpus = all().unwrap();
        assert!(gpus.iter().any(|g| g.id == "h100"));
        let h200 = named("H200").unwrap();
        let h100 = named("h100").unwrap();
        // The H200 is the H100's chip with more memory bandwidth.
        assert_eq!(h200.sms, h100.sms);
        assert!(h200.dram_gbs.value > h100.dram_gbs.value * 1.3);
        for g in &gpus {
            assert!(!g.sms.source.is_empty() && !g.dram_gbs.source.is_empty());
        }
        assert!(named("a100").unwrap_err().contains("h100"));
        let text = DATA;
        for line in text.lines().filter(|l| l.contains("value:")) {
            assert!(line.contains("source:"), "no source: {line}");
        }
    }

    #[test]
    fn occupancy_follows_the_tightest_limit() {
        let g = named("h100").unwrap();
        // 256 threads, 32 registers: 8 blocks by the warp limit (64 warps).
        let o = g.occupancy(256, 32, 0);
        assert_eq!((o.blocks, o.limiter), (8, "the block size"));
        assert_eq!(o.fraction, 1.0);
        // 128 registers: 65536 / (128 * 32) = 16 warps = 2 blocks of 8 warps.
        assert_eq!(g.occupancy(256, 128, 0).blocks, 2);
        // 48 KiB of shared memory: 228 KiB / 49 KiB = 4 blocks.
        let o = g.occupancy(256, 32, 48 * 1024);
        assert_eq!((o.blocks, o.limiter), (4, "shared memory"));
        // Tiny blocks: the 32-blocks limit.
        assert_eq!(g.occupancy(32, 16, 0).blocks, 32);
    }
}
