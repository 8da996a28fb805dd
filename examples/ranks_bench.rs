//! The all-reduce lab's reference kernels and NCCL on a rank set, side by side: every kernel
//! checked against the CPU's sum at awkward sizes, then timed at three sizes with NCCL's
//! all-reduce timed the same way in the same run (bus bandwidth as NCCL's tests define it).
//! This is how docs/validation/ records the lab's numbers on the lent two-GPU machines.
//!
//!     NCCL_NVLS_ENABLE=0 cargo run --release --example ranks_bench -- [--gpus 0,1] \
//!         [--sizes-mib 1,64,512] [--reps 20] [--source reference-kernels/allreduce.cu]
//!
//! Without `--gpus` it runs the correctness part on `--emu N` emulated ranks (no timing).

use cugrade::backend::ranks::{RankSet, allreduce_bus_gbs};
use cugrade::backend::{LaunchDims, ParamValue};
use cugrade::compile::SourceFile;
use std::time::{Duration, Instant};

const KERNELS: [&str; 3] = ["allreduce_naive", "allreduce_ring", "allreduce_fast"];
const FLAGS: usize = 4096;

fn arg(name: &str) -> Option<String> {
    let args: Vec<String> = std::env::args().collect();
    args.iter()
        .position(|a| a == name)
        .and_then(|i| args.get(i + 1).cloned())
}

/// The rubric's launch: 256 threads, at most 264 blocks (two an SM of an H100), fewer for
/// small sizes.
fn dims(n: usize) -> LaunchDims {
    let blocks = n.div_ceil(1024).clamp(1, 264) as u32;
    LaunchDims {
        grid: [blocks, 1, 1],
        block: [256, 1, 1],
        shared_bytes: 0,
    }
}

struct Placed {
    input: Vec<u64>,
    output: Vec<u64>,
    flags: Vec<u64>,
    params: Vec<Vec<ParamValue>>,
}

fn place(set: &mut dyn RankSet, n: usize, inputs: &[Vec<f32>]) -> Placed {
    let ranks = set.ranks();
    set.free_all().expect("free");
    let mut p = Placed {
        input: vec![],
        output: vec![],
        flags: vec![],
        params: vec![],
    };
    for (r, input) in inputs.iter().enumerate() {
        let a = set.alloc(r, 4 * n).expect("alloc");
        let bytes: Vec<u8> = input.iter().flat_map(|v| v.to_le_bytes()).collect();
        set.write(r, a, &bytes).expect("write");
        p.input.push(a);
        let o = set.alloc(r, 4 * n).expect("alloc");
        set.write(r, o, &vec![0xff; 4 * n]).expect("poison");
        p.output.push(o);
        let f = set.alloc(r, 4 * FLAGS).expect("alloc");
        set.write(r, f, &vec![0; 4 * FLAGS]).expect("zero");
        p.flags.push(f);
    }
    for r in 0..ranks {
        let mut tables = Vec::new();
        for list in [&p.input, &p.output, &p.flags] {
            let t = set.alloc(r, 8 * ranks).expect("alloc");
            let bytes: Vec<u8> = list.iter().flat_map(|a| a.to_le_bytes()).collect();
            set.write(r, t, &bytes).expect("table");
            tables.push(ParamValue::Ptr(t));
        }
        tables.extend([
            ParamValue::I32(n as i32),
            ParamValue::I32(r as i32),
            ParamValue::I32(ranks as i32),
        ]);
        p.params.push(tables);
    }
    p
}

fn inputs(ranks: usize, n: usize) -> Vec<Vec<f32>> {
    let mut s = 0x9e3779b97f4a7c15u64;
    (0..ranks)
        .map(|_| {
            (0..n)
                .map(|_| {
                    s ^= s << 13;
                    s ^= s >> 7;
                    s ^= s << 17;
                    ((s >> 40) as f32 / (1u64 << 24) as f32) * 2.0 - 1.0
                })
                .collect()
        })
        .collect()
}

/// Every rank's output against the exact sum, within the error model's bound for an N-term
/// float sum: (N-1) u sum|x| (u = 2^-24), times 1.01.
fn check(set: &mut dyn RankSet, kernel: &str, n: usize) -> Result<(), String> {
    let ranks = set.ranks();
    let xs = inputs(ranks, n);
    let p = place(set, n, &xs);
    let deadline = Instant::now() + Duration::from_secs(60);
    let reports = set
        .launch_all(kernel, dims(n), &p.params, deadline)
        .map_err(|e| format!("{e}"))?;
    let findings: Vec<String> = reports
        .iter()
        .enumerate()
        .flat_map(|(r, rep)| {
            rep.diagnostics
                .iter()
                .map(move |d| format!("rank {r}: {}", d.message))
        })
        .collect();
    for r in 0..ranks {
        let got = set.read(r, p.output[r], 4 * n).map_err(|e| e.to_string())?;
        for i in 0..n {
            let g = f32::from_le_bytes(got[4 * i..4 * i + 4].try_into().unwrap()) as f64;
            let exact: f64 = xs.iter().map(|x| x[i] as f64).sum();
            let abs: f64 = xs.iter().map(|x| (x[i] as f64).abs()).sum();
            let bound = 1.01 * (ranks as f64 - 1.0) * f64::powi(2.0, -24) * abs;
            if (g - exact).abs() > bound || g.is_nan() {
                return Err(format!(
                    "rank {r} element {i}: {g} where the sum is {exact} (bound {bound:.3e})"
                ));
            }
        }
    }
    if findings.is_empty() {
        Ok(())
    } else {
        Err(findings.join("; "))
    }
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(f64::total_cmp);
    v.get(v.len() / 2).copied().unwrap_or(f64::NAN)
}

fn main() {
    let source = arg("--source").unwrap_or_else(|| "reference-kernels/allreduce.cu".into());
    let text = std::fs::read_to_string(&source).expect("read the kernels");
    let gpus: Vec<usize> = arg("--gpus")
        .map(|g| {
            g.split(',')
                .map(|x| x.trim().parse().expect("a GPU index"))
                .collect()
        })
        .unwrap_or_default();
    let arch = if gpus.is_empty() {
        "sm_90".to_string()
    } else {
        cugrade::backend::cuda::device_arch(gpus[0])
            .expect("a GPU")
            .1
    };
    let main = SourceFile {
        name: "allreduce.cu".into(),
        text,
    };
    let compiled = cugrade::compile::compile(&main, &[], &cugrade::compile::options(&arch, &[]));
    assert!(compiled.ok, "{}", compiled.log);
    let mut set: Box<dyn RankSet> = if gpus.is_empty() {
        let n: usize = arg("--emu").and_then(|s| s.parse().ok()).unwrap_or(2);
        Box::new(cugrade::backend::emu::ranks::EmuRanks::new(n).expect("emulated ranks"))
    } else {
        Box::new(cugrade::backend::cuda::ranks::CudaRanks::new(&gpus).expect("GPUs"))
    };
    println!("{}", set.device_name());
    set.load_module(&compiled.ptx).expect("load");
    for kernel in KERNELS {
        for n in [1usize, 3, 7, 1000, 4097, 65537, 1_000_003] {
            let verdict = match check(set.as_mut(), kernel, n) {
                Ok(()) => "ok".to_string(),
                Err(e) => format!("WRONG: {e}"),
            };
            println!("check {kernel:16} n={n:8}: {verdict}");
        }
    }
    if gpus.is_empty() {
        return;
    }
    let reps: usize = arg("--reps").and_then(|s| s.parse().ok()).unwrap_or(20);
    let sizes: Vec<usize> = arg("--sizes-mib")
        .unwrap_or_else(|| "1,64,512".into())
        .split(',')
        .map(|s| s.parse().expect("MiB"))
        .collect();
    let ranks = set.ranks();
    for mib in sizes {
        let n = mib * (1 << 20) / 4;
        let xs = inputs(ranks, n);
        let p = place(set.as_mut(), n, &xs);
        let deadline = Instant::now() + Duration::from_secs(120);
        let zero: Vec<_> = (0..ranks).map(|r| (r, p.flags[r], 4 * FLAGS)).collect();
        let timer = set.timer().expect("GPUs time");
        let nccl = timer
            .nccl_allreduce(&p.input, &p.output, n, reps, deadline)
            .map(median);
        let bytes = 4 * n;
        match &nccl {
            Ok(t) => println!(
                "{mib:4} MiB  NCCL            {:8.1} us  busbw {:7.1} GB/s  ({})",
                t * 1e6,
                allreduce_bus_gbs(ranks, bytes, *t),
                timer.nccl_version().unwrap_or_default()
            ),
            Err(e) => println!("{mib:4} MiB  NCCL: {e}"),
        }
        for kernel in KERNELS {
            let t = timer
                .time_all(kernel, dims(n), &p.params, &zero, &[], reps, deadline)
                .map(median);
            match t {
                Ok(t) => {
                    let bw = allreduce_bus_gbs(ranks, bytes, t);
                    let vs = nccl
                        .as_ref()
                        .map(|c| {
                            format!(
                                "{:5.1} % of NCCL",
                                100.0 * bw / allreduce_bus_gbs(ranks, bytes, *c)
                            )
                        })
                        .unwrap_or_default();
                    println!(
                        "{mib:4} MiB  {kernel:16}{:8.1} us  busbw {bw:7.1} GB/s  {vs}",
                        t * 1e6
                    );
                }
                Err(e) => println!("{mib:4} MiB  {kernel}: {e}"),
            }
        }
    }
}
